"""PyMC distributions (value conventions in each class docstring)."""

from pm_perm.distributions.cardinality import ConditionalBernoulli, NChooseK, OrdinalNChooseK
from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits

__all__ = [
    "ConditionalBernoulli",
    "NChooseK",
    "OrdinalNChooseK",
    "PermutationExpFamily",
    "edge_logits",
]
