"""PyMC distributions (value conventions in each class docstring)."""

from pm_perm.distributions import _values
from pm_perm.distributions.cardinality import ConditionalBernoulli, NChooseK, OrdinalNChooseK
from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits

_values.install()  # pm.logp: non-integer literal values get -inf, not truncation

__all__ = [
    "ConditionalBernoulli",
    "NChooseK",
    "OrdinalNChooseK",
    "PermutationExpFamily",
    "edge_logits",
]
