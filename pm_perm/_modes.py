"""PyTensor compilation modes pm_perm chooses for itself (private).

``PYTHON_MODE`` is PyTensor's Python linker with the default ``fast_run`` rewrites, less fusion (a
fused ``Elemwise`` runs a Python loop per element in ``perform``): every node runs its Op's
``perform``, which for pm_perm's Ops calls the same compiled (and disk-cached) numba kernels as
the numba backend. It compiles nothing, so a graph costs its rewrites only (well under a second)
instead of numba's type inference and LLVM code generation (a ranking model's value-and-gradient
graph: 10-30 s on a new machine, then loaded from PyTensor's cache), at a few microseconds of
Python per node and call. It suits graphs evaluated a few hundred times (a MAP fit); a sampler,
which evaluates its graph thousands of times, keeps the default backend.
"""

from __future__ import annotations

from pytensor.compile.mode import Mode
from pytensor.graph.rewriting.db import RewriteDatabaseQuery
from pytensor.link.vm import VMLinker

__all__ = ["PYTHON_MODE"]

PYTHON_MODE = Mode(VMLinker(use_cloop=False, c_thunks=False),
                   RewriteDatabaseQuery(include=["fast_run", "py_only"], exclude=["fusion"]))
