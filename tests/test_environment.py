"""import pm_perm works where nothing can be cached (issue 19, class 8): a read-only package
folder and no writable HOME. Simulated for any user (root included) by files named
``__pycache__`` in every package folder and HOME below a regular file, so no cache folder can be
created."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numba
import pytest

import pm_perm
from pm_perm import _numba

SNIPPET = (
    "import numpy as np, pm_perm\n"
    "from pm_perm.kernels._checks import finite_or_minus_inf\n"
    "print(pm_perm.__file__, finite_or_minus_inf(np.zeros((2, 2))))\n"
)


@pytest.fixture(scope="module")
def readonly_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("ro")
    shutil.copytree(Path(pm_perm.__file__).parent, root / "pm_perm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for folder in [root / "pm_perm", *(p for p in (root / "pm_perm").rglob("*") if p.is_dir())]:
        (folder / "__pycache__").write_text("")  # numba cannot create its in-tree cache
    (root / "not-a-folder").write_text("")
    return root


def _run(root, tmp_path, **env):
    base = {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTENSOR_FLAGS", "PYTENSORRC")}
    base.update(PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp_path),
                HOME=str(root / "not-a-folder" / "home"), **env)
    return subprocess.run([sys.executable, "-c", SNIPPET], env=base, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)


def test_import_without_any_writable_cache(readonly_copy, tmp_path):
    out = _run(readonly_copy, tmp_path)
    assert out.returncode == 0, out.stderr
    assert str(readonly_copy) in out.stdout and out.stdout.strip().endswith("True")
    assert "cannot cache function" not in out.stderr
    assert out.stderr.count("NUMBA_CACHE_DIR") == 1  # one warning, naming the fix
    assert out.stderr.count("PYTENSOR_FLAGS") == 1


def test_numba_cache_dir_is_used(readonly_copy, tmp_path):
    cache = tmp_path / "numba-cache"
    out = _run(readonly_copy, tmp_path, NUMBA_CACHE_DIR=str(cache),
               PYTENSOR_FLAGS=f"base_compiledir={tmp_path / 'pt'}")
    assert out.returncode == 0, out.stderr
    assert "NumbaCacheWarning" not in out.stderr
    assert any(cache.rglob("*.nbi"))  # the kernel was cached there


def test_njit_falls_back_once(monkeypatch):
    real = numba.njit

    def refusing(*args, cache=False, **kwargs):
        if cache:
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x'")
        return real(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", refusing)  # pm_perm._numba imports numba when called
    monkeypatch.setitem(_numba._state, "cache", True)
    with pytest.warns(_numba.NumbaCacheWarning, match="NUMBA_CACHE_DIR"):
        f = _numba.njit(cache=True)(lambda x: x + 1)
    g = _numba.njit(cache=True)(lambda x: x * 2)  # no second warning (filterwarnings=error)
    assert f(1) == 2 and g(2) == 4


def test_every_kernel_sets_fastmath_so_it_never_inherits_pytensors():
    """numba lets a jitted function without an explicit ``fastmath`` inherit its caller's, and
    PyTensor's graphs run with fastmath on: a kernel first compiled from a graph lost its NaN
    and convergence checks, and the on-disk cache then served that variant to plain calls
    (the Bethe non-convergence error went missing)."""
    import importlib
    import pkgutil

    import numba

    import pm_perm.kernels as K

    dispatchers = []
    for mod in pkgutil.iter_modules(K.__path__):
        m = importlib.import_module(f"pm_perm.kernels.{mod.name}")
        dispatchers += [v for v in vars(m).values()
                        if isinstance(v, numba.core.registry.CPUDispatcher)
                        and v.py_func.__module__ == m.__name__]
    assert len(dispatchers) > 20
    missing = [d.py_func.__qualname__ for d in dispatchers if "fastmath" not in d.targetoptions]
    assert not missing, missing


HITS = (
    "import numpy as np\n"
    "from pm_perm.kernels._checks import finite_or_minus_inf as f\n"
    "f(np.zeros((2, 2)))\n"
    "print(sum(f.stats.cache_hits.values()))\n"
)


def test_kernels_are_cached_by_content_not_by_install_path(tmp_path):
    """Two installed copies of the same pm_perm source share one compiled kernel (numba's
    default keys its cache by the file's path, so every new environment compiled again); a
    change to ANY file of the package recompiles it."""
    cache = tmp_path / "numba-cache"
    copies = []
    for name in ("a", "b"):
        shutil.copytree(Path(pm_perm.__file__).parent, tmp_path / name / "pm_perm",
                        ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(tmp_path / name)

    def cache_hits(root):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTENSOR_FLAGS", "PYTENSORRC")}
        env.update(PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(cache), TMPDIR=str(tmp_path),
                   PYTHONDONTWRITEBYTECODE="1")  # no bytecode of the copies in the venv's cache
        out = subprocess.run([sys.executable, "-c", HITS], env=env, capture_output=True,
                             text=True, timeout=600, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[-1])

    assert cache_hits(copies[0]) == 0
    assert cache_hits(copies[1]) == 1  # the other copy's compiled code
    assert list((cache / "pm_perm" / "kernels").glob("_checks.finite_or_minus_inf-*.nbi"))
    cli = copies[1] / "pm_perm" / "cli" / "common.py"
    cli.write_text(cli.read_text() + "\n# not a kernel, but part of the package\n")
    assert cache_hits(copies[1]) == 0
    assert cache_hits(copies[0]) == 1  # the two versions' files live side by side
    assert len(list((cache / "pm_perm" / "kernels").glob("_checks.finite_or_minus_inf-*.nbi"))) == 2


def test_files_of_other_versions_are_deleted_after_an_hour(tmp_path):
    stamp = _numba._file_stamp()
    old, now = time.time() - 2 * _numba._STALE_AFTER, time.time()
    files = {  # name: (mtime, kept)
        "k.f-10-0123456789abcdef.py312.nbi": (old, False),  # another version, written long ago
        "k.f-10-0123456789abcdef.py312.1.nbc": (old, False),
        "k.f-10-fedcba9876543210.py312.nbi": (now, True),  # another version, still in use
        f"k.f-10-{stamp}.py312.nbi": (old, True),  # this version
    }
    for name, (mtime, _) in files.items():
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (mtime, mtime))
    _numba._prune(str(tmp_path))
    assert {p.name for p in tmp_path.iterdir()} == {n for n, (_, kept) in files.items() if kept}


def test_cache_folder_is_only_for_pm_perms_files(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    kernels = Path(pm_perm.__file__).parent / "kernels" / "_checks.py"
    assert _numba.cache_folder(kernels) == tmp_path / "pm_perm" / "kernels"
    assert _numba.cache_folder(numba.__file__) is None
    assert _numba.cache_folder("<string>") is None


def test_a_kernel_numba_cannot_cache_gets_numbas_warning():
    """numba refuses to cache code with dynamic globals (with NUMBA_OPT=0 even its random
    generator's state pointer) and warns, naming the kernel's file from the cache locator: with
    pm_perm's locator that raised AttributeError ('_py_file') instead of drawing."""
    from types import SimpleNamespace

    from numba.core.caching import FunctionCache
    from numba.core.errors import NumbaWarning

    from pm_perm.kernels._checks import finite_or_minus_inf

    cache = FunctionCache(finite_or_minus_inf.py_func)
    assert type(cache._impl.locator).__name__ == "PackageCacheLocator"
    cres = SimpleNamespace(lifted=(), library=SimpleNamespace(has_dynamic_globals=True),
                           fndesc=SimpleNamespace(qualname="finite_or_minus_inf"))
    with pytest.warns(NumbaWarning, match="Cannot cache compiled function"):
        assert cache._impl.check_cachable(cres) is False
