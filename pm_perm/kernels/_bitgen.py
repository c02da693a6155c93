"""A numba ``Generator`` inside a C callable, drawing from its caller's numpy bit generator.

The samplers take a numpy ``Generator`` (``rng.random()``). A C callable cannot take one, so the
PyTensor draws pass numpy's ``bitgen_t`` view of theirs (:func:`pm_perm.ops.extern.bitgen_of`:
the state pointer and the ``next_uint64`` / ``next_uint32`` / ``next_double`` function pointers,
the first four fields of numpy's ``bitgen_t``, numpy/random/bitgen.h) and the callable rebuilds
a numba ``Generator`` around it with :func:`generator_at`. Every draw then calls the caller's own
bit generator: the stream, and so every seeded draw, is exactly that of the same sampler called
with the ``Generator`` itself.
"""

from __future__ import annotations

from llvmlite import ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["generator_at", "square_draw_kernel"]

_BITGEN_TYPE = types.NumPyRandomBitGeneratorType("bit_generator")


@intrinsic
def generator_at(typingctx, bitgen):
    """A numba ``Generator`` on the ``bitgen_t`` at ``bitgen`` (a ``CPointer(uint64)``); it
    holds no reference (the caller keeps the bit generator alive) and cannot be returned to
    Python."""
    if not (isinstance(bitgen, types.CPointer) and bitgen.dtype == types.uint64):
        return None
    sig = types.npy_rng(bitgen)

    def codegen(context, builder, sig, args):
        (ptr,) = args
        word = context.get_value_type(types.uintp)
        fields = [builder.load(builder.gep(ptr, [ir.Constant(ir.IntType(32), i)]))
                  for i in range(4)]
        bitgen_struct = cgutils.create_struct_proxy(_BITGEN_TYPE)(context, builder)
        bitgen_struct.parent = cgutils.get_null_value(bitgen_struct.parent.type)
        bitgen_struct.state_address = fields[0]
        bitgen_struct.state = fields[0]
        bitgen_struct.fnptr_next_uint64 = fields[1]
        bitgen_struct.fnptr_next_uint32 = fields[2]
        bitgen_struct.fnptr_next_double = fields[3]
        bitgen_struct.bit_generator = builder.ptrtoint(ptr, word)
        gen = cgutils.create_struct_proxy(sig.return_type)(context, builder)
        gen.bit_generator = bitgen_struct._getvalue()
        gen.meminfo = cgutils.get_null_value(gen.meminfo.type)  # NRT skips a null meminfo
        gen.parent = cgutils.get_null_value(gen.parent.type)
        return gen._getvalue()

    return sig, codegen


def square_draw_kernel(draw_into, version):
    """Body of the C callable of an exact permutation sampler (``numba.cfunc``, see
    :mod:`pm_perm.ops.extern`): ``draw_kernel(bitgen, w, m0, m1, out)`` runs
    ``draw_into(rng, W, out) -> status`` on the C-contiguous (m0, m1) float64 logits at ``w``
    with the caller's random stream (numpy's ``bitgen_t`` at ``bitgen``, :func:`generator_at`),
    writing the draw to the (m0,) int64 array at ``out``, and returns the status. ``version``
    keys numba's cache as in :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`."""

    def draw_kernel(bitgen, w, m0, m1, out):
        if version < 0:  # never true; referencing version puts it into numba's cache key
            return -1
        return draw_into(generator_at(bitgen), carray(w, (m0, m1)), carray(out, m0))

    return draw_kernel
