"""BradleyTerry: paired comparisons, Davidson ties, counts as one row per comparison."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pm_perm import BradleyTerry
from pm_perm.reference.pairwise import bradley_terry_logp_enum
from pm_perm.testing.conformance import chi_square_pvalue

U = np.array([0.5, -0.2, 0.1, 1.0])
ROWS = np.array([[0, 1], [3, 2], [1, 0], [2, 3]])


def test_logp_matches_reference():
    lp = pm.logp(BradleyTerry.dist(U, pairs=ROWS), ROWS).eval()
    np.testing.assert_allclose(lp, [bradley_terry_logp_enum(U, i, j, 0) for i, j in ROWS],
                               atol=1e-12)


def test_davidson_ties_match_reference_and_sum_to_one():
    rows = np.array([[0, 1, 0], [3, 2, 1], [1, 0, 0]])
    lp = pm.logp(BradleyTerry.dist(U, nu=0.7, pairs=rows), rows).eval()
    want = [bradley_terry_logp_enum(U, i, j, 2 if t else 0, 0.7) for i, j, t in rows]
    np.testing.assert_allclose(lp, want, atol=1e-12)
    outcomes = np.array([[0, 1, 0], [1, 0, 0], [0, 1, 1]])   # the 3 outcomes of pair (0, 1)
    p = np.exp(pm.logp(BradleyTerry.dist(U, nu=0.7, pairs=outcomes), outcomes).eval())
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_counts_are_one_row_per_comparison():
    """weights=counts: the model has one pointwise row per comparison, the sum is weighted."""
    counts = np.array([3, 0, 2, 1])
    with pm.Model() as model:
        u = pm.Normal("u", 0, 1, shape=4)
        BradleyTerry("c", u, weights=counts, observed=ROWS)
    point = {"u": U}
    per_row = model.compile_logp(vars=model.observed_RVs, sum=False)(point)[0]
    assert per_row.shape == (6,)
    single = pm.logp(BradleyTerry.dist(U, pairs=ROWS), ROWS).eval()
    np.testing.assert_allclose(per_row, np.repeat(single, counts), atol=1e-12)
    dist = pm.logp(BradleyTerry.dist(U, weights=counts, pairs=ROWS), ROWS).eval()
    np.testing.assert_allclose(dist, counts * single, atol=1e-12)


def test_draws_chi_square():
    """Outcomes of the pair (0, 1) with ties (3 cells), 4,000 numba draws at a fixed seed,
    against the exact probabilities. False-failure rate 1e-3 (p < 1e-3 fails)."""
    pair = np.array([0, 1, 0])
    draws = pm.draw(BradleyTerry.dist(U, nu=0.7, pairs=pair), draws=4000, random_seed=3)
    support = np.array([[0, 1, 0], [1, 0, 0], [0, 1, 1]])
    probs = [np.exp(bradley_terry_logp_enum(U, 0, 1, k, 0.7)) for k in range(3)]
    assert chi_square_pvalue(draws, support, probs) > 1e-3


def test_invalid_values_get_minus_inf():
    v = pt.as_tensor(np.array([[0, 9], [2, 2], [0, 1]]))
    lp = pm.logp(BradleyTerry.dist(U, pairs=ROWS[:3]), v).eval()
    assert lp[0] == -np.inf and lp[1] == -np.inf and np.isfinite(lp[2])


@pytest.mark.parametrize(("observed", "kwargs", "match"), [
    ([[0, 7]], {}, r"row 0: item id 7 out of range 0\.\.3"),
    ([[0, 1], [2, 2]], {}, r"row 1: item 2 compared with itself; drop the row"),
    ([[0, 1, 1]], {}, "row 0 is a tie but the model has no tie parameter; give nu="),
    ([[0, 1, 2]], {"nu": 1.0}, "the tie column must be 0"),
])
def test_bad_observed(observed, kwargs, match):
    with pytest.raises(ValueError, match=match), pm.Model():
        BradleyTerry("c", U, observed=observed, **kwargs)


def test_bad_parameters():
    with pytest.raises(ValueError, match="nu must be finite and >= 0"):
        BradleyTerry.dist(U, nu=-1.0, pairs=[0, 1, 0])
    with pytest.raises(ValueError, match="non-negative integers"):
        BradleyTerry.dist(U, weights=[1.5], pairs=[0, 1])
    with pytest.raises(ValueError, match="at least two items"):
        BradleyTerry.dist([0.0], pairs=[0, 0])
    with pytest.raises(ValueError, match="draws need the compared pairs"):
        pm.draw(BradleyTerry.dist(U))


def test_cyclic_preferences_are_independent_comparisons():
    """0 > 1, 1 > 2, 2 > 0: no ranking agrees with all three (``PartialOrder`` refuses them), but
    Bradley-Terry's comparisons are independent: a finite log-likelihood, the sum of the three."""
    cycle = np.array([[0, 1], [1, 2], [2, 0]])
    lp = pm.logp(BradleyTerry.dist(U, pairs=cycle), cycle).eval()
    want = [U[w] - np.logaddexp(U[w], U[l_]) for w, l_ in cycle]
    np.testing.assert_allclose(lp, want, rtol=1e-12)


def test_gradient_in_utilities_and_nu():
    from pytensor.gradient import verify_grad

    rows = np.array([[0, 1, 0], [3, 2, 1], [1, 0, 0]])

    def logp(u, nu):
        return pm.logp(BradleyTerry.dist(u, nu=nu, pairs=rows), rows)

    verify_grad(logp, [U, np.array(0.7)], rng=np.random.default_rng(0))
