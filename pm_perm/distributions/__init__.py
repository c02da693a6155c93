"""PyMC distributions (value conventions in each class docstring)."""

from pm_perm.distributions.cardinality import ConditionalBernoulli, NChooseK, OrdinalNChooseK
from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits
from pm_perm.distributions.plackett_luce import PlackettLuce

__all__ = [
    "ConditionalBernoulli",
    "NChooseK",
    "OrdinalNChooseK",
    "PermutationExpFamily",
    "PlackettLuce",
    "edge_logits",
]
