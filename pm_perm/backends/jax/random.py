"""JAX draws of pm_perm's RandomVariables: the exact CPU samplers on the host.

Each RandomVariable's JAX sampler (PyTensor's ``jax_sample_fn``) calls the RV's own ``rng_fn``
(the same NumPy/numba samplers as the numba backend) through ``jax.pure_callback``, with a
``numpy.random.Generator`` seeded from 128 bits of the JAX key PyTensor passes in. The draws are
therefore exact, on every platform (the parameters are copied to the host), and seeded JAX
draws are reproducible; they are not the numba backend's draws for the same seed (the two
backends derive their generators differently). Invalid parameters raise as in ``rng_fn``; the
error surfaces from the compiled JAX function as jaxlib's ``XlaRuntimeError`` (a
``RuntimeError``) carrying the original message.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from pytensor.link.jax.dispatch.random import jax_sample_fn

__all__ = ["register"]


def _core_shape(op, parameters):
    """The static core shape of a draw: each output core dimension is read off the first
    parameter whose core signature names it."""
    out_sig = op.output_sig
    shape = []
    for name in out_sig:
        for p, sig in zip(parameters, op.inputs_sig, strict=True):
            if name in sig:
                shape.append(int(np.shape(p)[np.ndim(p) - len(sig) + sig.index(name)]))
                break
        else:  # pragma: no cover - every pm_perm signature names its output dimension
            raise NotImplementedError(f"{op}: output dimension {name!r} has no parameter")
    return tuple(shape)


def _batch_shape(op, size, parameters):
    if size is not None:
        return tuple(int(s) for s in size)
    return tuple(np.broadcast_shapes(*(
        np.shape(p)[:np.ndim(p) - nd] for p, nd in zip(parameters, op.ndims_params, strict=True)
    )))


def _sample_fn(op, node=None):
    """``sample_fn(rng_key, size, dtype, *parameters)``: draws of shape ``size + core shape``
    (``size`` None: the parameters' broadcast batch shape) by ``op.rng_fn`` on the host."""

    def sample_fn(rng_key, size, dtype, *parameters):
        batch = _batch_shape(op, size, parameters)
        out = jax.ShapeDtypeStruct(batch + _core_shape(op, parameters), jnp.dtype(dtype))

        def host(seed, *params):
            rng = np.random.default_rng(np.asarray(seed, dtype=np.uint32))
            params = [  # each broadcast to the batch shape, as PyTensor's numba draws do
                np.broadcast_to(np.asarray(p), batch + np.shape(p)[np.ndim(p) - nd:])
                for p, nd in zip(params, op.ndims_params, strict=True)
            ]
            draws = np.asarray(op.rng_fn(rng, *params, batch), dtype=out.dtype)
            if draws.shape != out.shape:  # pragma: no cover - a wrong shape is never returned
                raise RuntimeError(f"{op}: draws of shape {draws.shape}, expected {out.shape}")
            return draws

        seed = jax.random.bits(rng_key, (4,), dtype=jnp.uint32)
        return jax.pure_callback(host, out, seed, *parameters, vmap_method="sequential")

    return sample_fn


def register(classes):
    """Register the host-callback sampler for each RandomVariable class of ``classes`` (each
    under its own class: a subclass that draws differently must not inherit its parent's)."""
    for cls in classes:
        jax_sample_fn.register(cls)(_sample_fn)
