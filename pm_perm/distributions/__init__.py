"""PyMC distributions (value conventions in each class docstring)."""

from pm_perm.distributions.cardinality import ConditionalBernoulli, NChooseK, OrdinalNChooseK
from pm_perm.distributions.partial_ranking import PartialRanking
from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits
from pm_perm.distributions.plackett_luce import PlackettLuce
from pm_perm.inference import step_methods as _step_methods  # noqa: F401  (registers the step method)

__all__ = [
    "ConditionalBernoulli",
    "NChooseK",
    "OrdinalNChooseK",
    "PartialRanking",
    "PermutationExpFamily",
    "PlackettLuce",
    "edge_logits",
]
