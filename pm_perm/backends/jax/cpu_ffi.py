"""pm_perm's numba kernels as XLA FFI custom calls on the CPU (no Python in the call).

``jax.pure_callback`` re-enters Python at every call (it takes the GIL and wraps the buffers as
NumPy arrays), which costs more than a whole small kernel call (a permanent of M = 10). Here
the kernels are compiled by numba as C callables with the signature of an XLA FFI handler
(``XLA_FFI_Error* handler(XLA_FFI_CallFrame*)``, the typed FFI of ``jax.ffi``), registered with
``jax.ffi.register_ffi_target`` and called with ``jax.ffi.ffi_call``: XLA calls the compiled
code directly on its own buffers. The handler reads the call frame by the fixed layout of the
XLA FFI C API (``xla/ffi/api/c_api.h``; 64-bit, every field 8-byte aligned): it answers XLA's
metadata query (API version 0.1, no traits), then loops over the batch with the same kernels
as the numba Ops. float32 and float64 buffers (int32 / int64 counts) are accepted; the
arithmetic is float64 (inputs converted on the way in, outputs on the way out). The kernels
report bad logits by NaN, as in the numba Ops; an exception a kernel raises all the same (a
``ZeroDivisionError``, a ``MemoryError``) is caught by the handler, which returns an XLA FFI
error (:data:`HANDLER_RAISED`; JAX raises it at the call) instead of success with unwritten
results (a C callable cannot pass the exception on: numba would print it and return success).

Targets (CPU only):

* ``pm_perm_log_permanent``: ``W (..., M, M) -> value (...)`` or, with two results,
  ``-> (value (...), P (..., M, M))``.
* ``pm_perm_log_esp``: ``theta (..., D), k (...) -> value (...)`` or ``-> (value, marginals)``;
  with a third argument ``v (..., D)``: ``-> Cov(y | k) @ v (..., D)``.
* ``pm_perm_bethe``: ``W (..., M, M), tol (), max_iter () -> (value (...), beliefs)``: the numba
  Bethe kernel (with its vertex certificate, CCCP and Newton stages); a fixed point not reached
  within ``max_iter`` sweeps gives NaN (the numba Ops raise instead).
* ``pm_perm_partial_orders``: ``W (..., M, M), orders (..., n, M), weights (..., n) -> values
  (..., n)`` or, with two results, ``-> (values, grad (..., M, M))``, the gradient of
  ``sum_n weights[n] values[n]``: :func:`pm_perm.kernels.partial_orders.partial_orders_core`
  (NaN for NaN / +inf / too large logits, as the numba Ops).
* ``pm_perm_plackett_luce``: ``u (..., M), orders (..., n, M), weights (..., n) -> values`` or
  ``-> (values, grad (..., M))``: :func:`pm_perm.kernels.plackett_luce.plackett_luce_core`; an
  order with a tie block of more than ``TIE_BLOCK_MAX`` items before its last block (an error
  in numba) makes that call's values and gradient NaN.
* ``pm_perm_top_k``: ``L (..., M, K + 1), orders (..., n, M), weights (..., n) -> values`` or
  ``-> (values, grad (..., M, K + 1))``: :func:`pm_perm.kernels.top_k.top_k_into` (NaN for NaN
  / +inf / too large logits and logits admitting no top-K list; ``-inf`` for an invalid order
  or one ranking more than K items, as the numba Ops). Logits whose shape the kernel refuses
  (``K < 1`` or ``K > M``; the JAX functions check this when tracing) raise in the handler, an
  XLA error.

In the two ranking targets the leading dimensions of each input are either those of the values
or absent (``vmap_method="expand_dims"``: orders and weights shared by a batch of parameters);
int64 orders and float64 parameters are read in place, without a copy.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from numba import carray, types
from numba.extending import intrinsic

from pm_perm._numba import cfunc, njit
from pm_perm.kernels._checks import finite_or_minus_inf
from pm_perm.kernels.bethe import BETHE_NOT_CONVERGED
from pm_perm.kernels.bethe import bethe_into as bethe_checked_into
from pm_perm.kernels.esp import (
    conditional_covariance_dot_core,
    log_esp_and_marginals_core,
    log_esp_core,
)
from pm_perm.kernels.partial_orders import partial_orders_core
from pm_perm.kernels.permanent import log_permanent_into as checked_value_into
from pm_perm.kernels.plackett_luce import TIE_BLOCK_MAX, plackett_luce_core
from pm_perm.kernels.rank_form import order_blocks
from pm_perm.kernels.top_k import top_k_into

__all__ = ["HANDLER_RAISED", "call"]

#: The message of the XLA FFI error a handler returns when its kernel raised.
HANDLER_RAISED = ("pm_perm: a numba kernel raised an exception inside an XLA FFI handler (its type "
                  "and message are lost in compiled code; the numba backend or a Python call of "
                  "the same computation shows them); its results are not used")
_MESSAGE = np.frombuffer(HANDLER_RAISED.encode() + b"\0", dtype=np.uint8)
_ERROR_CREATE = 6  # XLA_FFI_Api: struct_size, ext, api_version (3 words), internal, Error_Create
_INTERNAL = 13  # XLA_FFI_Error_Code_INTERNAL
_CREATE_ARGS_SIZE = 28  # XLA_FFI_Error_Create_Args: size, ext, message, errc (int32)

_F32, _F64, _S32, _S64 = 11, 12, 4, 5  # XLA_FFI_DataType
_METADATA = 1  # XLA_FFI_Extension_Type


def _pointer_from_address(dtype):
    @intrinsic
    def cast(typingctx, addr):
        sig = types.CPointer(dtype)(types.int64)

        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], context.get_value_type(sig.return_type))

        return sig, codegen

    return cast


_i64p = _pointer_from_address(types.int64)
_i32p = _pointer_from_address(types.int32)
_f64p = _pointer_from_address(types.float64)
_f32p = _pointer_from_address(types.float32)


@njit(cache=True)
def _answer_metadata(frame):
    """True (and the API version written) when this call is XLA's metadata query."""
    ext = frame[1]
    if ext == 0:
        return False
    base = carray(_i64p(ext), 4)  # struct_size, type, next, metadata*
    if (base[1] & 0xFFFFFFFF) != _METADATA:
        return False
    version = carray(_i32p(base[3] + 24), 3)  # major, minor, traits
    version[0], version[1], version[2] = 0, 1, 0
    return True


