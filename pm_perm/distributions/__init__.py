"""PyMC distributions (value conventions in each class docstring)."""

from pm_perm.distributions import _latent as _latent  # noqa: F401  (guards latent permutations)
from pm_perm.distributions.conditional_bernoulli import ConditionalBernoulli
from pm_perm.distributions.mallows import Mallows
from pm_perm.distributions.mallows_partial import MallowsPartial
from pm_perm.distributions.mixture import RankingMixture, mixture_memberships
from pm_perm.distributions.n_choose_k import NChooseK
from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK
from pm_perm.distributions.pairwise import BradleyTerry
from pm_perm.distributions.partial_order import PartialOrder
from pm_perm.distributions.partial_ranking import PartialRanking
from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits
from pm_perm.distributions.pl_anchored import PLAnchoredRanking
from pm_perm.distributions.plackett_luce import PlackettLuce
from pm_perm.distributions.top_k import TopKRanking
from pm_perm.inference import step_methods as _step_methods  # noqa: F401  (registers the step method)

__all__ = [
    "BradleyTerry",
    "ConditionalBernoulli",
    "Mallows",
    "MallowsPartial",
    "NChooseK",
    "OrdinalNChooseK",
    "PLAnchoredRanking",
    "PartialOrder",
    "PartialRanking",
    "PermutationExpFamily",
    "PlackettLuce",
    "RankingMixture",
    "TopKRanking",
    "edge_logits",
    "mixture_memberships",
]
