"""PyMC distributions (value conventions in each class docstring)."""

from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits

__all__ = ["PermutationExpFamily", "edge_logits"]
