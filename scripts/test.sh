#!/usr/bin/env bash
# Set up (first run only) and run the default test suite (slow tests: add --runslow).
# Tests run in parallel worker processes, one per core up to 4 (pytest-xdist; each test file
# stays in one worker, so the functions a file compiles once serve all its tests; see
# tests/conftest.py). PM_PERM_TEST_WORKERS=0 runs them in this process (e.g. for pdb); a number
# sets the workers.
PM_PERM_EXTRAS=test
source "$(dirname "$0")/_env.sh"
workers="${PM_PERM_TEST_WORKERS:-$("$PYTHON" -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}"
# one numba thread per worker when the workers already fill the cores
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" NUMBA_NUM_THREADS="${NUMBA_NUM_THREADS:-$([ "$workers" -gt 1 ] && echo 1 || echo 2)}"
if [ "$workers" -gt 0 ]; then
  exec "$PYTHON" -m pytest -n "$workers" --dist loadfile "$@"
fi
exec "$PYTHON" -m pytest "$@"
