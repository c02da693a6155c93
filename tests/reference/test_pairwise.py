"""The pairwise oracles (pm_perm.reference.pairwise) on cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pm_perm.reference.pairwise import (
    bradley_terry_logp_enum,
    extension_mask,
    linear_extensions_logp_enum,
    random_partial_order,
)
from pm_perm.reference.permutations import all_permutations


def test_extension_counts():
    perms = all_permutations(5)
    assert extension_mask(np.full((1, 2), -1), perms).sum() == math.factorial(5)
    assert extension_mask([[0, 1], [1, 2], [2, 3], [3, 4]], perms).sum() == 1
    assert extension_mask([[0, 1], [2, 3]], perms).sum() == math.factorial(5) // 4


def test_uniform_and_pairwise_values():
    """Uniform PL: p = #extensions / M!; a single pair under PL is Bradley-Terry."""
    assert linear_extensions_logp_enum(np.zeros(4), [[0, 1], [2, 3]]) == pytest.approx(
        math.log(0.25))
    u = np.array([0.3, -1.2, 0.4])
    assert linear_extensions_logp_enum(u, [[1, 2]]) == pytest.approx(
        bradley_terry_logp_enum(u, 1, 2, 0))


def test_random_partial_orders_are_acyclic_and_distinct():
    rng = np.random.default_rng(0)
    prefs = random_partial_order(rng, 6, 10, pad=2)
    assert prefs.shape == (12, 2) and (prefs[-2:] == -1).all()
    live = prefs[:10]
    assert len({tuple(sorted(p)) for p in live}) == 10
    assert extension_mask(live, all_permutations(6)).any()
