"""TopKRanking: logp vs enumeration, draws vs exact probabilities, model build, errors."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError

import pm_perm
from pm_perm import PartialRanking, TopKRanking
from pm_perm.kernels.top_k import top_k_loglik_and_grad
from pm_perm.reference.top_k import top_k_lists, top_k_logp_enum
from pm_perm.testing import chi_square_pvalue

# M = 5 items, K = 3
ORDERS = np.array(
    [[0, 1, 2, -1, -1], [2, 0, -1, 1, -1], [-1, -1, -1, -1, -1], [0, 0, -1, -1, -1],
     [-1, 0, 0, 0, -1], [-1, -1, 0, -1, -1], [0, 1, 1, -1, -1]]
)
COUNTS = np.array([3, 1, 2, 5, 0, 4, 2])


def _logits(rng, M=5, K=3, batch=()):
    return rng.normal(scale=1.5, size=batch + (M, K + 1))


def all_ballots(M, K):
    """Every strict ballot of length k = 0..K, with its k."""
    lists = top_k_lists(M, K)
    rows = np.unique(np.concatenate([np.where(lists < k, lists, -1) for k in range(K + 1)]),
                     axis=0)
    return rows, (rows >= 0).sum(1)


def test_logp_matches_enumeration_with_weights():
    rng = np.random.default_rng(0)
    L = _logits(rng)
    lp = pm.logp(TopKRanking.dist(logits=L, weights=COUNTS), ORDERS).eval()
    ref = np.array([top_k_logp_enum(L, y) for y in ORDERS])
    np.testing.assert_allclose(lp, np.where(COUNTS == 0, 0.0, COUNTS * ref), atol=1e-11)


def test_docstring_example_values():
    L = np.zeros((5, 3))
    L[0, 0] = 2.0
    ballots = np.array([[0, 1, -1, -1, -1], [-1, 0, -1, -1, -1], [0, 0, -1, -1, -1]])
    lp = pm.logp(TopKRanking.dist(L), ballots).eval()
    np.testing.assert_allclose(lp, [top_k_logp_enum(L, y) for y in ballots], atol=1e-12)


@pytest.mark.parametrize(("M", "K"), [(3, 1), (4, 2), (4, 4)])
def test_length_probs_logp_is_the_law_of_the_draws(M, K):
    rng = np.random.default_rng(M + K)
    L = _logits(rng, M, K)
    pk = rng.dirichlet(np.ones(K + 1))
    rows, ks = all_ballots(M, K)
    lp = pm.logp(TopKRanking.dist(logits=L, length_probs=pk), rows).eval()
    ref = np.log(pk[ks]) + [top_k_logp_enum(L, y) for y in rows]
    np.testing.assert_allclose(lp, ref, atol=1e-11)
    np.testing.assert_allclose(np.exp(lp).sum(), 1.0, atol=1e-12)


def test_k_equals_m_equals_partial_ranking():
    rng = np.random.default_rng(1)
    L = _logits(rng, 5, 5)
    orders = np.array([[0, 1, 2, 3, 4], [2, 0, -1, 1, -1], [0, 0, 2, 2, 2], [-1, -1, 0, -1, -1]])
    a = pm.logp(TopKRanking.dist(L), orders).eval()
    b = pm.logp(PartialRanking.dist(L[:, :5]), orders).eval()
    np.testing.assert_allclose(a, b, atol=1e-11)


def test_batched_logits_one_per_row():
    rng = np.random.default_rng(2)
    L = _logits(rng, batch=(len(ORDERS),))
    lp = pm.logp(TopKRanking.dist(logits=L), ORDERS).eval()
    ref = [top_k_logp_enum(w, y) for w, y in zip(L, ORDERS, strict=True)]
    np.testing.assert_allclose(lp, ref, atol=1e-11)


def test_model_logp_and_gradient_match_kernel_one_fused_node():
    rng = np.random.default_rng(3)
    Lv = rng.normal(size=(5, 4))
    with pm.Model() as model:
        L = pm.Normal("L", 0.0, 1.0, shape=(5, 4))
        TopKRanking("ballots", logits=L, observed=ORDERS, weights=COUNTS, dims=("ballot", "i"))
    assert model["ballots"].eval().shape == (COUNTS.sum(), 5)  # one row per ballot
    point = {"L": Lv}
    logp = model.compile_logp(vars=[model["ballots"]], jacobian=False)(point)
    dlogp_fn = model.compile_dlogp(vars=[model["L"]], jacobian=False)
    total, grad = top_k_loglik_and_grad(Lv, ORDERS, COUNTS.astype(float))
    np.testing.assert_allclose(logp, total, atol=1e-10)
    np.testing.assert_allclose(dlogp_fn(point), grad.ravel() - Lv.ravel(), atol=1e-10)
    Lt = pt.matrix("L")
    lp = pm.logp(TopKRanking.dist(logits=Lt, weights=np.arange(1, 8)), ORDERS).sum()
    f = pytensor.function([Lt], [lp, pt.grad(lp, Lt)])
    nodes = [n for n in f.maker.fgraph.toposort()
             if type(getattr(n.op, "core_op", n.op)).__name__.startswith("TopKLoglik")]
    assert len(nodes) == 1 and nodes[0].inputs[0].type.ndim == 2


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_top_k_draws_chi_square(mode):
    """Chi-square over the 20 top-2 lists of 5 items (numba core and NumPy rng_fn paths);
    10,000 draws at a fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    rng = np.random.default_rng(4)
    L = _logits(rng, 5, 2)
    draws = pm.draw(TopKRanking.dist(logits=L, size=(10_000,)), random_seed=5, mode=mode)
    lists = top_k_lists(5, 2)
    p = np.exp([top_k_logp_enum(L, y) for y in lists])
    assert chi_square_pvalue(draws, lists, p) > 1e-4


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_length_and_pattern_draws_chi_square(mode):
    """With length_probs: chi-square over every ballot of length 0..2 of 4 items (K = 2);
    with a tied pattern (two items tied first): over the 6 such ballots. 10,000 draws each at a
    fixed seed; each fails if p < 1e-4 (false-failure rate 2e-4 per mode)."""
    rng = np.random.default_rng(6)
    L = _logits(rng, 4, 2)
    pk = np.array([0.1, 0.4, 0.5])
    draws = pm.draw(TopKRanking.dist(logits=L, length_probs=pk, size=(10_000,)), random_seed=7,
                    mode=mode)
    rows, ks = all_ballots(4, 2)
    p = pk[ks] * np.exp([top_k_logp_enum(L, r) for r in rows])
    assert chi_square_pvalue(draws, rows, p) > 1e-4
    pattern = np.array([0, 0, -1, -1])
    draws = pm.draw(TopKRanking.dist(logits=L, pattern=pattern, size=(10_000,)), random_seed=8,
                    mode=mode)
    tied = np.array([[0, 0, -1, -1], [0, -1, 0, -1], [0, -1, -1, 0], [-1, 0, 0, -1],
                     [-1, 0, -1, 0], [-1, -1, 0, 0]])
    p = np.exp([top_k_logp_enum(L, r) for r in tied])
    np.testing.assert_allclose(p.sum(), 1.0, atol=1e-12)
    assert chi_square_pvalue(draws, tied, p) > 1e-4


