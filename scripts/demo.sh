#!/usr/bin/env bash
# Set up (first run only) and run the end-to-end demo. Output goes to outputs/demo/.
PM_PERM_EXTRAS=examples
source "$(dirname "$0")/_env.sh"
exec "$PYTHON" examples/demo.py "$@"
