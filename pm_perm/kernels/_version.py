"""Cache versions for the numba implementations registered with PyTensor.

PyTensor caches the compiled numba code of a graph on disk, keyed by the Op's type, its props and
the integer version its registration returns; it does NOT see changes in the kernels that code
calls. A stale cache silently runs old kernels (we hit this: an outdated two-table DP kept
running inside compiled graphs after the kernel changed). So every registration returns
:func:`code_version` of its own module, which hashes that module, every kernel source file and
``pm_perm/ops/extern.py`` (how graphs call the kernels) and the distributions' private helper
modules (``pm_perm/distributions/_*.py``: the draw functions call, e.g., the pattern coarsening of
``_patterns.py``): any change to the numerics or to the calling convention invalidates the cached
graphs.
"""

from __future__ import annotations

import zlib
from pathlib import Path

_KERNELS = Path(__file__).resolve().parent


# the calling convention of the kernels' C symbols: a cached graph calls a kernel by its symbol
# with the arguments of the convention it was compiled with (a changed convention in a stale
# graph is a crash, not a wrong number)
_CALLING_CONVENTION = _KERNELS.parent / "ops" / "extern.py"

# helpers the compiled draw functions of the distributions call (coarsening to a pattern, ...)
_DRAW_HELPERS = _KERNELS.parent / "distributions"


def _kernels_crc() -> int:
    crc = 0
    for path in [*sorted(_KERNELS.glob("*.py")), _CALLING_CONVENTION,
                 *sorted(_DRAW_HELPERS.glob("_*.py"))]:
        crc = zlib.crc32(path.read_bytes(), crc)
    return crc


_KERNELS_CRC = _kernels_crc()


def code_version(module_file: str) -> int:
    """Non-negative int identifying the sources of ``module_file`` and of all kernels."""
    return zlib.crc32(Path(module_file).read_bytes(), _KERNELS_CRC) & 0x7FFFFFFF
