"""Max-weight perfect matching for JAX graphs (the ``support_point`` of PermutationExpFamily).

A ``jax.pure_callback`` to the numba Hungarian kernel used by the numba Op (not
differentiable, and not meant to be: the mode is piecewise constant, used only for initial
points). Batches are looped over on the host (``vmap_method="sequential"``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["max_weight_matching"]


def _host(W):
    from pm_perm.ops.matching import checked_matching  # numba kernel, raises on bad input

    return np.asarray(checked_matching(np.ascontiguousarray(W, dtype=np.float64)), dtype=np.int64)


def max_weight_matching(W):
    """Column matched to each row by a max-weight perfect matching of ``W`` (M, M) -> (M,)."""
    out = jax.ShapeDtypeStruct(W.shape[:-1], jnp.int64 if jax.config.jax_enable_x64 else jnp.int32)
    return jax.pure_callback(lambda w: _host(w).astype(out.dtype), out, jax.lax.stop_gradient(W),
                             vmap_method="sequential")