def test_observed_pattern_kept_in_posterior_predictive():
    rng = np.random.default_rng(9)
    with pm.Model():
        TopKRanking("ballots", logits=_logits(rng), observed=ORDERS[:4])
        idata = pm.sample_prior_predictive(draws=5, random_seed=1)
    y = idata.prior_predictive["ballots"].values.reshape(-1, 4, 5)
    np.testing.assert_array_equal((y >= 0).sum(-1), np.broadcast_to((ORDERS[:4] >= 0).sum(-1),
                                                                     (5, 4)))


def test_bad_input_is_named():
    L = np.zeros((5, 4))
    with pytest.raises(ValueError, match="1 <= K <= M"):
        TopKRanking.dist(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="ranks 4 items, more than the K = 3"):
        with pm.Model():
            TopKRanking("y", L, observed=np.array([[0, 1, 2, 3, -1]]))
    with pytest.raises(ValueError, match="not a valid rank-form order"):
        with pm.Model():
            TopKRanking("y", L, observed=np.array([[0, 2, -1, -1, -1]]))
    with pytest.raises(ValueError, match="NaN"):
        with pm.Model():
            TopKRanking("y", L, observed=np.array([[0, np.nan, -1, -1, -1]]))
    with pytest.raises(ParameterValueError, match="logits must be"):
        pm.logp(TopKRanking.dist(np.full((5, 4), np.nan)), ORDERS).eval()
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        TopKRanking.dist(L, weights=np.array([1.5]))
    with pytest.raises(ValueError, match="length_probs must have K \\+ 1 = 4"):
        TopKRanking.dist(L, length_probs=np.ones(6) / 6)
    with pytest.raises(ValueError, match="pattern ranks more items"):
        TopKRanking.dist(L, pattern=np.array([0, 1, 2, 3, -1]))
    with pytest.raises(ValueError, match="TOP_K_MAX_K"):
        TopKRanking.dist(np.zeros((30, 27)))
    lp = pm.logp(TopKRanking.dist(L), np.array([[0, 1, 2, 3, -1]])).eval()
    assert lp[0] == -np.inf  # a longer ballot given to logp directly: outside the support


def test_exported():
    assert pm_perm.TopKRanking is TopKRanking
    assert "TopKRanking" in pm_perm.__all__
