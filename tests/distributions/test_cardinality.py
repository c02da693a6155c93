"""Tests of ConditionalBernoulli, NChooseK and OrdinalNChooseK against enumeration."""

import functools
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError
from pymc.testing import assert_support_point_is_expected
from pytensor.gradient import verify_grad
from scipy import stats

from pm_perm._modes import PYTHON_MODE
from pm_perm.distributions.cardinality import (
    ConditionalBernoulli,
    NChooseK,
    OrdinalNChooseK,
    nchoosek_marginals,
    optimal_ranking,
)
from pm_perm.reference import subsets as S
from pm_perm.testing import chi_square_pvalue

# Most graphs here are compiled with the Python VM, which calls the same njit kernels and
# compiles in a fraction of the time; the numba backend is exercised by the draws in NUMBA
# mode, the sampling smoke test and the slow NUTS test.
# PyTensor's Python linker with the default rewrites (PYTHON_MODE, the other tests' mode), not
# FAST_COMPILE, whose linker compiles C code for the inner graph of a softmax (the count-label
# test files of tests/ops and tests/distributions on an empty PyTensor cache: 61 -> 41 CPU s).
FAST = PYTHON_MODE


@pytest.fixture
def fast_mode():
    with pytensor.config.change_flags(mode=FAST):
        yield


# ----------------------------------------------------------------------------- ConditionalBernoulli


@pytest.fixture(scope="module")
def cb_logp():
    value, th, k = pt.lmatrix("value"), pt.vector("th"), pt.lscalar("k")
    lp = pm.logp(ConditionalBernoulli.dist(th, k, shape=value.shape), value)
    return pytensor.function([value, th, k], lp, mode=FAST)


@pytest.mark.parametrize("D", range(1, 11))
def test_conditional_bernoulli_against_enumeration(cb_logp, D):
    rng = np.random.default_rng(D)
    theta = rng.normal(size=D) * 2
    Yall = S.binary_vectors(D)
    for k in range(D + 1):
        Y, lp_ref = S.conditional_bernoulli_log_pmf(theta, k)
        lp = cb_logp(Y, theta, k)
        np.testing.assert_allclose(lp, lp_ref, atol=1e-12)
        assert abs(np.exp(lp).sum() - 1) < 1e-12
        other = Yall[Yall.sum(1) != k]
        if len(other):
            assert np.all(cb_logp(other, theta, k) == -np.inf)


def test_conditional_bernoulli_support_matches_enumeration(cb_logp):
    """logp is finite exactly on the binary vectors with k ones, among every vector of
    {-1, 0, 1, 2}^D, for D = 1..4 and every k."""
    for D in range(1, 5):
        grid = S.ordinal_labelings(D, 4) - 1  # every vector of {-1, 0, 1, 2}^D
        binary = np.all((grid == 0) | (grid == 1), axis=1)
        theta = np.random.default_rng(D).normal(size=D)
        for k in range(D + 1):
            lp = cb_logp(grid, theta, k)
            np.testing.assert_array_equal(np.isfinite(lp), binary & (grid.sum(1) == k))


def test_conditional_bernoulli_out_of_support_and_bad_parameters(cb_logp):
    with pytest.raises(TypeError, match="integer count"):
        ConditionalBernoulli.dist(np.zeros(3), 1.5)
    theta = np.array([0.5, -0.2, 1.0])
    assert cb_logp(np.array([[1, 0, 2]]), theta, 2)[0] == -np.inf  # non-binary
    assert cb_logp(np.array([[1, 0, -1]]), theta, 0)[0] == -np.inf
    assert cb_logp(np.array([[1, 1, 1]]), theta, 2)[0] == -np.inf  # count mismatch
    with pytest.raises(ParameterValueError, match="NaN"):
        cb_logp(np.array([[1, 0, 0]]), np.array([np.nan, 0, 0]), 1)
    with pytest.raises(ParameterValueError, match="k <= D"):
        cb_logp(np.array([[1, 1, 1]]), theta, 4)
    # -inf logit: the item can never be on, and an off item is fine
    th = np.array([0.5, -np.inf, 1.0])
    assert cb_logp(np.array([[1, 1, 0]]), th, 2)[0] == -np.inf
    assert cb_logp(np.array([[1, 0, 1]]), th, 2)[0] == pytest.approx(0.0, abs=1e-15)


