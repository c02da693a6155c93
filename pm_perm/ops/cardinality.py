"""PyTensor Ops for the conditional-Bernoulli normaliser (see :mod:`pm_perm.kernels.esp`).

``log_esp(theta, k)`` (core signature ``(n),()->()``) is ``log e_k(exp theta)``, the log
normaliser ``log Z_k`` of the conditional Bernoulli; its gradient with respect to ``theta`` is
``conditional_marginals(theta, k)`` = ``p(y_d = 1 | sum y = k)`` (``(n),()->(n)``). Both come
from one two-output Op, :class:`LogESPAndMarginals`, so a graph needing the value and its
gradient (logp + dlogp in find_MAP / NUTS) runs the dynamic program once; when a compiled graph
does not use the marginals (logp alone: slice sampling, log-likelihoods) a specialize rewrite
swaps in the value-only :class:`LogESP`, which skips the suffix pass. ``k`` is an integer
input without gradient. Cost O(D k) per vector; ``-inf`` logits are allowed (item never on);
``k`` outside ``0..#finite logits`` gives ``-inf`` with zero marginals. NaN logits give NaN.

Second derivatives: the pullback of ``conditional_marginals`` is ``Cov(y | k) @ cotangent``
(:class:`ConditionalCovarianceDot`, a forward-mode pass of the same DP, O(D k)), so Hessians
(``pytensor.gradient.hessian``, ``pm.find_MAP(compute_hessian=True)``) and gradients of
functions of the marginals work. Third derivatives are not implemented.

Backends: numba graphs call the C kernel per row (``pm_perm.ops.extern``); PyTensor's Python
linker (pm_perm's MAP fits, ``FAST_COMPILE``) runs a whole batch in one compiled loop over the
same kernel (each core Op's ``gufunc_spec``), not ``perform`` once per row in Python (whose
per-row overhead is several times a small kernel's cost).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytensor.tensor as pt
from numba import types
from pytensor.gradient import DisconnectedType, disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

from pm_perm._numba import njit
from pm_perm.kernels._checks import c_array
from pm_perm.kernels._version import code_version
from pm_perm.kernels.esp import (
    ESP_COVARIANCE_DOT,
    ESP_MARGINALS,
    ESP_VALUE,
    make_esp_kernel,
)
from pm_perm.ops._blockwise import (
    EmptyBatchBlockwise,
    register_core_ops,
    register_value_only_rewrite,
)
from pm_perm.ops.extern import StatusError, c_contiguous_out, copy_back, extern_kernel

__all__ = [
    "ConditionalCovarianceDot",
    "LogESP",
    "LogESPAndMarginals",
    "conditional_marginals",
    "expected_topk_gain",
    "log_esp",
    "log_expected_topk_gain",
]


def _core_inputs(theta, k):
    theta = pt.as_tensor_variable(theta)
    k = pt.as_tensor_variable(k)
    if theta.type.ndim != 1 or k.type.ndim != 0:
        raise TypeError(
            f"core Op expects logits (n,) and a count (); got ndim {theta.type.ndim} and "
            f"{k.type.ndim} (use the Blockwise log_esp for batches)"
        )
    if theta.type.dtype not in (*pt.type.float_dtypes, *pt.type.int_dtypes):
        raise TypeError(f"logits must be real; got dtype {theta.type.dtype}")
    if k.type.dtype not in pt.type.int_dtypes:
        raise TypeError(f"k must be an integer tensor; got dtype {k.type.dtype}")
    return pt.cast(theta, "float64"), pt.cast(k, "int64")


class LogESPAndMarginals(Op):
    """``(log e_k(exp theta), p(y_d = 1 | k))`` for logits ``theta`` (n,) and a count ``k`` ()."""

    __props__ = ()
    gufunc_signature = "(n),()->(),(n)"
    gufunc_spec = ("pm_perm.ops.cardinality._log_esp_and_marginals_batch", 2, 2)

    def make_node(self, theta, k):
        theta, k = _core_inputs(theta, k)
        return Apply(
            self,
            [theta, k],
            [
                pt.tensor(dtype="float64", shape=()),
                pt.tensor(dtype="float64", shape=theta.type.shape),
            ],
        )

    def perform(self, node, inputs, output_storage):
        output_storage[0][0], output_storage[1][0] = _log_esp_and_marginals_batch(*inputs)

    def infer_shape(self, node, input_shapes):
        return [(), input_shapes[0]]

    def connection_pattern(self, node):
        return [[True, True], [False, False]]

    def pullback(self, inputs, outputs, cotangents):
        theta, k = inputs
        g_v, g_m = cotangents
        terms = []
        if not isinstance(g_v.type, DisconnectedType):
            terms.append(g_v[..., None] * outputs[1])
        if not isinstance(g_m.type, DisconnectedType):
            terms.append(_cov_dot(theta, k, g_m))  # d marginals / d theta = Cov(y | k)
        grad = pt.zeros_like(theta) if not terms else sum(terms[1:], terms[0])
        return [grad, disconnected_type()]


class ConditionalCovarianceDot(Op):
    """``Cov(y | sum y = k) @ v`` for logits ``theta`` (n,), count ``k`` (), vector ``v`` (n,).

    The Hessian of ``log e_k(exp theta)`` applied to ``v``; used as the pullback of the
    conditional marginals. Linear in ``v`` (its pullback in ``v`` is itself, the matrix being
    symmetric); the derivative in ``theta`` (third derivatives of ``log e_k``) is not implemented.
    """

    __props__ = ()
    gufunc_signature = "(n),(),(n)->(n)"
    gufunc_spec = ("pm_perm.ops.cardinality._conditional_covariance_dot_batch", 3, 1)

    def make_node(self, theta, k, v):
        theta = pt.cast(pt.as_tensor_variable(theta), "float64")
        k = pt.as_tensor_variable(k)
        v = pt.cast(pt.as_tensor_variable(v), "float64")
        if theta.type.ndim != 1 or k.type.ndim != 0 or v.type.ndim != 1:
            raise TypeError("core Op expects theta (n,), k () and v (n,)")
        if k.type.dtype not in pt.type.int_dtypes:
            raise TypeError(f"k must be an integer tensor; got dtype {k.type.dtype}")
        k = pt.cast(k, "int64")
        return Apply(self, [theta, k, v], [pt.tensor(dtype="float64", shape=theta.type.shape)])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _conditional_covariance_dot_batch(*inputs)

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [False], [True]]

    def pullback(self, inputs, outputs, cotangents):
        theta, k, v = inputs
        (g,) = cotangents
        return [
            grad_not_implemented(self, 0, theta, "third derivatives of log e_k"),
            disconnected_type(),
            _cov_dot(theta, k, g),
        ]


_cov_dot = EmptyBatchBlockwise(ConditionalCovarianceDot())


class LogESP(Op):
    """Value only, ``log e_k(exp theta)`` (): what the rewrite below uses when no compiled
    output needs the marginals. Its pullback is the marginals output of the two-output Op."""

    __props__ = ()
    gufunc_signature = "(n),()->()"
    gufunc_spec = ("pm_perm.ops.cardinality._log_esp_batch", 2, 1)

    def make_node(self, theta, k):
        theta, k = _core_inputs(theta, k)
        return Apply(self, [theta, k], [pt.tensor(dtype="float64", shape=())])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _log_esp_batch(*inputs)

    def infer_shape(self, node, input_shapes):
        return [()]

    def connection_pattern(self, node):
        return [[True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        theta, k = inputs
        (g,) = cotangents
        return [g[..., None] * conditional_marginals(theta, k), disconnected_type()]


_log_esp_both = EmptyBatchBlockwise(LogESPAndMarginals())
_log_esp_value = EmptyBatchBlockwise(LogESP())


local_log_esp_value_only = register_value_only_rewrite(
    "local_log_esp_value_only", LogESPAndMarginals, lambda core: _log_esp_value, "marginals")


def log_esp(theta, k):
    """``log e_k(exp theta)`` for logits ``theta`` (..., D) and integer ``k`` (...) -> (...).

    Gradient with respect to ``theta`` = :func:`conditional_marginals`, from the same Op run.
    Batch dimensions broadcast (statically known length-1 dimensions only, as for any Blockwise).
    """
    return _log_esp_both(theta, k)[0]


def conditional_marginals(theta, k):
    """``p(y_d = 1 | sum y = k)``, shape (..., D); its pullback is ``Cov(y | k) @ cotangent``."""
    return _log_esp_both(theta, k)[1]


def _check_index(x, name, what, lo, hi):
    """Refuse a non-integer ``x`` (``TypeError``) and a constant ``x`` outside ``lo..hi``
    (``ValueError`` naming it; ``hi`` None: not known before run time)."""
    if x.type.dtype not in pt.type.int_dtypes:
        raise TypeError(f"{name} must be {what}, an integer tensor; got dtype {x.type.dtype}")
    if isinstance(x, pt.TensorConstant):
        data = np.asarray(x.data)
        bad = (data < lo) | (data > (np.inf if hi is None else hi))
        if bad.any():
            span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ValueError(f"{name} must be {what} in {span}; got {data[bad].flat[0]}")


def log_expected_topk_gain(theta, target, K):
    """Log of the expected top-K gain (Swersky et al. 2012, eq. 8) for one target item.

    ``E[G_K(y, t)] = p(y_target = 1 | sum y = K) = w_t e_{K-1}(w_{-t}) / e_K(w)``, written as
    ``theta_t + log e_{K-1}(theta with theta_t = -inf) - log e_K(theta)`` so that its gradient
    needs only first derivatives (two :func:`log_esp` calls).

    Parameters
    ----------
    theta : tensor_like of float, shape (..., D)
    target : tensor_like of int, shape (...)
        Index of the target class per row, in 0..D-1 (negative indices do not count from the
        end).
    K : tensor_like of int, shape broadcastable to (...)
        Number of predictions allowed (1 <= K <= D).

    Raises
    ------
    ValueError
        When ``target`` (outside 0..D-1) or ``K`` (outside 1..D) is out of range and known when
        the graph is built (a constant, e.g. a NumPy array). Symbolic values out of range are
        not an error: their rows get ``-inf`` (so a model using them has log-probability
        ``-inf``), as do rows with fewer than ``K`` finite logits (no ``K`` items can be
        predicted; the gain is 0, not NaN).
    TypeError
        When ``target`` or ``K`` is not an integer tensor.
    """
    theta = pt.as_tensor_variable(theta)
    target = pt.as_tensor_variable(target)
    K = pt.as_tensor_variable(K)
    D = theta.type.shape[-1] if theta.type.ndim else None
    _check_index(target, "target", "a class index", 0, None if D is None else D - 1)
    _check_index(K, "K", "the number of predictions", 1, D)
    n = theta.shape[-1]
    ok = pt.ge(target, 0) & pt.lt(target, n) & pt.ge(K, 1) & pt.le(K, n)
    onehot = pt.eq(pt.arange(theta.shape[-1]), target[..., None])
    theta_t = pt.sum(pt.switch(onehot, theta, 0.0), axis=-1)
    rest = pt.switch(onehot, -np.inf, theta)
    log_z = log_esp(theta, K)
    ok = ok & pt.gt(log_z, -np.inf)  # fewer than K finite logits: no K items can be predicted
    return pt.switch(ok, theta_t + log_esp(rest, K - 1) - log_z, -np.inf)


def expected_topk_gain(theta, target, K):
    """Expected top-K classification gain ``p(y_target = 1 | sum y = K)`` (eq. 8), in [0, 1].

    Use ``pm.Potential("gain", log_expected_topk_gain(...).sum())`` to train on the log, or
    this quantity for a gain-weighted objective; both are differentiable in ``theta``. Raises
    as :func:`log_expected_topk_gain` (symbolic out-of-range rows give 0).
    """
    return pt.exp(log_expected_topk_gain(theta, target, K))


# ----------------------------------------------------------------------------- numba
# The compiled graphs call the dynamic programs through a C symbol (see pm_perm.ops.extern):
# compiled once per numba cache, not again inside every PyTensor function that uses the Ops.

_F64_PTR = types.CPointer(types.float64)
_SIGNATURE = types.float64(_F64_PTR, types.intp, types.int64, _F64_PTR, _F64_PTR, types.intc)
_VERSION = code_version(__file__)  # numba cache version (see pm_perm.kernels._version)
_EXTERN = extern_kernel("pm_perm_log_esp_kernel", _SIGNATURE, make_esp_kernel(_VERSION))


# The numba implementations write into the output buffers PyTensor's Blockwise loop hands them
# (``handles_out``, see pm_perm.ops.extern); called outside a Blockwise they allocate.


@register_funcify_default_op_cache_key(LogESPAndMarginals)
def _numba_log_esp_and_marginals(op, node, **kwargs):
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def log_esp_and_marginals_numba(theta, k, out_v=None, out_m=None):
        th = np.ascontiguousarray(theta)
        if out_v is None:
            out_v, out_m = np.empty(()), np.empty(th.shape[0])
        m = c_contiguous_out(out_m)
        out_v[()] = kernel(th.ctypes, th.shape[0], k.item(), th.ctypes, m.ctypes, ESP_MARGINALS)
        copy_back(out_m, m)
        return out_v, out_m

    log_esp_and_marginals_numba.handles_out = True
    return log_esp_and_marginals_numba, _VERSION


@register_funcify_default_op_cache_key(ConditionalCovarianceDot)
def _numba_conditional_covariance_dot(op, node, **kwargs):
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def conditional_covariance_dot_numba(theta, k, v, out=None):
        th, vc = np.ascontiguousarray(theta), np.ascontiguousarray(v)
        if vc.shape[0] != th.shape[0]:
            raise _LengthError(1)
        if out is None:
            out = np.empty(th.shape[0])
        o = c_contiguous_out(out)
        kernel(th.ctypes, th.shape[0], k.item(), vc.ctypes, o.ctypes, ESP_COVARIANCE_DOT)
        return copy_back(out, o)

    conditional_covariance_dot_numba.handles_out = True
    return conditional_covariance_dot_numba, _VERSION


@register_funcify_default_op_cache_key(LogESP)
def _numba_log_esp(op, node, **kwargs):
    kernel = _EXTERN().external

    @numba_basic.numba_njit
    def log_esp_numba(theta, k, out=None):
        th = np.ascontiguousarray(theta)
        if out is None:
            out = np.empty(())
        out[()] = kernel(th.ctypes, th.shape[0], k.item(), th.ctypes, th.ctypes, ESP_VALUE)
        return out

    log_esp_numba.handles_out = True
    return log_esp_numba, _VERSION


# ----------------------------------------------------------------------------- Python linker
# PyTensor's Blockwise runs a core Op's ``perform`` once per row in Python on its Python linker
# (pm_perm's MAP fits, FAST_COMPILE), an overhead several times a small row's kernel.
# Each core Op's ``gufunc_spec`` names one of the functions below, which Blockwise calls once
# with the whole batch: one compiled loop over the rows calls the C kernel. The core Ops'
# ``perform`` (an unbatched node, from which PyTensor removes the Blockwise) calls them too, so
# the Python linker has one path to the kernel, the one the numba graphs use.


@functools.cache
def _batch_runner():
    """``run(theta, k, v, out, values, mode)``: the C kernel on every row of the C-contiguous
    (n, d) ``theta``, ``v`` and ``out`` and the (n,) ``k``, values into ``values`` (n,). The loop
    calls the kernel's symbol, so it compiles in a fraction of a second (once per process; not
    cached on disk, as the kernel's address is only known at run time)."""
    kernel = _EXTERN().external

    @njit
    def run(theta, k, v, out, values, mode):
        d = theta.shape[1]
        for b in range(theta.shape[0]):
            values[b] = kernel(theta[b].ctypes, d, k[b], v[b].ctypes, out[b].ctypes, mode)

    return run