@njit(cache=True)
def _buffer(addr):
    """``(dtype, data address, number of elements, last dimension)`` of an XLA_FFI_Buffer."""
    b = carray(_i64p(addr), 6)  # struct_size, ext, dtype, data, rank, dims*
    rank = b[4]
    dims = carray(_i64p(b[5]), max(rank, 1))
    size = 1
    for i in range(rank):
        size *= dims[i]
    return b[2] & 0xFFFFFFFF, b[3], size, dims[rank - 1] if rank > 0 else 1


@njit(cache=True)
def _load(addr):
    dtype, data, size, last = _buffer(addr)
    out = np.empty(size)
    if dtype == _F64:
        out[:] = carray(_f64p(data), size)
    elif dtype == _F32:
        src = carray(_f32p(data), size)
        for i in range(size):
            out[i] = src[i]
    elif dtype == _S64:
        src = carray(_i64p(data), size)
        for i in range(size):
            out[i] = src[i]
    else:  # S32
        src = carray(_i32p(data), size)
        for i in range(size):
            out[i] = src[i]
    return out, last


@njit(cache=True)
def _store(addr, values):
    dtype, data, size, _ = _buffer(addr)
    if dtype == _F64:
        carray(_f64p(data), size)[:] = values
    else:
        dst = carray(_f32p(data), size)
        for i in range(size):
            dst[i] = values[i]


@njit(cache=True)
def _permanent_handler(frame):
    args, rets = carray(_i64p(frame[9]), 1), carray(_i64p(frame[14]), frame[12])
    W, M = _load(args[0])
    n = _buffer(rets[0])[2]
    marginals = frame[12] == 2
    values = np.empty(n)
    P = np.empty(W.size) if marginals else W
    for b in range(n):
        Wb = W[b * M * M:(b + 1) * M * M].reshape(M, M)
        values[b] = checked_value_into(Wb, P[b * M * M:(b + 1) * M * M].reshape(M, M),
                                       marginals)
    _store(rets[0], values)
    if marginals:
        _store(rets[1], P)


