"""Data-parallel log-likelihoods over several devices with ``jax.sharding`` (no home-made engine).

Recipe (tested on CPU with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``; the same code
runs on GPUs/TPUs):

1. Build the PyMC model with the per-observation data in ``pm.Data`` containers whose LEADING
   axis indexes independent observations (graphs, queries, ballots...).
2. :func:`model_logp_fn` turns ``model.logp()`` into a JAX function
   ``logp(params: dict, *data) -> scalar`` in which those containers are explicit inputs.
3. :func:`shard_observations` places the data on a 1-D device mesh, split along the leading
   axis (``NamedSharding(mesh, P("obs"))``); parameters stay replicated.
4. ``jax.jit(logp)`` (or ``jax.value_and_grad``) on the sharded arrays: XLA's SPMD partitioner
   runs each device's slice of the per-observation work (the vectorised permanents, count DPs,
   the partial-order and Plackett-Luce likelihoods of ballots...) where the slice lives and
   all-reduces the sum. Hand the closure
   ``lambda p: logp(p, *sharded)`` to blackjax / numpyro's NUTS as the log density.

Requirements: the number of observations must be divisible by the number of devices (pad with
observations of weight zero, e.g. a ``counts`` input, or drop a few); parameters in the model's
value space (transformed, e.g. log sigma), as ``model.value_vars``. Several hosts: call
``jax.distributed.initialize(coordinator_address, num_processes, process_id)`` in every process
before anything else; ``jax.devices()`` then lists the devices of all hosts and the same mesh
spans them; each process must build the global arrays from its own shard
(``jax.make_array_from_process_local_data``) instead of ``device_put``. What a user provides:
the model with ``pm.Data`` observations, the device list (default all), and, for several hosts,
the coordinator address and process ids (cluster launchers such as SLURM set them).
What is not split: the scaling duals of the exact permanent (a host callback on the whole batch of
logits), the max-weight matching (a host callback, used only as ``support_point``, not in the log
density) and the top-k likelihood (``TopKRanking``: an XLA FFI custom call with no XLA program; the
partitioner all-gathers its orders and counts and every device scores all of them, so the value is
right but the work is not divided). The partial-order and Plackett-Luce likelihoods have no host
part: with the ballots (distinct orders and their counts) as ``pm.Data``, each device parses and
scores its share of the orders, and the parameters' suffix table (``2^M`` entries per logits matrix)
is computed on every device (tested with ``PartialRanking``).
"""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytensor
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from pm_perm.backends.jax.platform import xla_only

__all__ = ["model_logp_fn", "shard_observations"]


def model_logp_fn(model, data_names, xla=True):
    """``logp(params, *data)``: the model's joint log density as a JAX function with the
    ``pm.Data`` containers ``data_names`` as explicit inputs.

    ``params`` maps each name in ``[v.name for v in model.value_vars]`` to its value
    (transformed space). The function is not jitted: jit it after sharding the data.
    With ``xla=True`` (default) pm_perm's kernels are traced as XLA programs on every platform,
    CPU included, so XLA partitions them over the devices; their CPU FFI calls (faster on one
    CPU, see :mod:`pm_perm.backends.jax.platform`) would gather the whole batch onto one device.
    ``xla=False`` keeps the FFI calls (one CPU device).
    """
    from pymc.sampling.jax import get_jaxified_graph

    logp = model.logp()
    shared = [model[name] for name in data_names]
    inputs = [s.type() for s in shared]
    for new, s in zip(inputs, shared, strict=True):
        new.name = s.name
    (logp,) = pytensor.graph.replace.graph_replace([logp], dict(zip(shared, inputs, strict=True)))
    values = list(model.value_vars)
    fn = get_jaxified_graph(inputs=values + inputs, outputs=[logp])
    names = [v.name for v in values]

    def logp_fn(params, *data):
        with xla_only() if xla else contextlib.nullcontext():
            return fn(*[params[n] for n in names], *data)[0]

    return logp_fn


def shard_observations(*arrays, devices=None, axis_name="obs"):
    """Place ``arrays`` on a 1-D mesh of ``devices`` (default: all), split along axis 0.

    Returns ``(mesh, sharded_arrays)``. Raises ``ValueError`` when an array's leading axis is
    not divisible by the number of devices.
    """
    devices = jax.devices() if devices is None else list(devices)
    n = len(devices)
    for i, a in enumerate(arrays):
        if np.shape(a)[0] % n:
            raise ValueError(
                f"array {i} has {np.shape(a)[0]} observations along axis 0, not divisible by "
                f"{n} devices: pad with zero-weight observations or drop "
                f"{np.shape(a)[0] % n} of them"
            )
    mesh = Mesh(np.array(devices), (axis_name,))
    sharding = NamedSharding(mesh, P(axis_name))
    return mesh, tuple(jax.device_put(np.asarray(a), sharding) for a in arrays)
