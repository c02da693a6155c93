"""Which implementation of pm_perm's kernels a JAX program runs.

For the exact permanent, the count kernels, Bethe, and the partial-order and Plackett-Luce
likelihoods: on a CPU, pm_perm's numba kernels run as XLA FFI custom calls
(:mod:`pm_perm.backends.jax.cpu_ffi`; as fast as the numba path); on every other platform (GPU,
TPU), the XLA programs. Force the XLA programs on the CPU too with the environment variable
``PM_PERM_JAX_XLA=1`` or, in code, by tracing inside ``with xla_only():`` (the sharding recipe
does, so that XLA can partition them over devices). Both are read when a function is traced,
i.e. at its first call under ``jax.jit``, not when it runs. The top-k likelihood has no XLA
program: it runs the FFI call on a CPU whatever these say, a host callback elsewhere
(:mod:`pm_perm.backends.jax.top_k`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import jax

__all__ = ["on_platform", "use_cpu_kernel", "xla_only"]

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


def on_platform(args, cpu, xla, cpu_kernel=None):
    """``cpu(*args)`` (an FFI call into the numba kernel) when the program runs on a CPU,
    ``xla(*args)`` on every other platform (GPU, TPU) or when :func:`use_cpu_kernel` is False.
    The choice is made when XLA lowers the program for its platform
    (``jax.lax.platform_dependent``), so only one branch is compiled; in a process whose only
    JAX backend is the CPU, only ``cpu`` is traced.

    ``cpu_kernel``: the value of :func:`use_cpu_kernel` to use instead of reading it now. A
    ``jax.custom_vjp`` backward pass that calls this must pass the value read in its forward
    pass: JAX traces the backward pass after the function has returned, outside an
    :func:`xla_only` block around the call."""
    if not (use_cpu_kernel() if cpu_kernel is None else cpu_kernel):
        return xla(*args)
    if _cpu_only():  # no other platform to lower for: the XLA branch is not even traced
        return cpu(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu, default=xla)


@functools.cache
def _cpu_only() -> bool:
    """True when JAX has no backend but the CPU in this process, so that every program runs on
    the CPU: :func:`on_platform` then traces the CPU branch alone (tracing the unused XLA program
    too multiplies the compile time of a ranking model with tied orders for numpyro:
    ``benchmarks/bench_jax_trace.py``). Lowering for another platform
    from such a process (``jax.export`` with ``platforms=``) needs :func:`xla_only`."""
    from jax.extend.backend import backends

    return set(backends()) <= {"cpu"}