@njit(cache=True)
def _count_handler(frame):
    n_args, n_rets = frame[7], frame[12]
    args, rets = carray(_i64p(frame[9]), n_args), carray(_i64p(frame[14]), n_rets)
    theta, D = _load(args[0])
    k = _load(args[1])[0]
    n = k.size
    values, out = np.empty(n), np.empty(n * D)
    v = _load(args[2])[0] if n_args == 3 else out
    for b in range(n):
        th, kb = theta[b * D:(b + 1) * D], int(k[b])
        if n_args == 3:
            out[b * D:(b + 1) * D] = conditional_covariance_dot_core(th, kb, v[b * D:(b + 1) * D])
        elif n_rets == 2:
            values[b], out[b * D:(b + 1) * D] = log_esp_and_marginals_core(th, kb)
        else:
            values[b] = log_esp_core(th, kb)
    if n_args == 3:
        _store(rets[0], out)
    else:
        _store(rets[0], values)
        if n_rets == 2:
            _store(rets[1], out)


@njit(cache=True)
def _bethe_handler(frame):
    args, rets = carray(_i64p(frame[9]), 3), carray(_i64p(frame[14]), 2)
    W, M = _load(args[0])
    tol, max_iter = _load(args[1])[0][0], int(_load(args[2])[0][0])
    n = _buffer(rets[0])[2]
    values, G = np.empty(n), np.empty(W.size)
    for b in range(n):
        Gb = G[b * M * M:(b + 1) * M * M].reshape(M, M)
        Wb = np.ascontiguousarray(W[b * M * M:(b + 1) * M * M].reshape(M, M))
        status, values[b] = bethe_checked_into(Wb, tol, max_iter, Gb)
        if status == BETHE_NOT_CONVERGED:  # NaN, as documented for the JAX path (a sampler
            values[b], Gb[:, :] = np.nan, np.nan  # rejects it); no permutation: -inf, zeros
    _store(rets[0], values)
    _store(rets[1], G)


