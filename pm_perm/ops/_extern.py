"""Kernels called from PyTensor's compiled graphs through a C symbol, not by inlining their code.

Why: numba links the LLVM code of every function a jitted function calls into the caller's module
and then optimises and compiles that whole module to machine code again. The numba
implementation of an Op is compiled inside every PyTensor function that uses it (``logp``,
``dlogp``, ``find_MAP``'s value-and-gradient, NUTS, posterior predictive, ...), and each of those
layers (Op wrapper, Blockwise loop, graph function) re-compiled the whole permanent kernel: on an
empty cache, 3 to 5 times per graph (measured in ``benchmarks/bench_first_use.py``).

How: the kernel is compiled ONCE (per numba cache; ``cache=True``) as a C callable
(``numba.cfunc``), its address is registered with LLVM under a fixed symbol name, and the Op's
numba implementation calls it as an ``ExternalFunction`` by that name. The graph's module then
holds only a call instruction; PyTensor's on-disk cache of the graph stays valid because the
symbol name (not an address) is what it stores, and the symbol is registered again by the Op's
funcify (which PyTensor runs before it loads or compiles a graph) in every new process.

The callee cannot raise (a C callable has no Python exception channel): kernels exposed here must
report bad input by their return value (NaN), and the Op wrapper checks shapes before the call.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from llvmlite import binding as ll
from numba import types

from pm_perm._numba import cfunc

__all__ = ["extern_kernel"]


class ExternKernel(NamedTuple):
    compiled: object  #: the ``numba.cfunc`` object (``.ctypes`` calls it from Python)
    external: types.ExternalFunction  #: what numba code calls


def extern_kernel(symbol: str, signature, py_func):
    """Return a function that compiles ``py_func`` as a C callable with ``signature`` (cached
    on disk by numba), registers it with LLVM as ``symbol`` and returns an
    :class:`ExternKernel`. The compilation happens on the first call, not at import."""

    @functools.cache
    def ensure():
        compiled = cfunc(signature, py_func, cache=True)
        ll.add_symbol(symbol, compiled.address)
        return ExternKernel(compiled, types.ExternalFunction(symbol, signature))

    return ensure
