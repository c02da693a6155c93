#!/usr/bin/env bash
# Set up (first run only) and run the default test suite (slow tests: add --runslow).
PM_PERM_EXTRAS=test
source "$(dirname "$0")/_env.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" NUMBA_NUM_THREADS="${NUMBA_NUM_THREADS:-2}"
exec "$PYTHON" -m pytest "$@"
