#!/usr/bin/env bash
# usage: scripts/empty_venv.sh DIR
# A plain `pip install` of this checkout into a new, EMPTY virtual environment DIR (no system site
# packages, no extras): what tests/test_packaging.py checks the console command in. Run alone, the
# test runs this script; .ci/run runs it while .venv is being set up (a core is idle then), and the
# test takes the environment through PM_PERM_EMPTY_VENV. DIR must not exist.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/_python.sh"
dir="${1:?usage: scripts/empty_venv.sh DIR}"
if [ -e "$dir" ]; then echo "error: $dir exists; give a new folder" >&2; exit 2; fi
"$(find_python)" -m venv "$dir"
# pip's plain install of the declared dependencies, without bytecode compilation (the commands
# compile what they import), and without this shell's PYTHONPATH or venv
env -u PYTHONPATH -u VIRTUAL_ENV "$dir/bin/python" -m pip install -q --no-compile "$ROOT" \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
touch "$dir/.pm_perm-installed"
