"""The numba cache versions (:mod:`pm_perm.kernels._version`) change with every source file that
compiled graphs call: the module itself, any kernel, the calling convention and the distributions'
private helpers (a stale cache would silently run old code)."""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

import pytest

from pm_perm.kernels import _version

PKG = Path(_version.__file__).resolve().parents[1]


@pytest.mark.parametrize("relpath", ["kernels/plackett_luce.py", "ops/extern.py",
                                     "distributions/_patterns.py", "distributions/_params.py"])
def test_version_depends_on_every_called_source(relpath, tmp_path, monkeypatch):
    """Copy the package's sources, change one called file by one byte: the CRC changes."""
    copy = tmp_path / "pm_perm"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_version, "_KERNELS", copy / "kernels")
    monkeypatch.setattr(_version, "_CALLING_CONVENTION", copy / "ops" / "extern.py")
    monkeypatch.setattr(_version, "_DRAW_HELPERS", copy / "distributions")
    before = _version._kernels_crc()
    target = copy / relpath
    target.write_bytes(target.read_bytes() + b"\n")
    assert _version._kernels_crc() != before


def test_code_version_is_a_nonnegative_int_of_the_module():
    v = _version.code_version(_version.__file__)
    assert isinstance(v, int) and 0 <= v < 2**31
    expected = zlib.crc32(Path(_version.__file__).read_bytes(), _version._KERNELS_CRC) & 0x7FFFFFFF
    assert v == expected
