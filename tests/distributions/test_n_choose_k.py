"""Tests of NChooseK against enumeration."""

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

from pm_perm.distributions.n_choose_k import NChooseK, nchoosek_marginals
from pm_perm.reference import subsets as S
from pm_perm.testing import chi_square_pvalue
from tests.distributions._count_labels import FAST


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
