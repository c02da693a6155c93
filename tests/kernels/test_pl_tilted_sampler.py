"""Exact sampler of the Plackett-Luce-anchored model against enumeration over all M! orders."""

import numpy as np
import pytest

from pm_perm.kernels.pl_tilted import pl_tilted_loglik
from pm_perm.kernels.pl_tilted_sampler import (
    pl_tilted_log_table,
    sample_pl_tilted,
)
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import pl_tilted_complete_logp
from pm_perm.testing import chi_square_pvalue


def test_draws_chi_square_m4():
    """Chi-square of 20,000 draws over all 24 orders of M = 4 at a fixed seed against the
    enumerated probabilities; fails if p < 1e-4 (false-failure rate 1e-4)."""
    rng = np.random.default_rng(0)
    u, D = rng.normal(0, 1.0, 4), rng.normal(0, 1.5, (4, 4))
    draws = sample_pl_tilted(u, D, size=(20_000,), rng=1)
    perms = all_permutations(4)
    p = np.exp(pl_tilted_complete_logp(u, D, perms))
    assert chi_square_pvalue(draws, perms, p) > 1e-4


def test_batched_draws_use_their_own_parameters():
    """Two parameter rows (opposite utilities, D = 0): each draw follows its own row, checked
    against enumeration by chi-square (10,000 draws per row; false-failure rate 2e-4)."""
    u = np.array([[2.0, 1.0, 0.0, -1.0], [-1.0, 0.0, 1.0, 2.0]])
    D = np.zeros((4, 4))
    draws = sample_pl_tilted(u, D, size=(10_000, 2), rng=2)
    perms = all_permutations(4)
    for b in range(2):
        p = np.exp(pl_tilted_complete_logp(u[b], D, perms))
        assert chi_square_pvalue(draws[:, b], perms, p) > 1e-4


@pytest.mark.parametrize("M", range(1, 7))
def test_log_table_gives_the_normaliser(M):
    """``log h(all) - log h(S)`` telescopes to the likelihood: the table's ``log h(all)`` is
    ``log Z``, checked through the probability of the empty order (1) and of each complete
    order (enumeration)."""
    rng = np.random.default_rng(M)
    u, D = rng.normal(0, 2.0, M), rng.normal(0, 2.0, (M, M))
    logh, logsig = np.empty(1 << M), np.empty(1 << M)
    assert pl_tilted_log_table(u, D, logh, logsig) == 0
    perms = all_permutations(M)
    pl = np.zeros(len(perms))
    s = np.zeros(len(perms))
    for k, pi in enumerate(perms):
        order = np.argsort(pi)
        for j in range(M):
            rest = order[j:]
            pl[k] += u[order[j]] - np.log(np.exp(u[rest]).sum())
        s[k] = pl[k] + D[np.arange(M), pi].sum()
    np.testing.assert_allclose(logh[-1], np.log(np.exp(s).sum()), rtol=1e-12)
    np.testing.assert_allclose(pl_tilted_loglik(u, D, perms), s - logh[-1], atol=1e-10)


def test_large_scales_do_not_underflow():
    """Utilities and deviations of scale 400 (PL factors below 1e-300): still valid draws."""
    rng = np.random.default_rng(3)
    u, D = rng.normal(0, 400.0, 6), rng.normal(0, 400.0, (6, 6))
    y = sample_pl_tilted(u, D, size=(50,), rng=4)
    assert (np.sort(y, axis=1) == np.arange(6)).all()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="must be finite"):
        sample_pl_tilted([0.0, np.nan], np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"need deviations \(M, M\)"):
        sample_pl_tilted([0.0, 1.0], np.zeros((3, 3)))
    with pytest.raises(ValueError, match="do not broadcast"):
        sample_pl_tilted(np.zeros((2, 3)), np.zeros((3, 3)), size=(3,))
    logh = np.empty(4)
    assert pl_tilted_log_table(np.array([0.0, np.inf]), np.zeros((2, 2)), logh, logh) == 1
    assert pl_tilted_log_table(np.zeros(2), np.zeros((3, 3)), logh, logh) == 2


def test_equal_parameter_rows_share_a_table_and_keep_their_draws():
    """Broadcast (equal) rows are sampled from one table: the same draws as one row with the
    full size (same stream), and distinct rows stay distinct."""
    u, D = np.array([1.0, 0.0, -1.0]), np.eye(3)
    one = sample_pl_tilted(u, D, size=(6,), rng=5)
    many = sample_pl_tilted(np.broadcast_to(u, (6, 3)), D, rng=5)
    np.testing.assert_array_equal(one, many)
    mixed = sample_pl_tilted(np.array([[30.0, 0, -30], [-30.0, 0, 30], [30.0, 0, -30]]), D,
                             rng=6)
    np.testing.assert_array_equal(mixed, [[0, 1, 2], [2, 1, 0], [0, 1, 2]])
