"""Tests of OrdinalNChooseK (and optimal_ranking) against enumeration."""

import functools
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError
from pymc.testing import assert_support_point_is_expected

from pm_perm.distributions.n_choose_k import NChooseK
from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK, optimal_ranking
from pm_perm.reference import subsets as S
from pm_perm.testing import chi_square_pvalue
from tests.distributions._count_labels import FAST


@functools.cache  # one compiled function per (R, mode), for any D: shared by the cases
def _ordinal_fn(R, mode):
    value, th = pt.lmatrix("value"), pt.vector("th")
    if mode == "prior":
        cp = pt.tensor("cp", shape=(R, None))
        dist = OrdinalNChooseK.dist(th, count_probs=cp, shape=value.shape)
        inputs = [value, th, cp]
    elif mode == "counts":
        cp = pt.tensor("counts", dtype="int64", shape=(R,))
        dist = OrdinalNChooseK.dist(th, counts=cp, shape=value.shape)
        inputs = [value, th, cp]
    else:
        dist = OrdinalNChooseK.dist(th, n_levels=R, shape=value.shape)
        inputs = [value, th]
    return pytensor.function(inputs, pm.logp(dist, value), mode=FAST)


def _check_ordinal(D, R):
    rng = np.random.default_rng(10 * D + R)
    theta = rng.normal(size=D)
    cp = rng.dirichlet(np.ones(D + 1), size=R)
    Y = S.ordinal_labelings(D, R)
    counts = np.stack([np.bincount(y, minlength=R) for y in Y])
    sub = rng.choice(len(Y), size=min(len(Y), 60), replace=False)
    # with a count prior: a proper distribution over all R^D labelings, equal to the oracle
    lp = _ordinal_fn(R, "prior")(Y, theta, cp)
    assert abs(np.exp(lp).sum() - 1) < 1e-10
    ref = [S.ordinal_log_pmf(theta, Y[i], R, cp) for i in sub]
    np.testing.assert_allclose(lp[sub], ref, atol=1e-10)
    # conditioned on the observed counts: sums to 1 within each count vector
    lc = _ordinal_fn(R, "observed")(Y, theta)
    ref = [S.ordinal_log_pmf(theta, Y[i], R) for i in sub]
    np.testing.assert_allclose(lc[sub], ref, atol=1e-10)
    keys, inv = np.unique(counts, axis=0, return_inverse=True)
    sums = np.bincount(inv.ravel(), weights=np.exp(lc))
    np.testing.assert_allclose(sums, 1.0, atol=1e-10)
    # fixed counts: the conditional pmf on matching labelings, -inf elsewhere
    c0 = keys[len(keys) // 2]
    lf = _ordinal_fn(R, "counts")(Y, theta, c0)
    match = np.all(counts == c0, axis=1)
    np.testing.assert_allclose(lf[match], lc[match], atol=1e-12)
    assert np.all(lf[~match] == -np.inf)


@pytest.mark.parametrize("R", [2, 3, 4])
@pytest.mark.parametrize("D", range(1, 8))
def test_ordinal_against_enumeration(D, R):
    _check_ordinal(D, R)


@pytest.mark.parametrize("D", [3, 6])
def test_ordinal_plackett_luce_identity(D):
    # R = D levels, one item per level: the probability of the labels is the Plackett-Luce
    # probability of the ranking that lists items by decreasing label.
    rng = np.random.default_rng(D)
    theta = rng.normal(size=D) * 2
    f = _ordinal_fn(D, "counts")
    Y = np.stack([rng.permutation(D) for _ in range(20)])
    lp = f(Y, theta, np.ones(D, dtype=np.int64))
    for y, v in zip(Y, lp, strict=True):
        order = np.argsort(-y)
        t = theta[order]
        pl = sum(t[i] - np.log(np.exp(t[i:]).sum()) for i in range(D))
        assert v == pytest.approx(pl, abs=1e-12)


def test_ordinal_gradients_logits_and_count_probs():
    # Analytic gradient (through log_esp's pullback and the count-prior normaliser) against
    # central finite differences; count_probs = softmax(a) row-wise so every direction is valid.
    rng = np.random.default_rng(6)
    D, R = 5, 3
    Y = np.array([[2, 0, 1, 1, 0], [0, 0, 2, 1, 1], [1, 2, 0, 0, 0]])
    th, a = pt.vector("th"), pt.matrix("a")
    cp = pt.specify_shape(pt.special.softmax(a, axis=-1), (R, D + 1))
    lp = pm.logp(OrdinalNChooseK.dist(th, count_probs=cp, shape=(3, D)), Y).sum()
    f = pytensor.function([th, a], [lp, *pt.grad(lp, [th, a])], mode=FAST)
    t0, a0 = rng.normal(size=D), rng.normal(size=(R, D + 1))
    _, g_th, g_a = f(t0, a0)
    eps = 1e-6
    fd_th = [(f(t0 + eps * e, a0)[0] - f(t0 - eps * e, a0)[0]) / (2 * eps) for e in np.eye(D)]
    E = np.eye(R * (D + 1)).reshape(-1, R, D + 1)
    fd_a = [(f(t0, a0 + eps * e)[0] - f(t0, a0 - eps * e)[0]) / (2 * eps) for e in E]
    np.testing.assert_allclose(g_th, fd_th, atol=1e-7)
    np.testing.assert_allclose(g_a.ravel(), fd_a, atol=1e-7)


def test_batched_count_priors_per_row(fast_mode):
    # one count prior per row (e.g. input-dependent, as in the paper's sec. 5.1)
    rng = np.random.default_rng(7)
    D = 4
    theta = rng.normal(size=(3, D))
    pk = rng.dirichlet(np.ones(D + 1), size=3)
    Y = np.array([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0]])
    lp = pm.logp(NChooseK.dist(theta, pk), Y).eval()
    for i in range(3):
        Yi, ref = S.nchoosek_log_pmf(theta[i], pk[i])
        assert lp[i] == pytest.approx(ref[Yi.tolist().index(Y[i].tolist())], abs=1e-12)
    assert pm.draw(NChooseK.dist(theta, pk), random_seed=1).shape == (3, D)
    cp = rng.dirichlet(np.ones(D + 1), size=(3, 2))  # (rows, R, D+1)
    L = np.array([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0]])
    lo = pm.logp(OrdinalNChooseK.dist(theta, count_probs=cp), L).eval()
    for i in range(3):
        assert lo[i] == pytest.approx(S.ordinal_log_pmf(theta[i], L[i], 2, cp[i]), abs=1e-12)


