#!/usr/bin/env bash
# Set up (first run only) and run the end-to-end demo: learned matching (plots in outputs/demo/),
# then learning to rank with RankMatch on generated LETOR-like data. Arguments go to the first.
PM_PERM_EXTRAS=examples
source "$(dirname "$0")/_env.sh"
"$PYTHON" examples/demo.py "$@"
echo
echo "==> learning to rank: RankMatch on generated LETOR-like data (examples/demo_ranking.py)"
"$PYTHON" examples/demo_ranking.py
