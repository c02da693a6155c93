"""Register the JAX implementations when PyTensor's JAX backend is first imported, not before.

``import pm_perm`` must not pay for importing JAX (seconds) in the many programs that never use
it. PyTensor imports :mod:`pytensor.link.jax.dispatch` whenever a graph is compiled for JAX
(``mode="JAX"``, ``pm.sample(nuts_sampler="numpyro" / "blackjax")``, nutpie's JAX backend), so a
one-shot import hook on that module registers :mod:`pm_perm.backends.jax.dispatch` right after
it has loaded. If it is already imported, registration happens at once. ``PM_PERM_NO_JAX=1``
disables both.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

__all__ = ["install"]

_TARGET = "pytensor.link.jax.dispatch"


def _register():
    from pm_perm.backends.jax import dispatch  # noqa: F401  (registers on import)


class _RegisteringLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _register()


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)  # one shot; also keeps find_spec below from recursing
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


def install():
    """Arrange for the JAX implementations to be registered (idempotent)."""
    if os.environ.get("PM_PERM_NO_JAX") == "1":
        return
    if _TARGET in sys.modules:
        _register()
    elif importlib.util.find_spec("jax") is not None and not any(
        isinstance(f, _Hook) for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _Hook())
