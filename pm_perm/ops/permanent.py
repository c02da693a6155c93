"""PyTensor Ops for the exact log-permanent and the permutation marginals.

* ``log_permanent(W)``: ``(..., M, M) -> (...)``, ``log perm(exp W)``; its gradient is
  ``g[..., None, None] * permutation_marginals(W)``.
* ``permutation_marginals(W)``: ``(..., M, M) -> (..., M, M)``, ``P[i, j] = p(y[i] = j)``.

Both are ``Blockwise`` wrappers of core Ops (signatures ``(m,m)->()`` and ``(m,m)->(m,m)``)
with numba implementations, so PyTensor's default numba linker and nutpie run them natively.
A graph that needs the value and the gradient (logp and dlogp in find_MAP or NUTS) would run the
forward pass twice; the ``specialize`` rewrite ``fuse_log_permanent_and_marginals`` replaces the
pair by one ``LogPermanentAndMarginals`` node (one forward-backward pass). A graph that needs
only the value (slice sampling, ``pm.logp``) keeps the cheaper value-only Op.

Every Op has a ``method`` prop: ``"dp"`` (default) runs the subset dynamic program of
:mod:`pm_perm.kernels.permanent` (2^M float64 of memory, M up to :func:`exact_max_m`);
``"glynn"`` runs Glynn's formula of :mod:`pm_perm.kernels.glynn` (O(M^2) memory, M up to
``GLYNN_MAX_M`` = 32, O(M 2^(M-1)) time, exact up to the rounding of a cancelling sum) for the
sizes whose DP table does not fit.

Inputs with NaN, ``+inf`` or finite entries beyond ``LOGIT_ABS_MAX`` (1e300) give NaN outputs
(PyMC's parameter checks turn them into ``-inf`` log-probabilities or errors upstream); M beyond
the method's limit (for ``"dp"`` ``EXACT_MAX_M`` and the memory budget, fixed when the graph is
built) raises ``ValueError``.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.rewriting.basic import register_specialize

from pm_perm.kernels._version import code_version
from pm_perm.kernels.glynn import (
    GLYNN_MAX_M,
    check_glynn_size,
    ensure_parallel_runtime,
    make_glynn_kernel,
)
from pm_perm.kernels.permanent import (
    EXACT_LIMIT_ADVICE,
    EXACT_MAX_M,
    check_exact_size,
    make_log_permanent_kernel,
    memory_budget,
)
from pm_perm.ops._blockwise import core_op_of
from pm_perm.ops._shapes import check_static_square
from pm_perm.ops.extern import StatusError, extern_kernel

__all__ = [
    "METHODS",
    "LogPermanent",
    "LogPermanentAndMarginals",
    "PermutationMarginals",
    "exact_max_m",
    "log_permanent",
    "log_permanent_and_marginals",
    "permutation_marginals",
]


def exact_max_m() -> int:
    """Largest M the exact Ops accept now: ``EXACT_MAX_M`` capped by the memory budget
    (one table of 2^M float64)."""
    m = EXACT_MAX_M
    while m > 1 and 8 * (1 << m) > memory_budget():
        m -= 1
    return m


#: The values of the Ops' ``method`` prop.
METHODS = ("dp", "glynn")

_SIZE_CHECKS = {"dp": check_exact_size, "glynn": check_glynn_size}


def _as_core_logits(W, max_m, method):
    W = pt.as_tensor_variable(W)
    if W.type.ndim != 2:
        raise TypeError(f"core permanent Op expects a (M, M) matrix; got ndim={W.type.ndim}")
    if W.type.dtype not in pt.type.float_dtypes:
        raise TypeError(f"logits must be floating point; got dtype {W.type.dtype}")
    check_static_square(W, max_m, _SIZE_CHECKS[method])
    return pt.cast(W, "float64")


class _PermanentOp(Op):
    """Shared construction: ``max_m`` and ``method`` are the props (and so part of the numba
    cache key). ``max_m`` defaults to :func:`exact_max_m` for ``"dp"`` and ``GLYNN_MAX_M`` for
    ``"glynn"``."""

    __props__ = ("max_m", "method")

    def __init__(self, max_m=None, method="dp"):
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not one of {METHODS}")
        self.method = method
        default = exact_max_m() if method == "dp" else GLYNN_MAX_M
        self.max_m = int(default if max_m is None else max_m)

    def _check_runtime(self, W):
        if W.shape[-1] != W.shape[-2]:
            raise ValueError(f"logits must be square (M, M); got shape {W.shape}")
        if W.shape[-1] > self.max_m:
            _SIZE_CHECKS[self.method](W.shape[-1])
            raise ValueError(f"M = {W.shape[-1]} is beyond the exact limit {self.max_m}")


class LogPermanent(_PermanentOp):
    """Core Op ``log perm(exp W)`` for ``W`` (M, M) -> (); see :mod:`pm_perm.kernels.permanent`."""

    gufunc_signature = "(m,m)->()"

    def make_node(self, W):
        W = _as_core_logits(W, self.max_m, self.method)
        return Apply(self, [W], [pt.tensor(dtype="float64", shape=())])

    def perform(self, node, inputs, output_storage):
        (W,) = inputs
        self._check_runtime(W)
        output_storage[0][0] = np.asarray(_run_kernel(W, False, self.method)[0], dtype=np.float64)

    def infer_shape(self, node, input_shapes):
        return [()]

    def pullback(self, inputs, outputs, cotangents):
        (W,) = inputs
        (g,) = cotangents
        marginals = _KernelBlockwise(PermutationMarginals(self.max_m, self.method))(W)
        return [g[..., None, None] * marginals]


class PermutationMarginals(_PermanentOp):
    """Core Op ``P[i, j] = p(y[i] = j)`` for ``W`` (M, M) -> (M, M)."""

    gufunc_signature = "(m,m)->(m,m)"

    def make_node(self, W):
        W = _as_core_logits(W, self.max_m, self.method)
        return Apply(self, [W], [pt.tensor(dtype="float64", shape=W.type.shape)])

    def perform(self, node, inputs, output_storage):
        (W,) = inputs
        self._check_runtime(W)
        output_storage[0][0] = _run_kernel(W, True, self.method)[1]

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        return [grad_not_implemented(self, 0, inputs[0], "second derivatives of log perm")]


class LogPermanentAndMarginals(_PermanentOp):
    """Core Op returning ``(log perm(exp W) (), P (M, M))`` from one forward-backward pass.

    Created by the ``fuse_log_permanent_and_marginals`` rewrite; also usable directly.
    """

    gufunc_signature = "(m,m)->(),(m,m)"

    def make_node(self, W):
        W = _as_core_logits(W, self.max_m, self.method)
        outs = [pt.tensor(dtype="float64", shape=()),
                pt.tensor(dtype="float64", shape=W.type.shape)]
        return Apply(self, [W], outs)

    def perform(self, node, inputs, output_storage):
        (W,) = inputs
        self._check_runtime(W)
        v, P = _run_kernel(W, True, self.method)
        output_storage[0][0] = np.asarray(v, dtype=np.float64)
        output_storage[1][0] = P

    def infer_shape(self, node, input_shapes):
        return [(), input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        (W,) = inputs
        g_v, g_p = cotangents
        if not isinstance(g_p.type, DisconnectedType):
            return [grad_not_implemented(self, 0, W, "second derivatives of log perm")]
        if isinstance(g_v.type, DisconnectedType):
            return [pt.zeros_like(W)]
        return [g_v[..., None, None] * outputs[1]]


# ----------------------------------------------------------------------------- the kernel
# The compiled graphs call the kernel through a C symbol (see pm_perm.ops.extern): its code is
# compiled once per numba cache, not again inside every PyTensor function that uses the Ops.
# ``perform`` (PyTensor's Python linker) calls the same compiled kernel through ctypes.

_ADVICE = EXACT_LIMIT_ADVICE

_F64_PTR = types.CPointer(types.float64)
_SIGNATURE = types.float64(_F64_PTR, types.intp, _F64_PTR, types.intc)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = {
    "dp": extern_kernel("pm_perm_log_permanent_kernel", _SIGNATURE,
                        make_log_permanent_kernel(_VERSION)),
    "glynn": extern_kernel("pm_perm_log_permanent_glynn_kernel", _SIGNATURE,
                           make_glynn_kernel(_VERSION)),
}


def _kernel(method):
    """The compiled C kernel of ``method`` (compiled or loaded from numba's cache once)."""
    if method == "glynn":
        ensure_parallel_runtime()  # before numba loads the cached callable (see kernels.glynn)
    return _EXTERN[method]()


class _SizeError(StatusError):
    """The run-time size errors of the numba implementations (symbolic shapes), with the
    messages of the static checks (see :class:`StatusError`): ``_SizeError(status, *ints)``."""

    messages = (
        (ValueError, ""),
        (ValueError, "logits must be square (..., M, M); got {} x {}"),
        (ValueError, "M = {} is beyond the exact limit EXACT_MAX_M = {}"
         + _ADVICE.replace("{", "{{").replace("}", "}}")),
        (ValueError, "M = {} is beyond GLYNN_MAX_M = {} of the exact Glynn method (2^(M-1) "
                     "terms: hours). Use the Bethe approximation (method='bethe') or the "
                     "Huber-Law sampler (pm_perm.kernels.huber_law)."),
    )


_NOT_SQUARE = 1
_TOO_LARGE = {"dp": 2, "glynn": 3}


def _run_kernel(W, marginals, method="dp"):
    """``(value, P or None)`` for one core matrix in Python (NaN for bad input)."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    M = W.shape[0]
    P = np.empty((M, M)) if marginals else W
    v = _kernel(method)(W, M, P, int(marginals))
    return v, (P if marginals else None)


@functools.cache
def _batch_runner(method):
    """A compiled loop ``run(W, P, marginals) -> values`` over C-contiguous ``W`` (n, M, M) that
    calls the C kernel once per matrix (its code is not compiled again here: the loop calls the
    kernel's symbol, so it compiles in a fraction of a second; not cached on disk, as the
    kernel's address is only known at run time)."""
    kernel = _kernel(method).external

    @numba.njit
    def run(W, P, marginals):
        n = W.shape[0]
        M = W.shape[1]
        out = np.empty(n)
        for b in range(n):
            out[b] = kernel(W[b].ctypes, M, P[b].ctypes, marginals)
        return out

    return run


class _KernelBlockwise(Blockwise):
    """The ``Blockwise`` of the permanent Ops. On PyTensor's Python linker its ``perform`` runs the
    whole batch in one compiled loop (:func:`_batch_runner`) instead of PyTensor's Python loop,
    whose per-matrix overhead dominates for small matrices (a RankMatch evaluation has about
    10^4 of them). The numba and JAX backends compile it as any ``Blockwise``."""

    def prepare_node(self, node, storage_map, compute_map, impl=None):
        pass  # Blockwise prepares a per-matrix Python loop here, which perform does not use

    def perform(self, node, inputs, output_storage):
        (W,) = inputs
        core = self.core_op
        core._check_runtime(W)
        batch, M = W.shape[:-2], W.shape[-1]
        flat = np.ascontiguousarray(W, dtype=np.float64).reshape((-1, M, M))
        marginals = not isinstance(core, LogPermanent)
        P = np.empty_like(flat) if marginals else flat
        values = _batch_runner(core.method)(flat, P, int(marginals)).reshape(batch)
        if isinstance(core, LogPermanent):
            output_storage[0][0] = values
        elif isinstance(core, PermutationMarginals):
            output_storage[0][0] = P.reshape(W.shape)
        else:
            output_storage[0][0] = values
            output_storage[1][0] = P.reshape(W.shape)


def _size_check_numba(max_m, method):
    """The run-time size check of the numba implementations (symbolic shapes), with the same
    message as the static check; returns M."""
    too_large = _TOO_LARGE[method]

    @numba_basic.numba_njit
    def checked_m(W):
        if W.shape[0] != W.shape[1]:
            raise _SizeError(_NOT_SQUARE, W.shape[0], W.shape[1])
        if W.shape[0] > max_m:
            raise _SizeError(too_large, W.shape[0], max_m)
        return W.shape[0]

    return checked_m


# The numba implementations write into the output buffers PyTensor's Blockwise loop hands them
# (``handles_out``): for small M the per-matrix allocations of a returned (M, M) array and a 0-d
# array cost more than the permanent itself. Called outside a Blockwise they allocate. A
# marginals buffer that is not C-contiguous is filled through a contiguous scratch matrix.


@register_funcify_default_op_cache_key(LogPermanent)
def _numba_log_permanent(op, node, **kwargs):
    checked_m = _size_check_numba(op.max_m, op.method)
    kernel = _kernel(op.method).external

    @numba_basic.numba_njit
    def log_permanent_numba(W, out=None):
        M = checked_m(W)
        Wc = np.ascontiguousarray(W)
        v = kernel(Wc.ctypes, M, Wc.ctypes, 0)
        if out is None:
            return np.array(v, dtype=np.float64)
        out[()] = v
        return out

    log_permanent_numba.handles_out = True
    return log_permanent_numba, _VERSION


def _marginals_into_numba(max_m, method):
    checked_m = _size_check_numba(max_m, method)
    kernel = _kernel(method).external

    @numba_basic.numba_njit
    def marginals_into(W, out):
        M = checked_m(W)
        Wc = np.ascontiguousarray(W)
        if out.flags.c_contiguous:
            return kernel(Wc.ctypes, M, out.ctypes, 1)
        P = np.empty((M, M))
        v = kernel(Wc.ctypes, M, P.ctypes, 1)
        for i in range(M):
            for j in range(M):
                out[i, j] = P[i, j]
        return v

    return marginals_into


@register_funcify_default_op_cache_key(PermutationMarginals)
def _numba_permutation_marginals(op, node, **kwargs):
    marginals_into = _marginals_into_numba(op.max_m, op.method)

    @numba_basic.numba_njit
    def permutation_marginals_numba(W, out=None):
        if out is None:
            out = np.empty(W.shape)
        marginals_into(W, out)
        return out

    permutation_marginals_numba.handles_out = True
    return permutation_marginals_numba, _VERSION


@register_funcify_default_op_cache_key(LogPermanentAndMarginals)
def _numba_log_permanent_and_marginals(op, node, **kwargs):
    marginals_into = _marginals_into_numba(op.max_m, op.method)

    @numba_basic.numba_njit
    def log_permanent_and_marginals_numba(W, out_v=None, out_p=None):
        if out_v is None:
            P = np.empty(W.shape)
            return np.array(marginals_into(W, P), dtype=np.float64), P
        out_v[()] = marginals_into(W, out_p)
        return out_v, out_p

    log_permanent_and_marginals_numba.handles_out = True
    return log_permanent_and_marginals_numba, _VERSION


# ----------------------------------------------------------------------------- graph rewrite


@register_specialize
@node_rewriter([Blockwise, PermutationMarginals])
def fuse_log_permanent_and_marginals(fgraph, node):
    """Replace ``LogPermanent(W)`` and ``PermutationMarginals(W)`` by one fused node."""
    marg = core_op_of(node, PermutationMarginals)
    if marg is None:
        return None
    (W,) = node.inputs
    for client, _ in fgraph.clients[W]:
        if isinstance(client, Apply) and client.inputs == [W]:
            value_core = core_op_of(client, LogPermanent)
            if value_core is not None and value_core._props() == marg._props():
                fused = LogPermanentAndMarginals(marg.max_m, marg.method)
                fused = fused if not isinstance(node.op, Blockwise) else _KernelBlockwise(fused)
                value, P = fused(W)
                return {node.outputs[0]: P, client.outputs[0]: value}
    return None


# ----------------------------------------------------------------------------- public helpers


def log_permanent(W, method="dp"):
    """Symbolic exact ``log perm(exp W)`` for logits ``W`` (..., M, M) -> (...).

    Gradient: the permutation marginals (fused with the value by a graph rewrite).
    ``method="dp"`` (default): subset DP, O(M 2^M) time and 2^M float64 per matrix, M up to
    :func:`exact_max_m` (26 by default). ``method="glynn"``: Glynn's formula, O(M 2^(M-1)) time
    and O(M^2) memory, M up to ``GLYNN_MAX_M`` = 32, for M past the DP's limit (slower and less
    accurate than the DP: see :mod:`pm_perm.kernels.glynn` and docs/guide/large_m.md).
    """
    return _KernelBlockwise(LogPermanent(method=method))(W)


def permutation_marginals(W, method="dp"):
    """Symbolic ``P[..., i, j] = p(y[i] = j)`` for logits ``W`` (..., M, M). No gradient.
    ``method`` as in :func:`log_permanent`."""
    return _KernelBlockwise(PermutationMarginals(method=method))(W)


def log_permanent_and_marginals(W, method="dp"):
    """Symbolic ``(log perm(exp W), P)`` from one fused Op; ``method`` as in
    :func:`log_permanent`."""
    return _KernelBlockwise(LogPermanentAndMarginals(method=method))(W)
