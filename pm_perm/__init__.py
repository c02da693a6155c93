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
"""

__version__ = "0.1.0"
