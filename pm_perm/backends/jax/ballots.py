"""JAX implementations of :mod:`pm_perm.ops.ballots` (rows repeated by their counts).

JAX needs every shape when it traces: the number of ballots ``N = sum(counts)`` must be known
when the graph is compiled. It is when the counts are a constant of the graph (under
``pm.sample(nuts_sampler="numpyro")`` or ``"blackjax"``, ``pm.Data`` become constants): the row
index of each ballot is then computed once, and the Op is a gather. Counts that are inputs of the
compiled function (``pm.Data`` under ``pytensor.function(..., mode="JAX")``) work outside
``jax.jit`` only; under it the trace raises, naming the fix.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from pm_perm.ops.ballots import check_counts

__all__ = ["repeat_fn"]

_TRACED_MSG = ("pm_perm's expand_counts / repeat_rows under JAX need the counts known when the "
               "graph is compiled (the number of ballots sets a shape): make them a constant "
               "(pm.sample with nuts_sampler='numpyro' or 'blackjax' does this for pm.Data), or "
               "compile with PyTensor's default numba backend")


def repeat_fn(counts=None):
    """``f(x, counts) -> x`` with row ``i`` repeated ``counts[i]`` times.

    Parameters
    ----------
    counts : ndarray, optional
        The counts when they are a constant of the graph (checked here, at build); else they are
        read at run time, which needs concrete (not traced) values.
    """
    if counts is not None:
        c = check_counts(counts)
        rows = np.repeat(np.arange(c.shape[0]), c)

        def repeat_const(x, counts):
            if x.shape[0] != c.shape[0]:
                raise ValueError(f"{c.shape[0]} counts for {x.shape[0]} rows")
            return jnp.take(x, rows, axis=0)

        return repeat_const

    def repeat_runtime(x, counts):
        try:
            c = np.asarray(counts)
        except Exception as err:  # a tracer: the shape is not known
            raise ValueError(_TRACED_MSG) from err
        c = check_counts(c, x.shape[0])
        return jnp.take(x, np.repeat(np.arange(c.shape[0]), c), axis=0)

    return repeat_runtime
