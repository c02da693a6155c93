"""PartialRanking: logp vs enumeration, draws vs exact probabilities, model build, errors."""

import itertools

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.distributions.distribution import support_point
from pymc.logprob.utils import ParameterValueError

import pm_perm
from pm_perm import PartialRanking
from pm_perm.distributions.partial_ranking import PartialRankingRV
from pm_perm.kernels.partial_orders import partial_order_loglik_and_grad
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import partial_order_logp_enum
from pm_perm.testing import chi_square_pvalue

ORDERS5 = np.array(
    [[0, 1, 2, 3, 4], [2, 0, -1, 1, -1], [-1, -1, -1, -1, -1], [0, 0, 2, 2, 2], [2, 0, 0, 3, -1],
     [-1, -1, 0, -1, -1], [4, 3, 2, 1, 0]]
)


def _logits(rng, M, batch=(), forbid=0.15):
    W = rng.normal(scale=1.5, size=batch + (M, M))
    W[rng.random(W.shape) < forbid] = -np.inf
    for w in W.reshape(-1, M, M):
        w[np.arange(M), rng.permutation(M)] = rng.normal(size=M)
    return W


def top_k_rows(M):
    """Every strict top-k rank-form row, k = 0..M, with its k."""
    rows, ks = [], []
    for k in range(M + 1):
        for items in itertools.permutations(range(M), k):
            y = np.full(M, -1)
            y[list(items)] = np.arange(k)
            rows.append(y)
            ks.append(k)
    return np.array(rows), np.array(ks)


def test_logp_matches_enumeration_with_weights():
    rng = np.random.default_rng(0)
    W = _logits(rng, 5)
    counts = np.array([3, 1, 2, 5, 0, 4, 2])
    lp = pm.logp(PartialRanking.dist(logits=W, weights=counts), ORDERS5).eval()
    ref = np.array([partial_order_logp_enum(W, y) for y in ORDERS5])
    expect = np.where(counts == 0, 0.0, counts * ref)
    np.testing.assert_allclose(lp, expect, rtol=0, atol=1e-11)


@pytest.mark.parametrize("M", [1, 2, 3, 4])
def test_length_probs_logp_is_the_law_of_the_draws(M):
    """With length_probs the pmf over every top-k row (k = 0..M) sums to 1 and matches
    length_probs[k] * p(top-k order) by enumeration."""
    rng = np.random.default_rng(M)
    W = _logits(rng, M, forbid=0.0)
    pk = rng.dirichlet(np.ones(M + 1))
    rows, ks = top_k_rows(M)
    lp = pm.logp(PartialRanking.dist(logits=W, length_probs=pk), rows).eval()
    ref = np.log(pk[ks]) + [partial_order_logp_enum(W, y) for y in rows]
    np.testing.assert_allclose(lp, ref, atol=1e-11)
    np.testing.assert_allclose(np.exp(lp).sum(), 1.0, atol=1e-12)


def test_batched_logits_one_per_row():
    rng = np.random.default_rng(1)
    W = _logits(rng, 5, batch=(ORDERS5.shape[0],))
    lp = pm.logp(PartialRanking.dist(logits=W), ORDERS5).eval()
    ref = [partial_order_logp_enum(w, y) for w, y in zip(W, ORDERS5, strict=True)]
    np.testing.assert_allclose(lp, ref, atol=1e-11)


def test_invalid_value_gets_minus_inf():
    y = PartialRanking.dist(logits=np.zeros((3, 3)))
    bad = np.array([[0, 0, 1], [0, 2, -1], [-1, 0, 2], [0, 1, 2]])
    lp = pm.logp(y, bad).eval()
    assert np.all(lp[:3] == -np.inf) and np.isclose(lp[3], -np.log(6))


