"""PyTensor compilation modes pm_perm chooses for itself (private).

``PYTHON_MODE`` is PyTensor's Python linker with the default ``fast_run`` rewrites, less fusion (a
fused ``Elemwise`` runs a Python loop per element in ``perform``): every node runs its Op's
``perform``, which for pm_perm's Ops calls the same compiled (and disk-cached) numba kernels as
the numba backend. It compiles nothing, so a graph costs its rewrites only (well under a second)
instead of numba's type inference and LLVM code generation (a ranking model's value-and-gradient
graph: 10-30 s on a new machine, then loaded from PyTensor's cache), at a few microseconds of
Python per node and call. It suits graphs evaluated a few hundred times (a MAP fit); a sampler,
which evaluates its graph thousands of times, keeps the default backend.

**Symbolic Ops are inlined.** PyTensor writes ``softmax``, ``log_softmax`` (a Dirichlet's simplex
transform, a mixture's weights) and some linear-algebra products as Ops holding an inner graph
(``FusibleSymbolicOp``), which the fusion pass inlines. Without fusion they stay Ops, and PyTensor
links each one's inner graph with C thunks even under a Python linker: on an empty PyTensor cache
that ran the C compiler a dozen times (and built PyTensor's C virtual machine) for one ranking
model's MAP fit, about 5.5 s of CPU. ``PYTHON_MODE`` runs PyTensor's own inlining step of the
fusion pass (``inline_symbolic_for_fusion``) at the fusion pass's place, registered under the tag
``pm_perm_inline_symbolic``, which only this mode includes; the inlined nodes then run in
Python like the rest of the graph.
"""

from __future__ import annotations

from pytensor.compile.mode import Mode, optdb
from pytensor.graph.rewriting.basic import dfs_rewriter
from pytensor.graph.rewriting.db import RewriteDatabaseQuery
from pytensor.link.vm import VMLinker

__all__ = ["INLINE_SYMBOLIC_TAG", "PYTHON_MODE"]

#: optdb tag of the inlining step PYTHON_MODE adds to ``fast_run`` (see the module docstring)
INLINE_SYMBOLIC_TAG = "pm_perm_inline_symbolic"


def _register_inline_symbolic() -> list[str]:
    """Register PyTensor's ``inline_symbolic_for_fusion`` in ``optdb`` under
    :data:`INLINE_SYMBOLIC_TAG` alone (no default mode includes it), just before the fusion pass
    (49) and the inner-graph compilation (49.6). Returns the tags to include: none when this
    PyTensor has no such rewrite (then the symbolic Ops stay, as before)."""
    try:
        from pytensor.tensor.rewriting.ofg import inline_symbolic_for_fusion
    except ImportError:  # pragma: no cover - a PyTensor without FusibleSymbolicOp
        return []
    name = f"{INLINE_SYMBOLIC_TAG}_rewrite"  # a name must differ from every tag
    if name not in optdb:
        optdb.register(name, dfs_rewriter(inline_symbolic_for_fusion),
                       INLINE_SYMBOLIC_TAG, position=48.9)
    return [INLINE_SYMBOLIC_TAG]


PYTHON_MODE = Mode(VMLinker(use_cloop=False, c_thunks=False),
                   RewriteDatabaseQuery(include=["fast_run", "py_only",
                                                 *_register_inline_symbolic()],
                                        exclude=["fusion"]))