def test_conditional_bernoulli_extreme_logits(cb_logp):
    theta = 50.0 * np.array([1, -1, 1, -1, 1, 0.5, -0.5, 0])
    for k in range(9):
        Y, lp_ref = S.conditional_bernoulli_log_pmf(theta, k)
        lp = cb_logp(Y, theta, k)
        assert np.all(np.isfinite(lp))
        np.testing.assert_allclose(lp, lp_ref, atol=1e-10)


@pytest.mark.numba  # many evaluations: compiled code wins
def test_conditional_bernoulli_gradient():
    rng = np.random.default_rng(0)
    Y = np.array([[1, 0, 1, 0, 0], [0, 1, 1, 0, 0]])

    def f(th):
        return pm.logp(ConditionalBernoulli.dist(th, 2, shape=(2, 5)), Y).sum()

    verify_grad(f, [rng.normal(size=5)], rng=rng, mode=FAST)


# All goodness-of-fit tests: fixed seeds, 20,000 draws (expected cell counts >= 5), threshold
# p > 1e-3, so a correct sampler fails each with probability 0.1% (if the seed were random).


@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_conditional_bernoulli_sampler_gof(mode):
    theta = np.array([1.0, -0.5, 0.3, 2.0, -1.0])
    y = ConditionalBernoulli.dist(theta, 2)
    draws = pm.draw(y, draws=20000, random_seed=7, mode=mode)
    Y, lp = S.conditional_bernoulli_log_pmf(theta, 2)
    assert chi_square_pvalue(draws, Y, np.exp(lp)) > 1e-3


def test_conditional_bernoulli_batching(fast_mode):
    th = np.random.default_rng(1).normal(size=(3, 5))
    cases = [
        (dict(logits=th, k=2), (3, 5)),
        (dict(logits=th, k=[1, 2, 3]), (3, 5)),
        (dict(logits=th, k=np.arange(4)[:, None]), (4, 3, 5)),
        (dict(logits=th[0], k=2, size=(2, 3)), (2, 3, 5)),
        (dict(logits=th, k=2, size=(2, 3)), (2, 3, 5)),
    ]
    for kw, shape in cases:
        y = ConditionalBernoulli.dist(**kw)
        d = pm.draw(y, random_seed=1, mode=FAST)
        assert d.shape == shape
        k = np.broadcast_to(np.asarray(kw["k"]), shape[:-1])
        assert np.all(d.sum(-1) == k)
        assert pm.logp(y, d).eval(mode=FAST).shape == shape[:-1]


def test_conditional_bernoulli_support_point(fast_mode):
    theta = np.array([0.3, 2.0, -1.0, 1.0])
    with pm.Model() as model:
        ConditionalBernoulli("x", theta, 2)
    assert_support_point_is_expected(model, np.array([0, 1, 0, 1]))
    with pm.Model() as model:
        ConditionalBernoulli("x", theta, 1, size=(2,))
    assert_support_point_is_expected(model, np.array([[0, 1, 0, 0]] * 2))


# ----------------------------------------------------------------------------- NChooseK


@pytest.fixture(scope="module")
def nck_logp():
    value, th, pk = pt.lmatrix("value"), pt.vector("th"), pt.vector("pk")
    lp = pm.logp(NChooseK.dist(th, pk, shape=value.shape), value)
    return pytensor.function([value, th, pk], lp, mode=FAST)


