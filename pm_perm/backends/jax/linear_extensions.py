"""JAX implementations of the linear-extension Ops (:mod:`pm_perm.ops.linear_extensions`): the
numba kernel on the host, through ``jax.pure_callback``.

The dynamic program's size (the number of ideals of each assessor's partial order) depends on
the data, which XLA's static shapes do not allow, so the kernel runs on the host, with the
parameters and preferences copied there (on a CPU, no copy). Values and gradients are those of
the numba Ops; bad preferences (a cycle, an item id out of range, a DP beyond the budget) raise
the numba path's ``ValueError`` inside the callback, which surfaces from the compiled JAX
function as jaxlib's ``XlaRuntimeError`` (a ``RuntimeError``) carrying the message.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["loglik_fn", "loglik_grad_fn"]


def loglik_fn(op):
    """``f(params, prefs) -> (n,)`` of :class:`LinearExtensionLoglik` ``op``."""
    from pm_perm.ops.linear_extensions import _run

    def host(params, prefs):
        return _run(np.asarray(params), op.family, np.asarray(prefs), None, False,
                    op.max_cells)[1]

    def linear_extension_loglik_jax(params, prefs):
        out = jax.ShapeDtypeStruct((prefs.shape[0],), jnp.float64)
        return jax.pure_callback(host, out, params, prefs, vmap_method="sequential")

    return linear_extension_loglik_jax


def loglik_grad_fn(op):
    """``f(params, prefs, weights) -> params' shape`` of :class:`LinearExtensionLoglikGrad`."""
    from pm_perm.ops.linear_extensions import _run

    def host(params, prefs, weights):
        return _run(np.asarray(params), op.family, np.asarray(prefs), np.asarray(weights), True,
                    op.max_cells)[2]

    def linear_extension_loglik_grad_jax(params, prefs, weights):
        out = jax.ShapeDtypeStruct(params.shape, jnp.float64)
        return jax.pure_callback(host, out, params, prefs, weights, vmap_method="sequential")

    return linear_extension_loglik_grad_jax
