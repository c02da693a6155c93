"""Helpers shared by the JAX kernels: the input check, a NaN-free log-sum-exp and the popcount
layers of the subset dynamic programs."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from pm_perm.kernels._checks import LOGIT_ABS_MAX


def valid_logits(x):
    """True iff every entry is ``-inf`` or finite with magnitude at most ``LOGIT_ABS_MAX``
    (capped at the dtype's largest finite value, so float32 input is not cast to overflow)."""
    limit = min(LOGIT_ABS_MAX, float(jnp.finfo(x.dtype).max))
    return jnp.all((x == -jnp.inf) | (jnp.abs(x) <= limit))


def logsumexp(x, axis=-1):
    """``log sum exp`` along ``axis`` with no NaN in value or gradient when every term is
    ``-inf`` (the result is then ``-inf`` with zero gradient; ``jax.nn.logsumexp`` and
    ``jnp.logaddexp`` give NaN gradients there, ``PYMC6.md`` gotcha 7)."""
    m = jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))  # the value does not depend
    m = jnp.where(jnp.isfinite(m), m, 0.0)                             # on the shift to 1st order
    s = jnp.sum(jnp.exp(x - m), axis=axis)
    pos = s > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, s, 1.0)) + jnp.squeeze(m, axis), -jnp.inf)


@functools.cache
def popcount_layers(M: int) -> tuple[np.ndarray, ...]:
    """Bitmasks of ``M`` bits by popcount layer 0..M (int32, increasing): the order in which
    the subset DPs fill their tables."""
    masks = np.arange(1 << M, dtype=np.int64)
    pop = np.zeros_like(masks)
    for j in range(M):
        pop += (masks >> j) & 1
    return tuple(masks[pop == k].astype(np.int32) for k in range(M + 1))
