# Sourced by the scripts in this folder: find_python prints the path of a Python >= 3.12.
find_python() {
  local cand
  for cand in python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      command -v "$cand"; return 0
    fi
  done
  # pyenv installs a python3.12 shim that only works when 3.12 is the selected version
  for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
    if [ -x "$cand" ]; then echo "$cand"; return 0; fi
  done
  echo "error: pm_perm needs Python >= 3.12 (python3.12 not found)" >&2
  return 1
}
