"""Inference for any PyMC model: MAP fits, the Laplace approximation, checked sampling, the
latent-permutation step method.

Layer: above :mod:`pm_perm.kernels` and PyMC only (no pm_perm distribution is imported here), so
that the distributions can register the step method and every task package can fit its models.

* :mod:`~pm_perm.inference.map`: :class:`CompiledMAP` (the MAP engine: L-BFGS-B on
  ``pm.find_MAP``'s objective, compiled once, warm starts) and :func:`map_path` (MAP along prior
  scales);
* :mod:`~pm_perm.inference.laplace`: :func:`laplace_whitening`, :func:`whitened_normal`,
  :func:`negative_hessian`, :func:`laplace_log_evidence`;
* :mod:`~pm_perm.inference.checks`: :func:`check_find_map`, :func:`check_draws`,
  :func:`sampler_warnings`, :class:`MapFitError`, :class:`SamplingError`;
* :mod:`~pm_perm.inference.sampling`: :func:`checked_sample`;
* :mod:`~pm_perm.inference.step_methods`: :class:`PermutationSwapMetropolis`.
"""

from pm_perm.inference.checks import (
    STATIONARY_RTOL,
    MapFitError,
    SamplingError,
    SamplingInterrupted,
    check_draws,
    check_find_map,
    check_lbfgs_memory,
    check_optimum,
    sampler_warnings,
)
from pm_perm.inference.laplace import (
    laplace_log_evidence,
    laplace_whitening,
    negative_hessian,
    whitened_normal,
)
from pm_perm.inference.map import CompiledMAP, map_path
from pm_perm.inference.sampling import checked_sample

__all__ = [
    "STATIONARY_RTOL",
    "CompiledMAP",
    "MapFitError",
    "SamplingError",
    "SamplingInterrupted",
    "check_draws",
    "check_find_map",
    "check_lbfgs_memory",
    "check_optimum",
    "checked_sample",
    "laplace_log_evidence",
    "laplace_whitening",
    "map_path",
    "negative_hessian",
    "sampler_warnings",
    "whitened_normal",
]