def _rows(x, batch, core, dtype):
    """``x`` broadcast to ``batch + core`` as a C-contiguous writable (prod(batch), *core) array."""
    x = np.broadcast_to(np.asarray(x), batch + core)
    return c_array(x, dtype).reshape((math.prod(batch), *core))


def _run_batch(theta, k, v, mode):
    """``(values, out)`` of ``mode`` for logits (..., d), counts (...) and ``v`` (..., d) or
    None, batch dimensions broadcast as a gufunc's."""
    theta, k = np.asarray(theta), np.asarray(k)
    d = theta.shape[-1]
    shapes = [theta.shape[:-1], k.shape]
    if v is not None:
        v = np.asarray(v)
        if v.shape[-1] != d:
            raise ValueError(f"theta and v must have the same length; got {d} and {v.shape[-1]}")
        shapes.append(v.shape[:-1])
    batch = np.broadcast_shapes(*shapes)
    th = _rows(theta, batch, (d,), np.float64)
    kk = _rows(k, batch, (), np.int64)
    vv = th if v is None else _rows(v, batch, (d,), np.float64)
    out = th if mode == ESP_VALUE else np.empty_like(th)
    values = np.empty(th.shape[0])
    _batch_runner()(th, kk, vv, out, values, mode)
    return values.reshape(batch), out.reshape(batch + (d,))


def _log_esp_batch(theta, k):
    """:class:`LogESP` on a batch (its ``gufunc_spec``)."""
    return _run_batch(theta, k, None, ESP_VALUE)[0]


def _log_esp_and_marginals_batch(theta, k):
    """:class:`LogESPAndMarginals` on a batch (its ``gufunc_spec``)."""
    return _run_batch(theta, k, None, ESP_MARGINALS)


def _conditional_covariance_dot_batch(theta, k, v):
    """:class:`ConditionalCovarianceDot` on a batch (its ``gufunc_spec``)."""
    return _run_batch(theta, k, v, ESP_COVARIANCE_DOT)[1]


class _LengthError(StatusError):
    """The numba implementations' shape error (see :class:`StatusError`)."""

    messages = ((ValueError, ""), (ValueError, "theta and v must have the same length"))


# gradient graphs vectorise these core Ops into EmptyBatchBlockwise (pm_perm.ops._blockwise)
register_core_ops(LogESPAndMarginals, ConditionalCovarianceDot, LogESP)