@njit(cache=True)
def _orders(addr, M):
    """The orders buffer as int64 (count, n, M): a view of int64 data, a copy of int32."""
    dtype, data, size, _ = _buffer(addr)
    if dtype == _S64:
        return carray(_i64p(data), (size // M, M))
    return _load(addr)[0].astype(np.int64).reshape(size // M, M)


@njit(cache=True)
def _ranking_call(frame, P, family):
    """Shared body of the two ranking targets: ``x`` holds ``P`` parameters per batch entry
    (``M * M`` logits or ``M`` utilities)."""
    n_rets = frame[12]
    args, rets = carray(_i64p(frame[9]), 3), carray(_i64p(frame[14]), n_rets)
    x = _load(args[0])[0]
    w, n = _load(args[2])
    M = _buffer(args[1])[3]
    orders = _orders(args[1], M)
    nb = _buffer(rets[0])[2] // max(n, 1) if n > 0 else _buffer(rets[-1])[2] // P
    want = n_rets == 2
    values = np.empty(nb * n)
    grad = np.zeros(nb * P)
    nx, no, nw = x.size // P, orders.shape[0] // max(n, 1), w.size // max(n, 1)
    for b in range(nb):
        xb = x[(b % nx) * P:(b % nx + 1) * P]
        ob = orders[(b % max(no, 1)) * n:(b % max(no, 1) + 1) * n]
        wb = w[(b % max(nw, 1)) * n:(b % max(nw, 1) + 1) * n]
        vb, gb = values[b * n:(b + 1) * n], grad[b * P:(b + 1) * P]
        if family == 0:
            Wb = xb.reshape(M, M)
            if finite_or_minus_inf(Wb):
                partial_orders_core(Wb, ob, wb, vb, gb.reshape(M, M), want)
            else:
                vb[:], gb[:] = np.nan, np.nan
        elif family == 2:
            top_k_into(xb.reshape(M, P // M), ob, wb, vb, gb.reshape(M, P // M), want)
        elif _tie_blocks_fit(ob):
            plackett_luce_core(xb, ob, wb, vb, gb, want)
        else:
            vb[:], gb[:] = np.nan, np.nan
    _store(rets[0], values)
    if want:
        _store(rets[1], grad)


@njit(cache=True)
def _tie_blocks_fit(orders):
    """False if an order has a tie block of more than TIE_BLOCK_MAX items before its last block
    (only possible for M > TIE_BLOCK_MAX + 1)."""
    M = orders.shape[1]
    if M <= TIE_BLOCK_MAX + 1:
        return True
    seq = np.empty(M, dtype=np.int64)
    starts = np.empty(M + 1, dtype=np.int64)
    for r in range(orders.shape[0]):
        nb = order_blocks(orders[r], seq, starts)
        for b in range(nb - 1):
            if starts[b + 1] - starts[b] > TIE_BLOCK_MAX:
                return False
    return True


@njit(cache=True)
def _partial_orders_handler(frame):
    M = _buffer(carray(_i64p(frame[9]), 3)[1])[3]
    _ranking_call(frame, M * M, 0)


@njit(cache=True)
def _plackett_luce_handler(frame):
    M = _buffer(carray(_i64p(frame[9]), 3)[1])[3]
    _ranking_call(frame, M, 1)


@njit(cache=True)
def _top_k_handler(frame):
    args = carray(_i64p(frame[9]), 3)
    M = _buffer(args[1])[3]
    Q = _buffer(args[0])[3]
    if M < 1 or Q < 2 or Q - 1 > M:  # the kernel reads (M, K + 1) logits with 1 <= K <= M
        raise ValueError("pm_perm_top_k: logits must be (M, K + 1) with 1 <= K <= M")
    _ranking_call(frame, M * Q, 2)


_SIGNATURE = types.int64(types.CPointer(types.int64))  # XLA_FFI_Error* (NULL: success)


def _ffi_handler(body):
    """The XLA FFI handler of ``body(frame)``: answers XLA's metadata query, else runs the
    call; returns NULL (success)."""

    def handler(frame_ptr):
        frame = carray(frame_ptr, 22)
        if _answer_metadata(frame):
            return 0
        try:
            body(frame)
        except Exception:  # noqa: BLE001 - returned to XLA as an error, which JAX raises
            return _error(frame[2])
        return 0

    return handler


@intrinsic
def _call_pointer(typingctx, function, argument):
    """``function(argument)``: call the C function at address ``function`` with one pointer
    argument (as int64); returns its pointer result as int64."""
    sig = types.int64(types.int64, types.int64)

    def codegen(context, builder, sig, args):
        from llvmlite import ir

        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [args[1]])

    return sig, codegen


@njit(cache=True)
def _error(api):
    """A new XLA_FFI_Error (code INTERNAL, message :data:`HANDLER_RAISED`) made by the XLA FFI
    API at address ``api`` (XLA copies the message and owns the error)."""
    message = np.empty(_MESSAGE.size, dtype=np.uint8)
    message[:] = _MESSAGE
    create_args = np.zeros(4, dtype=np.int64)
    create_args[0] = _CREATE_ARGS_SIZE
    create_args[2] = np.int64(message.ctypes.data)
    create_args[3] = _INTERNAL
    create = carray(_i64p(api), _ERROR_CREATE + 1)[_ERROR_CREATE]
    return _call_pointer(create, np.int64(create_args.ctypes.data))


@functools.cache
def _registered(target):
    """Compile (numba, cached on disk) and register the handler of ``target`` once."""
    handler = {"pm_perm_log_permanent": _permanent_handler, "pm_perm_log_esp": _count_handler,
               "pm_perm_bethe": _bethe_handler,
               "pm_perm_partial_orders": _partial_orders_handler,
               "pm_perm_plackett_luce": _plackett_luce_handler,
               "pm_perm_top_k": _top_k_handler}[target]
    compiled = cfunc(_SIGNATURE, _ffi_handler(handler), cache=True)
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(compiled.address), platform="cpu")
    return target


def call(target, result_shapes, *args, vmap_method):
    """``jax.ffi.ffi_call`` of one of the targets above (registered on first use). The handlers
    read float32 / float64 and int32 / int64 buffers only."""
    for a in args:
        if a.dtype.name not in ("float32", "float64", "int32", "int64"):
            raise TypeError(f"{target}: inputs must be float32/float64 (counts int32/int64); "
                            f"got {a.dtype.name}: cast them first")
    return jax.ffi.ffi_call(_registered(target), result_shapes, vmap_method=vmap_method)(*args)
