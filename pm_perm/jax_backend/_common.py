"""Input check shared by the JAX kernels."""

from __future__ import annotations

import jax.numpy as jnp

from pm_perm.kernels._checks import LOGIT_ABS_MAX


def valid_logits(x):
    """True iff every entry is ``-inf`` or finite with magnitude at most ``LOGIT_ABS_MAX``
    (capped at the dtype's largest finite value, so float32 input is not cast to overflow)."""
    limit = min(LOGIT_ABS_MAX, float(jnp.finfo(x.dtype).max))
    return jnp.all((x == -jnp.inf) | (jnp.abs(x) <= limit))
