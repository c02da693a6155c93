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
* :mod:`~pm_perm.inference.step_methods`: :class:`PermutationLeapShift` (what ``pm.sample``
  assigns to permutation variables), :class:`PermutationSwapMetropolis`.
"""

# each submodule's __all__ is the one list of its public names; the package re-exports them
from pm_perm.inference import checks, laplace, map, sampling
from pm_perm.inference.checks import *  # noqa: F403
from pm_perm.inference.laplace import *  # noqa: F403
from pm_perm.inference.map import *  # noqa: F403
from pm_perm.inference.sampling import *  # noqa: F403

__all__ = [*checks.__all__, *laplace.__all__, *map.__all__, *sampling.__all__]