def test_model_logp_and_gradient_match_kernel():
    rng = np.random.default_rng(2)
    Wv = rng.normal(size=(5, 5))
    counts = np.array([3, 1, 2, 5, 1, 4, 2])
    with pm.Model() as model:
        W = pm.Normal("W", 0.0, 1.0, shape=(5, 5))
        PartialRanking("ballots", logits=W, observed=ORDERS5, weights=counts)
    point = {"W": Wv}
    logp = model.compile_logp(vars=[model["ballots"]], jacobian=False)(point)
    dlogp = model.compile_dlogp(vars=[model["W"]], jacobian=False)(point)
    total, grad = partial_order_loglik_and_grad(Wv, ORDERS5, counts)
    np.testing.assert_allclose(logp, total, atol=1e-10)
    np.testing.assert_allclose(dlogp, grad.ravel() - Wv.ravel(), atol=1e-10)  # + Normal prior


def test_one_logits_matrix_shares_one_table_in_the_compiled_logp():
    """PyMC hands logp the logits with the value's batch dims (length 1): the compiled logp and
    gradient must still evaluate all rows under ONE matrix (an (n, M) orders input), not one
    table per row."""
    W = pt.matrix("W")
    lp = pm.logp(PartialRanking.dist(logits=W, weights=np.arange(1, 8)), ORDERS5).sum()
    f = pytensor.function([W], [lp, pt.grad(lp, W)])
    nodes = [n for n in f.maker.fgraph.toposort()
             if type(getattr(n.op, "core_op", n.op)).__name__.startswith("PartialOrderLoglik")]
    assert len(nodes) == 1  # values and gradient from one fused node
    assert nodes[0].inputs[0].type.ndim == 2 and nodes[0].inputs[1].type.ndim == 2


def test_support_point_is_the_max_weight_matching():
    rng = np.random.default_rng(3)
    W = _logits(rng, 5, forbid=0.0)
    mode = support_point(PartialRanking.dist(logits=W, weights=np.ones(4))).eval()
    perms = all_permutations(5)
    best = perms[np.argmax(W[np.arange(5), perms].sum(-1))]
    assert mode.shape == (4, 5)
    np.testing.assert_array_equal(mode, np.broadcast_to(best, (4, 5)))


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_complete_draws_chi_square(mode):
    """Chi-square over all 24 complete orders of M = 4 (numba core and NumPy rng_fn paths).

    10,000 draws at a fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    rng = np.random.default_rng(4)
    W = _logits(rng, 4, forbid=0.1)
    draws = pm.draw(PartialRanking.dist(logits=W, size=(10_000,)), random_seed=5, mode=mode)
    perms = all_permutations(4)
    p = np.exp([partial_order_logp_enum(W, y) for y in perms])
    assert chi_square_pvalue(draws, perms, p) > 1e-4


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_partial_draws_chi_square(mode):
    """Chi-square over all 65 top-k rows of M = 4 (k = 0..4) with a length distribution;
    20,000 draws at a fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    rng = np.random.default_rng(6)
    W = _logits(rng, 4, forbid=0.0)
    pk = np.array([0.05, 0.3, 0.25, 0.1, 0.3])
    y = PartialRanking.dist(logits=W, length_probs=pk, size=(20_000,))
    draws = pm.draw(y, random_seed=7, mode=mode)
    rows, ks = top_k_rows(4)
    p = pk[ks] * np.exp([partial_order_logp_enum(W, r) for r in rows])
    np.testing.assert_allclose(p.sum(), 1.0, atol=1e-12)
    assert chi_square_pvalue(draws, rows, p) > 1e-4


def test_draws_validate_parameters_as_logp():
    W = np.zeros((3, 3))
    for mode in ("NUMBA", "FAST_COMPILE"):
        with pytest.raises(ValueError, match="length_probs must be a simplex"):
            pm.draw(PartialRanking.dist(logits=W, length_probs=[0.5, 0.5, 0.5, 0.0]), mode=mode)
        with pytest.raises(ValueError, match="NaN"):
            pm.draw(PartialRanking.dist(logits=np.full((3, 3), np.nan)), mode=mode)
        infeasible = np.zeros((3, 3))
        infeasible[:, 0] = -np.inf
        with pytest.raises(ValueError, match="no permutation"):
            pm.draw(PartialRanking.dist(logits=infeasible), mode=mode)
        w = pt.vector("w")
        d = PartialRanking.dist(logits=W, weights=w)
        with pytest.raises(ValueError, match="weights must be non-negative integers"):
            pm.draw(d, givens={w: np.array([1.0, 0.5])}, mode=mode)
    with pytest.raises(ValueError, match="length_probs must be a simplex"):
        PartialRankingRV.rng_fn(np.random.default_rng(0), W, np.float64(1), -np.ones(4),
                                np.zeros(0, dtype=np.int64), None)  # no pattern