@pytest.mark.parametrize("D", range(1, 11))
def test_nchoosek_against_enumeration(nck_logp, D):
    rng = np.random.default_rng(D)
    theta = rng.normal(size=D)
    pk = rng.dirichlet(np.ones(D + 1))
    pk[D // 2] = 0.0  # a forbidden count
    pk /= pk.sum()
    Y, lp_ref = S.nchoosek_log_pmf(theta, pk)
    lp = nck_logp(Y, theta, pk)
    np.testing.assert_allclose(lp, lp_ref, atol=1e-12)
    assert abs(np.exp(lp).sum() - 1) < 1e-12
    # test-time marginals helper
    np.testing.assert_allclose(
        nchoosek_marginals(theta, pk), (np.exp(lp_ref)[:, None] * Y).sum(0), atol=1e-12
    )


@pytest.mark.parametrize("D", [1, 4, 9, 40])
def test_nchoosek_poisson_binomial_prior_is_logistic_regression(nck_logp, D):
    # Swersky et al. eq. 2: with pi_k = PoissonBinomial(k; sigmoid(theta)) the model is
    # independent Bernoulli(sigmoid(theta)).
    rng = np.random.default_rng(D)
    theta = rng.normal(size=D) * 2
    p = 1 / (1 + np.exp(-theta))
    pk = stats.poisson_binom(p).pmf(np.arange(D + 1))
    pk /= pk.sum()
    Y = (rng.random((50, D)) < 0.5).astype(np.int64)
    lr = stats.bernoulli(p).logpmf(Y).sum(-1)
    np.testing.assert_allclose(nck_logp(Y, theta, pk), lr, rtol=1e-9, atol=1e-9)


def test_nchoosek_gradients_logits_and_count_probs():
    rng = np.random.default_rng(3)
    Y = np.array([[1, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 0]])

    def f(th, a):
        pk = pt.special.softmax(a)  # a simplex whose gradient verify_grad can probe freely
        return pm.logp(NChooseK.dist(th, pk, shape=(3, 4)), Y).sum()

    verify_grad(f, [rng.normal(size=4), rng.normal(size=5)], rng=rng, mode=FAST)


def test_nchoosek_bad_parameters(nck_logp):
    theta = np.zeros(3)
    y = np.array([[1, 0, 0]])
    with pytest.raises(ParameterValueError, match="simplex"):
        nck_logp(y, theta, np.array([0.5, 0.5, 0.5, 0.5]))
    with pytest.raises(ParameterValueError, match="simplex"):
        nck_logp(y, theta, np.array([1.2, -0.2, 0.0, 0.0]))
    with pytest.raises(ParameterValueError, match="simplex"):
        nck_logp(y, theta, np.array([0.5, 0.5]))  # wrong length, known only at run time
    with pytest.raises(ValueError, match="D \\+ 1 = 4"):
        NChooseK.dist(theta, np.array([0.5, 0.5]))  # wrong length, known statically
    with pytest.raises(ParameterValueError, match="NaN"):
        nck_logp(y, np.array([0, np.nan, 0]), np.full(4, 0.25))
    assert nck_logp(np.array([[1, 0, 3]]), theta, np.full(4, 0.25))[0] == -np.inf


def test_nchoosek_sampler_gof():
    rng = np.random.default_rng(8)
    theta = rng.normal(size=4)
    pk = np.array([0.1, 0.3, 0.0, 0.4, 0.2])
    draws = pm.draw(NChooseK.dist(theta, pk), draws=20000, random_seed=11)
    Y, lp = S.nchoosek_log_pmf(theta, pk)
    assert chi_square_pvalue(draws, Y, np.exp(lp)) > 1e-3


def test_nchoosek_support_point_and_shapes(fast_mode):
    theta = np.array([0.3, 2.0, -1.0, 1.0])
    with pm.Model() as model:
        NChooseK("x", theta, np.array([0.1, 0.2, 0.5, 0.1, 0.1]), size=(3,))
    assert_support_point_is_expected(model, np.array([[0, 1, 0, 1]] * 3))
    y = NChooseK.dist(np.zeros((2, 5)), np.full(6, 1 / 6), size=(4, 2))
    assert pm.draw(y, random_seed=1, mode=FAST).shape == (4, 2, 5)


def test_nchoosek_support_point_takes_the_most_probable_feasible_count(fast_mode):
    """Most mass on 3 items but only 2 finite logits: the point has 2 items on (finite logp)."""
    theta = np.array([0.3, -np.inf, 1.0, -np.inf])
    with pm.Model() as model:
        NChooseK("x", theta, np.array([0.1, 0.1, 0.2, 0.6, 0.0]))
    assert_support_point_is_expected(model, np.array([1, 0, 1, 0]))
    assert np.isfinite(model.compile_logp()(model.initial_point()))


# ----------------------------------------------------------------------------- OrdinalNChooseK


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


# ----------------------------------------------------------------------------- observed data


def test_malformed_observed_data_is_rejected():
    theta = np.zeros(3)
    with pm.Model():
        with pytest.raises(ValueError, match="integers"):
            ConditionalBernoulli("a", theta, 1, observed=np.array([[0.5, 0.5, 0.0]]))
        with pytest.raises(ValueError, match="binary"):
            NChooseK("b", theta, np.full(4, 0.25), observed=np.array([[2, 0, 0]]))
        with pytest.raises(ValueError, match="NaN"):
            NChooseK("c", theta, np.full(4, 0.25), observed=np.array([[np.nan, 0, 1]]))
        with pytest.raises(ValueError, match="0..2"):
            OrdinalNChooseK("d", theta, counts=[1, 1, 1], observed=np.array([[0, 1, 3]]))
        with pytest.raises(ValueError, match="0..1"):
            OrdinalNChooseK("e", theta, n_levels=2, observed=np.array([[0, 1, 2]]))
        # a pm.Data container is checked by the value it holds at build
        with pytest.raises(ValueError, match="binary"):
            NChooseK("f", theta, np.full(4, 0.25), observed=pm.Data("f_obs", [[2, 0, 0]]))
        with pytest.raises(ValueError, match="0..2"):
            OrdinalNChooseK("g", theta, counts=[1, 1, 1],
                            observed=pm.Data("g_obs", [[0, 1, 3]]))


def test_observed_of_the_wrong_width_is_refused_at_build():
    """Observed rows whose length is not the number of logits: a clear error when the model is
    built, not PyTensor's Elemwise shape error when it is compiled."""
    theta = np.zeros(4)
    with pm.Model():
        with pytest.raises(ValueError, match="have length 3 in their last axis but there are 4 "
                                             "logits"):
            ConditionalBernoulli("a", theta, 2, observed=[[1, 1, 0]])
        with pytest.raises(ValueError, match="have length 3 .* 4 logits"):
            NChooseK("b", logits=theta, count_probs=np.full(5, 0.2), observed=[[1, 1, 0]])
        with pytest.raises(ValueError, match="have length 5 .* 4 logits"):
            OrdinalNChooseK("c", theta, counts=[2, 2], observed=[[0, 0, 1, 1, 0]])
        with pytest.raises(ValueError, match="have length 3 .* 4 logits"):
            NChooseK("d", theta, np.full(5, 0.2), observed=pm.Data("d_obs", [[1, 1, 0]]))
        NChooseK("e", theta, np.full(5, 0.2), observed=[[1, 1, 0, 0]])  # the right width


def test_optimal_ranking_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        optimal_ranking([np.nan, 1.0, 0.0])
    np.testing.assert_array_equal(optimal_ranking([-np.inf, 1.0, 0.0]), [1, 2, 0])


# ------------------------------------------------------------------------ infeasible parameters
# Counts that need more items on (at levels >= 1) than there are finite logits cannot be
# realised. logp keeps their prior mass as lost; draws condition on the feasible counts; when no
# count is feasible, logp and both draw paths refuse the parameters (as PermutationExpFamily
# refuses logits that admit no permutation).


@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_nchoosek_draws_condition_on_feasible_counts(mode):
    theta = np.array([-np.inf, 0.3, -np.inf, -0.5, 1.0])  # 3 finite logits
    pk = np.array([0.1, 0.2, 0.1, 0.3, 0.2, 0.1])  # 0.3 of the mass on counts 4 and 5
    rv = NChooseK.dist(theta, pk)
    for seed in range(10):  # the old draw failed for most seeds
        assert pm.draw(rv, random_seed=seed, mode=mode).sum() <= 3
    draws = pm.draw(rv, draws=20000, random_seed=5, mode=mode)
    Y = S.binary_vectors(5)
    probs = np.exp(pm.logp(rv, Y).eval(mode=FAST))
    assert probs.sum() == pytest.approx(0.7, abs=1e-12)  # logp: the infeasible mass is lost
    assert chi_square_pvalue(draws, Y, probs / probs.sum()) > 1e-3


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


NO_VALUE = [
    ("ConditionalBernoulli", lambda: ConditionalBernoulli.dist([-np.inf, -np.inf, 0, 0], 3),
     [0, 1, 1, 1], "k is larger than the number of finite logits"),
    ("NChooseK", lambda: NChooseK.dist([-np.inf, -np.inf, 0, 0], [0, 0, 0, 0.5, 0.5]),
     [0, 1, 1, 1], "count_probs puts no mass on a feasible count"),
    ("OrdinalNChooseK counts", lambda: OrdinalNChooseK.dist([-np.inf, -np.inf, -np.inf, 0],
                                                            counts=[2, 2]),
     [0, 0, 1, 1], "need more items at levels >= 1 than there are finite logits"),
    ("OrdinalNChooseK count_probs",
     lambda: OrdinalNChooseK.dist([-np.inf, -np.inf, 0, 0], count_probs=[[0.5, 0.5, 0, 0, 0],
                                                                         [0, 0, 0, 1.0, 0]]),
     [0, 0, 1, 1], "need more items at levels >= 1 than there are finite logits"),
]


@pytest.mark.parametrize("case", NO_VALUE, ids=[c[0] for c in NO_VALUE])
@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_parameters_admitting_no_value_are_refused_by_logp_and_draws(case, mode):
    _, make, value, msg = case
    rv = make()
    with pytest.raises(ParameterValueError, match=msg):
        pytensor.function([], pm.logp(rv, np.array(value)), mode=mode)()
    with pytest.raises(ValueError, match="finite logits"):
        pm.draw(rv, random_seed=1, mode=mode)


def test_parameters_admitting_no_value_give_minus_inf_in_a_model(fast_mode):
    """In a model (compile_logp) the parameter check becomes -inf, as for every check."""
    with pm.Model() as m:
        x = pm.Normal("x")
        ConditionalBernoulli("y", logits=pt.stack([x, -np.inf, -np.inf, 0.0]), k=3,
                             observed=[1, 0, 1, 1])
    assert m.compile_logp()({"x": 0.0}) == -np.inf


def test_values_of_probability_zero_stay_minus_inf(fast_mode):
    """Feasible parameters: a value of probability 0 has logp -inf, not a parameter error."""
    th = np.array([0.5, -np.inf, 1.0, 0.0])
    assert pm.logp(ConditionalBernoulli.dist(th, 2), [1, 1, 0, 0]).eval() == -np.inf
    nk = NChooseK.dist(th, [0, 0, 0.5, 0, 0.5])  # count 4 infeasible, count 2 feasible
    assert pm.logp(nk, [1, 1, 1, 1]).eval() == -np.inf  # needs the -inf item
    assert pm.logp(nk, [1, 0, 0, 0]).eval() == -np.inf  # count 1 has no mass
    assert np.isfinite(pm.logp(nk, [1, 0, 1, 0]).eval())
    on = OrdinalNChooseK.dist(th, counts=[2, 1, 1])
    assert pm.logp(on, [0, 1, 2, 0]).eval() == -np.inf  # the -inf item gets label 1
    assert np.isfinite(pm.logp(on, [0, 0, 2, 1]).eval())


# ----------------------------------------------------------------------------- PyMC workflow


@pytest.mark.slow
def test_model_logp_and_gradient_compile_natively_in_numba():
    # Default (numba) backend: logp + dlogp of all three distributions compile without the
    # object-mode fallback (it would emit a UserWarning, an error under filterwarnings=error)
    # and agree with the Python VM. ~60 s with a cold numba cache (4 s warm), hence slow.
    rng = np.random.default_rng(0)
    D = 5
    with pm.Model() as model:
        th = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        cp = pm.Dirichlet("cp", a=np.ones(D + 1))
        cpo = pm.Dirichlet("cpo", a=np.ones((3, D + 1)), shape=(3, D + 1))
        ConditionalBernoulli("a", th, 2, observed=np.array([[1, 0, 1, 0, 0], [0, 0, 0, 1, 1]]))
        NChooseK("b", th, cp, observed=np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0]]))
        OrdinalNChooseK("c", th, count_probs=cpo, observed=np.array([[2, 0, 1, 1, 0]]))
        OrdinalNChooseK("d", th, n_levels=3, observed=np.array([[0, 2, 1, 1, 0]]))
    ip = model.initial_point()
    ip = {k: v + 0.1 * rng.normal(size=v.shape) for k, v in ip.items()}
    outs = [model.logp(), model.dlogp()]
    f_numba = model.compile_fn(outs, mode="NUMBA")
    f_py = model.compile_fn(outs, mode=FAST)
    lp_n, g_n = f_numba(ip)
    lp_p, g_p = f_py(ip)
    assert np.isfinite(lp_n)
    np.testing.assert_allclose(lp_n, lp_p, rtol=1e-12)
    np.testing.assert_allclose(g_n, g_p, rtol=1e-10, atol=1e-12)


