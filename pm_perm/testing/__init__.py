"""Testing helpers for users of pm_perm: checks that a model's machinery is right.

:mod:`pm_perm.testing.conformance`
    Goodness of fit of a distribution's draws against its exact probabilities (its logp over an
    enumerated support): ``check_draws_match_logp``, ``chi_square_pvalue``.
:mod:`pm_perm.testing.sbc`
    Simulation-based calibration (Talts et al. 2018) of any PyMC model: ``run_sbc`` returns the
    rank of each true parameter among posterior draws, ``uniformity_pvalue`` tests them,
    ``plot_rank_histograms`` draws them.

The exact (enumeration) oracles these checks compare against are in :mod:`pm_perm.reference`.
Importing this package imports neither PyMC nor nutpie; the functions import what they need.
"""

from pm_perm.testing.conformance import check_draws_match_logp, chi_square_pvalue, count_draws
from pm_perm.testing.sbc import SBCModel, plot_rank_histograms, run_sbc, uniformity_pvalue

__all__ = [
    "SBCModel",
    "check_draws_match_logp",
    "chi_square_pvalue",
    "count_draws",
    "plot_rank_histograms",
    "run_sbc",
    "uniformity_pvalue",
]