def test_ordinal_minus_inf_logits():
    # an item with a -inf logit can only get label 0
    theta = np.array([0.5, -np.inf, 1.0, -0.3])
    f = _ordinal_fn(3, "prior")
    cp = np.random.default_rng(1).dirichlet(np.ones(5), size=3)
    Y = S.ordinal_labelings(4, 3)
    lp = f(Y, theta, cp)
    assert np.all(lp[Y[:, 1] > 0] == -np.inf)
    ok = Y[:, 1] == 0
    assert np.all(np.isfinite(lp[ok]))
    ref = [S.ordinal_log_pmf(theta, y, 3, cp) for y in Y[ok][:20]]
    np.testing.assert_allclose(lp[ok][:20], ref, atol=1e-12)
    # counts with k_0 = 0 cannot be realised (item 1 must get label 0): their prior mass is
    # lost, as documented, so the labelings sum to 1 - P(k_0 = 0)
    lost = sum(
        np.exp(S._log_count_prior(np.array([0, a, 4 - a]), cp)) for a in range(5)
    )
    assert abs(np.exp(lp[ok]).sum() - (1 - lost)) < 1e-12


def test_ordinal_sampler_gof():
    rng = np.random.default_rng(5)
    D, R = 4, 3
    theta = rng.normal(size=D)
    cp = rng.dirichlet(np.ones(D + 1) * 3, size=R)
    draws = pm.draw(OrdinalNChooseK.dist(theta, count_probs=cp), draws=20000, random_seed=3)
    Y = S.ordinal_labelings(D, R)
    probs = np.exp([S.ordinal_log_pmf(theta, y, R, cp) for y in Y])
    assert chi_square_pvalue(draws, Y, probs) > 1e-3


def test_ordinal_sampler_fixed_counts_numpy_path():
    theta = np.array([2.0, 0.0, -1.0, 1.0, 0.5])
    d = pm.draw(OrdinalNChooseK.dist(theta, counts=[2, 2, 1]), draws=50, random_seed=1, mode=FAST)
    assert np.all(np.stack([np.bincount(x, minlength=3) for x in d]) == [2, 2, 1])


