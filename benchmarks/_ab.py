"""Loading an older commit's kernel module next to this checkout's, for the A/B benchmark scripts
(``bench_*_ab.py``; run them as ``python benchmarks/<name>.py`` from the repository root)."""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from pathlib import Path

from pm_perm._io import write_text


def load_old(commit, module):
    """The module ``pm_perm/kernels/<module>.py`` as it was at ``commit`` (``git show``), imported
    from a temporary folder under the name ``old_<module>``, its kernels compiled without numba's
    cache (the old and new files would otherwise share cache entries)."""
    src = subprocess.run(["git", "show", f"{commit}:pm_perm/kernels/{module}.py"], check=True,
                         capture_output=True, text=True).stdout
    src = src.replace("from pm_perm._numba import njit",
                      "from numba import njit as _njit\n\n\n"
                      "def njit(*args, cache=False, **kwargs):\n    return _njit(*args, **kwargs)")
    path = Path(tempfile.mkdtemp(prefix="pm_perm_ab_")) / f"old_{module}.py"
    write_text(path, src)
    spec = importlib.util.spec_from_file_location(f"old_{module}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded
