"""Exact Mallows draws (pm_perm.kernels.mallows_sampling) against enumerated probabilities.

Each test draws 20,000 rankings of n = 5 items at a fixed seed and applies a chi-square
goodness-of-fit test over the 120 rankings, failing below p = 1e-3: a correct sampler fails it
with probability 1e-3 per seed (here the seed is fixed, so the outcome is deterministic)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from pm_perm.kernels.mallows import log_distance_counts
from pm_perm.kernels.mallows_sampling import (
    SEPARABLE,
    cayley_draw_into,
    kendall_draw_into,
    separable_logits,
    ulam_draw_into,
)
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.reference.mallows import distance_ref, mallows_probabilities_enum

RHO = np.array([2, 0, 4, 1, 3])
N_DRAWS = 20_000
P_MIN = 1e-3


def _draws(distance, rho, alpha, size, seed):
    rng = np.random.default_rng(seed)
    n = rho.size
    theta = alpha / n
    if distance in SEPARABLE:
        W = separable_logits(rho, theta, SEPARABLE[distance])
        return sample_permutations(W, size=(size,), rng=rng)
    out = np.empty((size, n), dtype=np.int64)
    for k in range(size):
        if distance == "kendall":
            kendall_draw_into(rng, rho, theta, out[k])
        elif distance == "cayley":
            cayley_draw_into(rng, rho, theta, out[k])
        else:
            d, log_counts = log_distance_counts("ulam", n)
            ulam_draw_into(rng, rho, theta, d, log_counts, out[k])
    return out


def chi_square_pvalue(draws, perms, probs):
    index = {tuple(r): i for i, r in enumerate(perms.tolist())}
    counts = np.bincount([index[tuple(r)] for r in draws.tolist()], minlength=len(perms))
    return chisquare(counts, probs * len(draws)).pvalue


@pytest.mark.parametrize("distance", ["footrule", "spearman", "hamming", "kendall", "cayley",
                                      "ulam"])
@pytest.mark.parametrize("alpha", [0.0, 4.0])
def test_draws_follow_the_enumerated_probabilities(distance, alpha):
    perms, probs = mallows_probabilities_enum(distance, RHO, alpha)
    draws = _draws(distance, RHO, alpha, N_DRAWS, seed=11)
    assert chi_square_pvalue(draws, perms, probs) > P_MIN


def test_separable_logits():
    W = separable_logits(np.array([1, 0, 2]), 0.5, 0)
    np.testing.assert_array_equal(W, -0.5 * np.array([[1, 0, 1], [0, 1, 2], [2, 1, 0]]))
    W = separable_logits(np.array([2, 0, 1]), 1.0, 1)  # spearman: -(j - rho_i)^2
    np.testing.assert_array_equal(W, -np.array([[4, 1, 0], [0, 1, 4], [1, 0, 1]]))
    W = separable_logits(np.array([1, 0]), 2.0, 2)  # hamming: -2 [j != rho_i]
    np.testing.assert_array_equal(W, -2.0 * np.eye(2))


def test_ulam_draws_at_larger_n_have_the_drawn_distance_distribution():
    """n = 12 (RSK with non-trivial shapes): the drawn distances follow N_d exp(-theta d)."""
    n, alpha = 12, 6.0
    rho = np.random.default_rng(0).permutation(n)
    draws = _draws("ulam", rho, alpha, 4000, seed=3)
    assert all(sorted(r) == list(range(n)) for r in draws.tolist())
    d, log_counts = log_distance_counts("ulam", n)
    w = log_counts - alpha / n * d
    probs = np.exp(w - w.max())
    probs /= probs.sum()
    observed = [distance_ref("ulam", r, rho) for r in draws]
    counts = np.array([observed.count(int(v)) for v in d])
    keep = probs * len(draws) >= 5  # pool the sparse tail into one cell
    f_obs = np.append(counts[keep], counts[~keep].sum())
    f_exp = np.append(probs[keep], probs[~keep].sum()) * len(draws)
    assert chisquare(f_obs, f_exp).pvalue > P_MIN
