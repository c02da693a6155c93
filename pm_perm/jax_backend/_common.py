"""Input check and platform dispatch shared by the JAX kernels."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp

from pm_perm.kernels._checks import LOGIT_ABS_MAX


def valid_logits(x):
    """True iff every entry is ``-inf`` or finite with magnitude at most ``LOGIT_ABS_MAX``
    (capped at the dtype's largest finite value, so float32 input is not cast to overflow)."""
    limit = min(LOGIT_ABS_MAX, float(jnp.finfo(x.dtype).max))
    return jnp.all((x == -jnp.inf) | (jnp.abs(x) <= limit))


def use_cpu_kernel() -> bool:
    """False iff the environment variable ``PM_PERM_JAX_XLA=1``: then the XLA DPs run on the
    CPU too. Read when a function is traced (its first call under ``jax.jit``)."""
    return os.environ.get("PM_PERM_JAX_XLA") != "1"


def on_platform(args, cpu, xla):
    """``cpu(*args)`` (a host callback into the numba kernel) when the program runs on a CPU,
    ``xla(*args)`` on every other platform (GPU, TPU) or when :func:`use_cpu_kernel` is False.
    The choice is made when XLA lowers the program for its platform
    (``jax.lax.platform_dependent``), so only one branch is compiled."""
    if not use_cpu_kernel():
        return xla(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu, default=xla)