def test_bad_parameters_in_logp():
    y = PartialRanking.dist(logits=np.array([[0.0, np.nan], [0.0, 0.0]]))
    with pytest.raises(ParameterValueError, match="NaN"):
        pm.logp(y, np.array([0, 1])).eval()
    W = np.zeros((3, 3))
    W[:, 0] = -np.inf
    with pytest.raises(ParameterValueError, match="admit no permutation"):
        pm.logp(PartialRanking.dist(logits=W), np.array([2, 0, 1])).eval()
    pk = pt.vector("pk")
    lp = pm.logp(PartialRanking.dist(logits=np.zeros((3, 3)), length_probs=pk), np.array([0, 1, 2]))
    with pytest.raises(ParameterValueError, match="simplex"):
        lp.eval({pk: np.array([0.5, 0.5, 0.5, 0.0])})
    w = pt.vector("w")
    lp = pm.logp(PartialRanking.dist(logits=np.zeros((3, 3)), weights=w), np.array([0, 1, 2]))
    with pytest.raises(ParameterValueError, match="non-negative integers"):
        lp.eval({w: np.array([-1.0])})


@pytest.mark.parametrize("weights", [np.array([1, -2, 3]), np.array([1.0, 0.5, 2.0]),
                                     np.array([1.0, np.nan, 1.0])])
def test_weights_not_counts_rejected_at_build(weights):
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        PartialRanking.dist(logits=np.zeros((3, 3)), weights=weights)


def test_invalid_observed_row_named_at_build():
    obs = np.array([[0, 1, 2], [0, 0, 1], [1, 0, 2]])
    with pm.Model():
        with pytest.raises(ValueError, match=r"observed\[1\] = \[0, 0, 1\] is not a valid"):
            PartialRanking("y", logits=np.zeros((3, 3)), observed=obs)
        with pytest.raises(ValueError, match="length 3 but the logits are 4 x 4"):
            PartialRanking("z", logits=np.zeros((4, 4)), observed=obs[[0, 2]])
        with pytest.raises(ValueError, match="-1"):
            PartialRanking("u", logits=np.zeros((3, 3)), observed=np.array([[0.0, np.nan, 1.0]]))


def test_beyond_exact_limit_names_alternatives():
    with pytest.raises(ValueError, match="M = 27 items.*Plackett-Luce.*fewer items"):
        PartialRanking.dist(logits=np.zeros((27, 27)))
    with pytest.raises(ValueError, match="M \\+ 1 = 4 entries"):
        PartialRanking.dist(logits=np.zeros((3, 3)), length_probs=np.ones(3) / 3)


def test_exported():
    assert pm_perm.PartialRanking is PartialRanking
    assert pm_perm.distributions.PartialRanking is PartialRanking


def test_rng_fn_refuses_non_finite_weights():
    # the symbolic paths: test_conformance.py, test_non_finite_symbolic_weights_refused_...
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        PartialRankingRV.rng_fn(np.random.default_rng(0), np.zeros((3, 3)), np.float64(np.inf),
                                np.zeros(0), np.zeros(0, dtype=np.int64), None)


def test_m_zero_refused_at_dist():
    # before: the draw refused, and logp failed with an internal Reshape error
    for shape in ((0, 0), (2, 0, 0)):
        with pytest.raises(ValueError, match=r"^PartialRanking: logits must have shape "
                           r"\(\.\.\., M, M\) with M >= 1 \(at least one item\); got shape"):
            PartialRanking.dist(logits=np.zeros(shape))