def test_ordinal_bad_input(fast_mode):
    theta = np.zeros(3)
    f = _ordinal_fn(3, "counts")
    assert f(np.array([[0, 3, 1]]), theta, np.array([1, 1, 1]))[0] == -np.inf  # label R
    assert f(np.array([[0, -1, 1]]), theta, np.array([1, 1, 1]))[0] == -np.inf
    assert f(np.array([[0, 0, 1]]), theta, np.array([1, 1, 1]))[0] == -np.inf  # counts differ
    with pytest.raises(ParameterValueError, match="total of D"):
        f(np.array([[0, 1, 2]]), theta, np.array([1, 1, 2]))  # counts do not sum to D
    g = _ordinal_fn(3, "prior")
    with pytest.raises(ParameterValueError, match="simplices"):
        g(np.array([[0, 1, 2]]), theta, np.full((3, 4), 0.3))
    with pytest.raises(ValueError, match="needs counts=, count_probs=, or n_levels="):
        OrdinalNChooseK.dist(theta)
    with pytest.raises(ValueError, match="at most one"):
        OrdinalNChooseK.dist(theta, counts=[1, 1, 1], count_probs=np.full((3, 4), 0.25))
    with pytest.raises(ValueError, match="cannot be drawn|no distribution"):
        pm.draw(OrdinalNChooseK.dist(theta, n_levels=3), random_seed=1)


def test_ordinal_support_point_and_ranking(fast_mode):
    theta = np.array([0.3, 2.0, -1.0, 1.0])
    with pm.Model() as model:
        OrdinalNChooseK("x", theta, counts=[1, 2, 1])
    assert_support_point_is_expected(model, np.array([1, 2, 0, 1]))
    with pm.Model() as model:
        OrdinalNChooseK("x", theta, count_probs=np.full((3, 5), 0.2))
    assert_support_point_is_expected(model, np.array([0, 0, 0, 0]))
    np.testing.assert_array_equal(optimal_ranking(theta), [1, 3, 0, 2])


def test_optimal_ranking_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        optimal_ranking([np.nan, 1.0, 0.0])
    np.testing.assert_array_equal(optimal_ranking([-np.inf, 1.0, 0.0]), [1, 2, 0])


@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_ordinal_draws_condition_on_feasible_counts(mode):
    theta = np.array([0.5, -np.inf, 1.0, -0.3])  # item 1 can only get label 0
    cp = np.random.default_rng(1).dirichlet(np.ones(5), size=3)
    cp[0] = [0.5, 0.2, 0.1, 0.1, 0.1]  # k_0 = 0 (infeasible) has much of the mass
    rv = OrdinalNChooseK.dist(theta, count_probs=cp)
    for seed in range(10):
        assert pm.draw(rv, random_seed=seed, mode=mode)[1] == 0
    draws = pm.draw(rv, draws=20000, random_seed=3, mode=mode)
    Y = S.ordinal_labelings(4, 3)
    probs = np.exp(pm.logp(rv, Y).eval(mode=FAST))
    assert 0.2 < probs.sum() < 0.9  # part of the prior mass is lost
    assert chi_square_pvalue(draws, Y, probs / probs.sum()) > 1e-3


def test_ordinal_and_gain_models_find_map(fast_mode):
    rng = np.random.default_rng(2)
    D, R, N = 5, 3, 60
    theta = np.array([1.5, 0.5, 0.0, -0.5, -1.5])
    Y = pm.draw(OrdinalNChooseK.dist(theta, counts=[2, 2, 1], size=(N,)), random_seed=2)
    X = rng.normal(size=(N, D))
    target = rng.integers(0, D, size=N)
    from pm_perm.ops.cardinality import log_expected_topk_gain

    with pm.Model():
        th = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        OrdinalNChooseK("y", th, n_levels=R, observed=Y)
        w = pm.Normal("w", 0, 1)
        pm.Potential("gain", log_expected_topk_gain(w * pt.as_tensor(X), target, 2).sum())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
    est = fit.posterior["theta"].values.reshape(-1)
    assert np.all(np.diff(est) < 0)  # recovers the order of the true logits
