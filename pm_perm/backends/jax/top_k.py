"""The exact top-k item-by-position likelihood (:mod:`pm_perm.kernels.top_k`) in JAX (no
PyTensor here).

Where it runs: on a CPU, the numba kernel of the numba Ops
(:func:`pm_perm.kernels.top_k.top_k_into`) as an XLA FFI custom call
(:mod:`pm_perm.backends.jax.cpu_ffi`, target ``pm_perm_top_k``), also inside ``xla_only()`` and
with ``PM_PERM_JAX_XLA=1``: there is no XLA program of this likelihood (its dynamic program
over subsets of the K positions is scaled by a max-weight assignment's duals, a host kernel).
On every other platform (GPU, TPU) the same kernel runs on the host through
``jax.pure_callback`` (the inputs are copied to the host and back).

Under the sharding recipe (:mod:`pm_perm.backends.jax.sharding`) the custom call is not split
by XLA's partitioner: the orders are gathered and the likelihood is computed whole (the value is
that of one device; the work is not divided).

Values and gradients are those of the numba Ops: invalid rows, or rows ranking more than K
items, ``-inf`` and no gradient; NaN, ``+inf`` or finite logits beyond ``LOGIT_ABS_MAX``, and
logits admitting no top-K list, give NaN values, sums and gradients. Shapes the kernel refuses
(``K < 1``, ``K > M``, ``K > max_k``, the memory budget, orders of another width) raise
``ValueError`` when the function is traced.
"""

from __future__ import annotations

import jax
import numpy as np

from pm_perm.backends.jax import rank_form
from pm_perm.backends.jax.platform import _cpu_only
from pm_perm.kernels.top_k import check_top_k_size, top_k_into

__all__ = ["loglik_fns"]


def _check(L, orders, max_k):
    if L.ndim < 2:
        raise ValueError(f"top-k logits must be (..., M, K + 1); got shape {L.shape}")
    M, Q = L.shape[-2:]
    if Q - 1 > max_k:
        raise ValueError(f"K = {Q - 1} positions is beyond the Op's limit max_k = {max_k}")
    check_top_k_size(M, Q - 1)
    if orders.shape[-1] != M:
        raise ValueError(f"orders have {orders.shape[-1]} columns but the logits have {M} rows "
                         "(items)")


def _host(L, orders, w, want_grad):
    """The kernel on the host (NumPy), batched over the leading axes of ``L``."""
    L = np.asarray(L)
    M, Q = L.shape[-2:]
    batch = np.broadcast_shapes(L.shape[:-2], orders.shape[:-2], w.shape[:-1])
    Lb = np.broadcast_to(L, batch + (M, Q)).reshape(-1, M, Q)
    ob = np.broadcast_to(orders, batch + orders.shape[-2:]).reshape((-1,) + orders.shape[-2:])
    wb = np.broadcast_to(w, batch + w.shape[-1:]).reshape(-1, w.shape[-1])
    values = np.empty((Lb.shape[0], ob.shape[1]))
    grad = np.zeros(Lb.shape)
    for b in range(Lb.shape[0]):
        top_k_into(np.ascontiguousarray(Lb[b], dtype=np.float64),
                   np.ascontiguousarray(ob[b], dtype=np.int64),
                   np.ascontiguousarray(wb[b], dtype=np.float64), values[b], grad[b], want_grad)
    values = values.reshape(batch + (ob.shape[1],)).astype(L.dtype)
    return (values, grad.reshape(batch + (M, Q)).astype(L.dtype)) if want_grad else values


def _callback(L, o, w, want_grad):
    shapes = [jax.ShapeDtypeStruct(L.shape[:-2] + o.shape[-2:-1], L.dtype)]
    if want_grad:
        shapes.append(jax.ShapeDtypeStruct(L.shape, L.dtype))
    out = jax.pure_callback(lambda L, o, w: _host(L, o, w, want_grad), tuple(shapes), L, o, w,
                            vmap_method="expand_dims")
    return tuple(out) if want_grad else out[0]


def _elsewhere(L, o, w):
    """The "XLA" branch of :func:`pm_perm.backends.jax.rank_form.loglik_fns`: the FFI call on
    a CPU (there is no XLA program), a host callback on other platforms."""
    want = w is not None
    w = jax.numpy.zeros(o.shape[:-1], L.dtype) if w is None else w

    def ffi(L, o, w):
        return rank_form._ffi("pm_perm_top_k", 2, L, o, w, want)

    if _cpu_only():
        return ffi(L, o, w)
    return jax.lax.platform_dependent(L, o, w, cpu=ffi,
                                      default=lambda L, o, w: _callback(L, o, w, want))


def loglik_fns(max_k):
    """``(loglik, sum_and_grad, values_and_grad)`` of the top-k Ops
    (:func:`pm_perm.backends.jax.rank_form.loglik_fns`): logits ``L`` (M, K + 1), orders
    (n, M), weights (n,)."""
    return rank_form.loglik_fns("pm_perm_top_k", 2, lambda L, o: _check(L, o, max_k),
                                _elsewhere)
