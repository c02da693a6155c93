"""The one place that decides how numba caches pm_perm's compiled kernels on disk.

Every kernel is decorated with :func:`njit` (or :func:`cfunc`) from here (``@njit(cache=True)``
as with numba's).

Where: pm_perm's kernels are cached by CONTENT, not by the place the package is installed:
in ``$NUMBA_CACHE_DIR/pm_perm`` when ``NUMBA_CACHE_DIR`` is set, else in the per-user cache
folder (``~/.cache/pm_perm/numba`` on Linux), one subfolder per package folder. So every
virtual environment, clone or reinstall of the same pm_perm source on a machine shares one
compiled copy (numba's default keys its cache by the file's path: each new environment
compiled every kernel again, 40-60 s of CPU).

When it is invalidated: the cache of every kernel is stamped with a hash of ALL of pm_perm's
Python sources (computed once per process, a few milliseconds), so any change to the package
recompiles its kernels. numba's own stamp is the kernel's file alone, which misses changes in the
kernels it calls and in the module constants it freezes into the compiled code. numba adds its own
checks (numba and Python version, CPU, argument types). The stamp is part of every file name, so
two versions in use at once never read each other's files; files of another version are deleted
an hour after they were written, when a process first uses the folder.

When the folder cannot be written, numba's default places are tried (``__pycache__`` next to the
source, then ``~/.cache/numba``). If none of them is writable (a read-only installation and no
writable HOME), numba refuses ``cache=True`` with "cannot cache function ...". pm_perm then
compiles without a cache (every new process compiles again, correct but slower to start) and
says so ONCE with a :class:`NumbaCacheWarning`. Set ``NUMBA_CACHE_DIR`` to a writable folder to
keep the compiled code between processes.

PyTensor (which compiles the models) keeps its own cache in ``~/.pytensor`` and fails to import
when that cannot be created; :func:`prepare_pytensor_cache`, run by ``import pm_perm`` before
PyTensor is imported, then points PyTensor at a fresh temporary folder (one warning). Set
``PYTENSOR_FLAGS=base_compiledir=<writable folder>`` to choose it yourself.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import warnings
from pathlib import Path

__all__ = ["NumbaCacheWarning", "cache_folder", "cfunc", "njit", "prepare_pytensor_cache"]

_PACKAGE = Path(__file__).resolve().parent
_state = {"cache": True, "locator": False}


def _package_stamp() -> str:
    """sha256 (hex) of every Python source of pm_perm, relative path and bytes; once per
    process."""
    if "stamp" not in _state:
        digest = hashlib.sha256()
        for path in sorted(_PACKAGE.rglob("*.py")):
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        _state["stamp"] = digest.hexdigest()
    return _state["stamp"]


_STAMP_CHARS = 16
_STALE_AFTER = 3600.0  # seconds: files of other versions of pm_perm older than this are deleted


def _file_stamp() -> str:
    """The part of the package stamp that every cache file's name carries."""
    return _package_stamp()[:_STAMP_CHARS]


def _prune(folder: str) -> None:
    """Delete the cache files in ``folder`` (one of pm_perm's own) that another version of the
    package wrote more than ``_STALE_AFTER`` seconds ago, so that upgrades and edits do not pile
    up compiled code. Safe for a process of that version still running: numba compiles again
    when a file its index names is gone."""
    import time

    stamp = f"-{_file_stamp()}."
    cutoff = time.time() - _STALE_AFTER
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if (stamp not in entry.name and entry.is_file(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_mtime < cutoff):
                os.unlink(entry.path)
        except OSError:
            pass


def _cache_root() -> Path:
    import numba

    if numba.config.CACHE_DIR:
        return Path(numba.config.CACHE_DIR) / "pm_perm"
    try:
        from numba.misc.appdirs import user_cache_dir
    except ImportError:  # pragma: no cover - numba without its appdirs copy
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "pm_perm" / "numba"
    return Path(user_cache_dir(appname="pm_perm", appauthor=False)) / "numba"


def cache_folder(py_file) -> Path | None:
    """The folder where pm_perm caches the kernels defined in ``py_file`` (a source file of
    this package; ``None`` for any other file). The folder may not exist yet."""
    try:
        rel = Path(py_file).resolve().relative_to(_PACKAGE)
    except (OSError, ValueError):
        return None
    return _cache_root().joinpath(*rel.parent.parts)


def _install_locator():
    """Put pm_perm's cache locator in front of numba's own (once per process). Not when the
    package is not a folder of source files (a zip import): its sources cannot be hashed."""
    _state["locator"] = True
    if not (_PACKAGE / "_numba.py").is_file():
        return
    try:
        from numba.core import caching

        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
        base = caching._CacheLocator
    except (ImportError, AttributeError):  # pragma: no cover - a numba without these: default
        return
    ready = set()

    class PackageCacheLocator(base):
        """numba cache locator for pm_perm's kernels: the folder of :func:`cache_folder`,
        stamped with the hash of the package's sources."""

        def __init__(self, py_func, py_file, folder):
            self._lineno = py_func.__code__.co_firstlineno
            self._py_file = py_file  # numba's "Cannot cache" warning names the kernel's file
            self._folder = str(folder)

        def ensure_cache_path(self):
            if self._folder not in ready:
                super().ensure_cache_path()  # creates it and checks that it can be written
                ready.add(self._folder)
                _prune(self._folder)

        def get_cache_path(self):
            return self._folder

        def get_source_stamp(self):
            return _package_stamp()

        def get_disambiguator(self):
            # the stamp is in every file name: processes of two versions of pm_perm never read
            # each other's files (numba checks the stamp in the index, not in the data files)
            return f"{self._lineno}-{_file_stamp()}"

        @classmethod
        def from_function(cls, py_func, py_file):
            folder = cache_folder(py_file)
            if folder is None:
                return None
            self = cls(py_func, py_file, folder)
            try:
                self.ensure_cache_path()
            except OSError:
                return None  # numba tries its own places next
            return self

    # after locators of other libraries (PyTensor's, for its generated code), before numba's own
    classes = impl._locator_classes
    at = next((i for i, c in enumerate(classes) if c.__module__ == caching.__name__),
              len(classes))
    classes.insert(at, PackageCacheLocator)


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


def _numba():
    """The numba module, with pm_perm's cache locator installed (once per process). Imported
    here, not at the top: ``import pm_perm`` runs :func:`prepare_pytensor_cache` only (0.4 s
    less)."""
    import numba

    if not _state["locator"]:
        _install_locator()
    return numba


def njit(*args, cache=False, **kwargs):
    """``numba.njit`` with ``cache=True`` when numba can write a cache, else without (warning
    once). Used as ``@njit(cache=True, ...)``.

    ``fastmath`` is always set (``False`` unless the kernel asks for it): numba lets a function
    whose ``fastmath`` is not set inherit its CALLER's, and PyTensor compiles its graphs with
    fastmath on. A kernel first compiled from a graph then ran with fastmath's no-NaN/no-inf
    assumptions, which fold away the kernels' NaN and convergence checks, and numba's on-disk
    cache (whose key does not hold the flags) served that variant to later plain calls too.
    """
    numba = _numba()
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
    numba = _numba()
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