def _simulated_nck(seed=0, N=200, D=6):
    theta = np.linspace(-1, 1, D)
    pk = np.array([0.05, 0.15, 0.5, 0.2, 0.1, 0.0, 0.0])
    Y = pm.draw(NChooseK.dist(theta, pk, size=(N,)), random_seed=seed)
    return theta, pk, Y


def test_find_map_and_short_sampling_smoke(fast_mode):
    theta, pk, Y = _simulated_nck(N=100)
    D = theta.size
    with pm.Model(coords={"obs": range(len(Y)), "item": range(D), "count": range(D + 1)}):
        th = pm.ZeroSumNormal("theta", sigma=2.0, dims="item")
        cp = pm.Dirichlet("count_probs", a=np.ones(D + 1), dims="count")
        NChooseK("y", logits=th, count_probs=cp, observed=Y, dims=("obs", "item"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
        est = fit.posterior["theta"].values.reshape(-1)
        assert np.max(np.abs(est - (theta - theta.mean()))) < 0.6
        idata = pm.sample(
            draws=60, tune=60, chains=1, random_seed=1, progressbar=False, nuts_sampler="pymc"
        )
        idata_slice = pm.sample(
            draws=20, tune=10, chains=1, random_seed=1, progressbar=False, step=pm.Slice()
        )
        pp = pm.sample_posterior_predictive(idata, random_seed=1, progressbar=False)
        prior = pm.sample_prior_predictive(draws=20, random_seed=1)
    assert prior.prior_predictive["y"].shape == (1, 20, len(Y), D)
    assert idata.posterior["theta"].shape == (1, 60, D)
    assert idata_slice.posterior["count_probs"].shape == (1, 20, D + 1)
    ypp = pp.posterior_predictive["y"].values
    assert ypp.shape == (1, 60, len(Y), D) and set(np.unique(ypp)) <= {0, 1}


def test_find_map_with_laplace_covariance(fast_mode):
    # compute_hessian=True needs the second derivative (pullback of the marginals)
    Y = pm.draw(ConditionalBernoulli.dist(np.linspace(-1, 1, 5), 2, size=(50,)), random_seed=1)
    with pm.Model():
        th = pm.Normal("theta", 0, 2, shape=5)
        ConditionalBernoulli("y", th, 2, observed=Y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            fit = pm.find_MAP(
                progressbar=False, return_inferencedata=True, jitter=False, compute_hessian=True
            )
    cov = fit["fit"]["covariance_matrix"].values
    assert cov.shape == (5, 5) and np.all(np.linalg.eigvalsh(cov) > 0)


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


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_nuts_recovers_count_distribution():
    # Acceptance: a Dirichlet count prior recovers a known count distribution by NUTS
    # (default sampler = nutpie), r_hat <= 1.01 and no divergences. N = 1000 rows, D = 6.
    import arviz as az

    theta, pk, Y = _simulated_nck(seed=3, N=1000)
    D = theta.size
    with pm.Model():
        th = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        cp = pm.Dirichlet("count_probs", a=np.ones(D + 1))
        NChooseK("y", logits=th, count_probs=cp, observed=Y)
        idata = pm.sample(draws=1000, tune=1000, chains=4, random_seed=3, progressbar=False)
    rhat = az.rhat(idata, var_names=["count_probs", "theta"])
    assert float(rhat["count_probs"].max()) <= 1.01 and float(rhat["theta"].max()) <= 1.01
    assert int(idata.sample_stats["diverging"].sum()) == 0
    post = idata.posterior["count_probs"].values.reshape(-1, D + 1).mean(0)
    freq = np.bincount(Y.sum(1), minlength=D + 1) / len(Y)
    # posterior mean within 0.03 of the empirical count frequencies and 0.05 of the truth
    np.testing.assert_allclose(post, freq, atol=0.03)
    np.testing.assert_allclose(post, pk, atol=0.05)
