"""pm_perm: PyMC distributions over permutations and count-structured labels.

Glossary of the algorithms (value conventions in each object's docstring):

log_permanent
    Exact ``log perm(exp W)`` by the subset dynamic program over bitmasks, O(M 2^M) time,
    O(2^M) memory, scaled so only positive terms are added (Petterson et al. 2009, sec. 4.2).
permutation_marginals
    ``P[i, j] = p(y[i] = j)``, the gradient of ``log_permanent``, by a forward-backward pass
    over the same subset lattice: same order of cost as the value.
max_weight_matching
    The mode of ``PermutationExpFamily``: a max-weight perfect matching (Hungarian algorithm,
    ``scipy.optimize.linear_sum_assignment``), O(M^3).
bethe_log_permanent (large M)
    Bethe approximation, a lower bound of ``log perm`` (Gurvits), with its beliefs as gradient;
    CCCP/Sinkhorn fixed point, O(M^2) per sweep (Vontobel 2013; Huang & Jebara 2009).
huber_law_sample (large M)
    Exact accept-reject sampler with the Huber-Law bound (Huber & Law 2008), O(M^2) per trial;
    fast for dense, moderately spread weights only.
swap_mcmc / PermutationSwapMetropolis (large M)
    Transposition Metropolis over permutations; the step method is registered in PyMC's
    ``STEP_METHODS`` on import so ``pm.sample`` assigns it to latent permutations.
"""

__version__ = "0.1.0"

from pm_perm import step_methods as _step_methods  # noqa: E402,F401  (registers the step)
from pm_perm.distributions import PermutationExpFamily, edge_logits  # noqa: E402
from pm_perm.kernels.matching import max_weight_matching  # noqa: E402
from pm_perm.kernels.permanent import EXACT_MAX_M  # noqa: E402

__all__ = ["EXACT_MAX_M", "PermutationExpFamily", "edge_logits", "max_weight_matching"]
