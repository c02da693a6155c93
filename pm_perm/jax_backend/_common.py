"""Input check and platform dispatch shared by the JAX kernels."""

from __future__ import annotations

import contextlib
import contextvars
import os

import jax
import jax.numpy as jnp

from pm_perm.kernels._checks import LOGIT_ABS_MAX


def valid_logits(x):
    """True iff every entry is ``-inf`` or finite with magnitude at most ``LOGIT_ABS_MAX``
    (capped at the dtype's largest finite value, so float32 input is not cast to overflow)."""
    limit = min(LOGIT_ABS_MAX, float(jnp.finfo(x.dtype).max))
    return jnp.all((x == -jnp.inf) | (jnp.abs(x) <= limit))


_FORCE_XLA = contextvars.ContextVar("pm_perm_force_xla", default=False)


def use_cpu_kernel() -> bool:
    """False when the environment variable ``PM_PERM_JAX_XLA=1`` is set or inside
    :func:`xla_only`: then the XLA DPs run on the CPU too. Read when a function is traced (its
    first call under ``jax.jit``)."""
    return os.environ.get("PM_PERM_JAX_XLA") != "1" and not _FORCE_XLA.get()


@contextlib.contextmanager
def xla_only():
    """Trace the pm_perm kernels called inside as XLA DPs on every platform (no host
    callbacks), e.g. so that XLA can partition them over devices."""
    token = _FORCE_XLA.set(True)
    try:
        yield
    finally:
        _FORCE_XLA.reset(token)


def on_platform(args, cpu, xla):
    """``cpu(*args)`` (a host callback into the numba kernel) when the program runs on a CPU,
    ``xla(*args)`` on every other platform (GPU, TPU) or when :func:`use_cpu_kernel` is False.
    The choice is made when XLA lowers the program for its platform
    (``jax.lax.platform_dependent``), so only one branch is compiled."""
    if not use_cpu_kernel():
        return xla(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu, default=xla)
