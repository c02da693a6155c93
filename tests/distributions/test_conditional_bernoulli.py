"""Tests of ConditionalBernoulli against enumeration."""

import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError
from pymc.testing import assert_support_point_is_expected
from pytensor.gradient import verify_grad

from pm_perm.distributions.conditional_bernoulli import ConditionalBernoulli
from pm_perm.reference import subsets as S
from pm_perm.testing import chi_square_pvalue
from tests.distributions._count_labels import FAST


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
