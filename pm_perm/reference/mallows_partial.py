"""Definitional (slow) likelihood of top-k and tied rankings under the Mallows model: the sum of
the Mallows probabilities of every complete ranking consistent with the ballot, by enumerating
all ``n!`` rankings (``n <= 8``). Nothing here is used by the production code.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from pm_perm.reference.mallows import mallows_probabilities_enum
from pm_perm.reference.rankings import consistent_mask

__all__ = ["mallows_partial_logp_enum"]


def mallows_partial_logp_enum(distance, orders, rho, alpha):
    """``log p(order)`` (n_orders,) of rank-form ballots (top-k with ``-1``, ties as equal "min"
    ranks; the convention of :class:`pm_perm.PartialRanking`) under
    ``p(R) = exp(-(alpha / n) d(R, rho)) / Z_n(alpha)``: log-sum-exp over the consistent
    complete rankings (:func:`pm_perm.reference.rankings.consistent_mask`) minus that over all
    of them."""
    perms, p = mallows_probabilities_enum(distance, rho, alpha)
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    out = []
    for y in np.atleast_2d(orders):
        mask = consistent_mask(y, perms)
        out.append(float(logsumexp(lp[mask])) if mask.any() else -np.inf)
    return np.array(out)
