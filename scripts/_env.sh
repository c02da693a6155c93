# Sourced by the scripts in this folder: finds Python >= 3.12 and makes the project's
# virtual environment (.venv) with the extras given in $PM_PERM_EXTRAS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

source "$ROOT/scripts/_python.sh"  # find_python

VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  PY="$(find_python)"
  echo "==> creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.installed-${PM_PERM_EXTRAS:-base}"
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  echo "==> installing pm_perm[${PM_PERM_EXTRAS:-}] into .venv"
  # uv (installed into the venv by pip) installs the same packages in about 5 s where pip took
  # 38 s with its download cache warm (docs/benchmarks.md, "First use"); pip does it when uv
  # cannot be had. (This machine's pip config names optional local mirrors: drop the "is
  # ignored" noise.)
  { { "$VENV/bin/python" -m pip install -q uv &&
      "$VENV/bin/python" -m uv pip install -q --python "$VENV/bin/python" \
        -e ".[${PM_PERM_EXTRAS:-}]"; } ||
    { echo "==> uv failed; installing with pip" &&
      "$VENV/bin/python" -m pip install -q --upgrade pip &&
      "$VENV/bin/python" -m pip install -q -e ".[${PM_PERM_EXTRAS:-}]"; }; } \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  touch "$STAMP"
fi
PYTHON="$VENV/bin/python"
# Python's bytecode cache for this venv's processes, in .venv/pycache (none in the source tree),
# written even where PYTHONDONTWRITEBYTECODE is set: without it every new process (test workers,
# CLI runs, sampler processes) compiled pymc's, pytensor's and numba's sources again, about 3 s
# of CPU each (docs/benchmarks.md, "First use").
export PYTHONPYCACHEPREFIX="$VENV/pycache"
unset PYTHONDONTWRITEBYTECODE
