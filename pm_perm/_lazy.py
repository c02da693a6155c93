"""Package attributes imported on first use (PEP 562), for ``pm_perm`` and its subpackages, so
that a program imports only the parts it touches (``pm-perm --help`` needs neither PyMC nor
numba)."""

from __future__ import annotations

import importlib
import importlib.util


def lazy_attributes(package, names, namespace):
    """``(__getattr__, __dir__)`` for the package named ``package`` whose globals are
    ``namespace``: the public ``names`` (name -> the module that defines it) and the package's
    submodules are imported on first access, then kept in ``namespace`` (the second access is
    the same object, without a call)."""

    def __getattr__(name):
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
        elif (not name.startswith("__")
              and importlib.util.find_spec(f"{package}.{name}") is not None):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
