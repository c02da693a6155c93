"""The one place that decides whether numba caches pm_perm's compiled kernels on disk.

Every kernel is decorated with :func:`njit` from here (``@njit(cache=True)`` as with numba's).
numba writes its cache next to the source (``__pycache__``), or, when that folder is not
writable, in a per-user folder (``~/.cache/numba``), or in ``NUMBA_CACHE_DIR`` when that is set.
If none of them is writable (a read-only installation and no writable HOME), numba refuses
``cache=True`` with "cannot cache function ...". pm_perm then compiles without a cache (every
new process compiles again, correct but slower to start) and says so ONCE with a
:class:`NumbaCacheWarning`. Set ``NUMBA_CACHE_DIR`` to a writable folder to keep the compiled
code between processes.

PyTensor (which compiles the models) keeps its own cache in ``~/.pytensor`` and fails to import
when that cannot be created; :func:`prepare_pytensor_cache`, run by ``import pm_perm`` before
PyTensor is imported, then points PyTensor at a fresh temporary folder (one warning). Set
``PYTENSOR_FLAGS=base_compiledir=<writable folder>`` to choose it yourself.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path

__all__ = ["NumbaCacheWarning", "cfunc", "njit", "prepare_pytensor_cache"]

_state = {"cache": True}


class NumbaCacheWarning(RuntimeWarning):
    """numba cannot cache compiled code here; pm_perm compiles without a cache."""


def _cached_or_not(make):
    """``make(cache)`` with ``cache=True`` when numba can write a cache, else ``make(False)``
    (warning once)."""
    if _state["cache"]:
        try:
            return make(True)
        except RuntimeError as err:
            if "cannot cache" not in str(err):
                raise
            _state["cache"] = False
            warnings.warn(
                "pm_perm: numba cannot write its cache (read-only package folder and no "
                "writable ~/.cache); compiling without a cache. Set NUMBA_CACHE_DIR to a "
                "writable folder to keep compiled code between runs.",
                NumbaCacheWarning,
                stacklevel=3,
            )
    return make(False)


def njit(*args, cache=False, **kwargs):
    """``numba.njit`` with ``cache=True`` when numba can write a cache, else without (warning
    once). Used as ``@njit(cache=True, ...)``.

    ``fastmath`` is always set (``False`` unless the kernel asks for it): numba lets a function
    whose ``fastmath`` is not set inherit its CALLER's, and PyTensor compiles its graphs with
    fastmath on. A kernel first compiled from a graph then ran with fastmath's no-NaN/no-inf
    assumptions, which fold away the kernels' NaN and convergence checks, and numba's on-disk
    cache (whose key does not hold the flags) served that variant to later plain calls too.
    """
    import numba  # here, not at the top: ``import pm_perm`` runs prepare_pytensor_cache (0.4 s)

    kwargs.setdefault("fastmath", False)
    if args and callable(args[0]):  # bare @njit
        return njit(cache=cache, **kwargs)(args[0])

    def decorate(func):
        if not cache:
            return numba.njit(*args, **kwargs)(func)
        return _cached_or_not(lambda c: numba.njit(*args, cache=c, **kwargs)(func))

    return decorate


def cfunc(signature, func, cache=False):
    """``numba.cfunc(signature, cache=...)(func)`` with the same cache decision as :func:`njit`."""
    import numba

    if not cache:
        return numba.cfunc(signature)(func)
    return _cached_or_not(lambda c: numba.cfunc(signature, cache=c)(func))


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def prepare_pytensor_cache():
    """Before PyTensor is imported: if its default cache folder (``$HOME/.pytensor``) cannot
    be written and ``PYTENSOR_FLAGS`` does not choose one, use a temporary folder (warning
    once). Does nothing when PyTensor is already imported."""
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    if "pytensor" in sys.modules or "compiledir" in flags or os.environ.get("PYTENSORRC"):
        return
    home = os.getenv("HOME")
    home = Path(home) if home is not None else Path.home()
    if _writable(home / ".pytensor"):
        return
    folder = tempfile.mkdtemp(prefix="pm_perm-pytensor-")
    os.environ["PYTENSOR_FLAGS"] = ",".join(x for x in (flags, f"base_compiledir={folder}") if x)
    warnings.warn(
        f"pm_perm: PyTensor cannot write its cache in {home / '.pytensor'}; using {folder} for "
        "this process. Set PYTENSOR_FLAGS=base_compiledir=<writable folder> to keep it.",
        NumbaCacheWarning,
        stacklevel=3,
    )
