"""pm_perm.testing.sbc: simulation-based calibration of a PyMC model.

Fast: the machinery on a conjugate Normal-Normal model whose exact posterior is the sampler (no
MCMC), so the ranks are uniform by construction, and a miscalibrated posterior is rejected.
Slow: reduced SBC of pm_perm's own likelihoods with nutpie (the full run, 200 replications of
five models, is ``benchmarks/sbc.py``; results in the docs).
"""

import matplotlib
import numpy as np
import pymc as pm
import pytest

from pm_perm.testing import SBCModel, plot_rank_histograms, run_sbc, sbc_models, uniformity_pvalue

matplotlib.use("Agg")

N_OBS = 10  # y_i ~ N(mu, 1), mu ~ N(0, 1): mu | y ~ N(sum y / (N + 1), 1 / (N + 1))


def _normal_build(y):
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        pm.Normal("y", mu[:, None], 1.0, observed=pm.Data("y_obs", y))
    return model


def _normal_spec(numpy_simulator=False):
    def simulate(mu, rng=None):
        if numpy_simulator:
            return rng.normal(mu[:, None], 1.0, size=(2, N_OBS))
        return pm.Normal.dist(mu[:, None], 1.0, shape=(2, N_OBS))

    return SBCModel(shapes={"mu": (2,)}, priors={"mu": lambda r: r.normal(size=2)},
                    build=_normal_build, simulate=simulate, numpy_simulator=numpy_simulator)


def _posterior(scale=1.0, shift=0.0):
    """An exact posterior sampler (scale = 1, shift = 0) or a miscalibrated one."""
    def sample(model, y, rng):
        assert model["mu"].type.shape == (2,)
        mean = y.sum(axis=1) / (N_OBS + 1) + shift
        return {"mu": rng.normal(mean, scale * (N_OBS + 1) ** -0.5, size=(400, 2))}
    return sample


@pytest.mark.parametrize("numpy_simulator", [False, True], ids=["pymc-simulator", "numpy"])
def test_exact_posterior_gives_uniform_ranks(numpy_simulator):
    """200 replications, ranks among 99 of 400 exact posterior draws, 10 bins per parameter
    entry; fails at p < 1e-3: false-failure rate 0.2 % per case (two entries), fixed seed."""
    ranks = run_sbc(_normal_spec(numpy_simulator), reps=200, sampler=_posterior(), seed=4)
    assert list(ranks) == ["mu[0]", "mu[1]"]
    for rk in ranks.values():
        assert len(rk) == 200 and min(rk) >= 0 and max(rk) <= 99
        assert uniformity_pvalue(rk)[0] > 1e-3


@pytest.mark.parametrize("scale, shift", [(0.6, 0.0), (1.0, 0.15)], ids=["narrow", "biased"])
def test_miscalibrated_posterior_is_rejected(scale, shift):
    """A posterior 40 % too narrow or shifted by half its sd: every entry's ranks fail the
    uniformity test at p < 1e-3 (the check has power; fixed seed)."""
    ranks = run_sbc(_normal_spec(), reps=200, sampler=_posterior(scale, shift), seed=4)
    for rk in ranks.values():
        assert uniformity_pvalue(rk)[0] < 1e-3


def test_replications_are_reproducible_and_progress_is_reported():
    calls = []
    a = run_sbc(_normal_spec(), reps=5, sampler=_posterior(), seed=2,
                progress=lambda done, total: calls.append((done, total)))
    b = run_sbc(_normal_spec(), reps=5, sampler=_posterior(), seed=2)
    assert a == b and calls == [(i, 5) for i in range(1, 6)]
    assert a != run_sbc(_normal_spec(), reps=5, sampler=_posterior(), seed=3)


def test_errors():
    with pytest.raises(ValueError, match="same parameters"):
        SBCModel(shapes={"mu": (2,)}, priors={"sigma": np.abs}, build=_normal_build,
                 simulate=None)
    with pytest.raises(ValueError, match="sampler must be"):
        run_sbc(_normal_spec(), reps=1, sampler="metropolis")
    with pytest.raises(ValueError, match="n_thin = 500"):
        run_sbc(_normal_spec(), reps=1, sampler=_posterior(), n_thin=500)


def test_uniformity_pvalue_and_histograms():
    p, counts = uniformity_pvalue(np.arange(100), n_thin=99, bins=5)
    assert p == pytest.approx(1.0) and counts == [20] * 5
    p, counts = uniformity_pvalue(np.zeros(100, int), n_thin=99, bins=5)
    assert p < 1e-30 and counts == [100, 0, 0, 0, 0]
    ranks = {"a[0]": list(range(100)), "b[0]": [0] * 100}
    fig = plot_rank_histograms(ranks, bins=5, title="t")
    assert [ax.get_title() for ax in fig.axes] == ["a[0]\np = 1.00", "b[0]\np = 0.00"]
    assert fig._suptitle.get_text() == "t"


# pm_perm's likelihoods with nutpie (slow). The models are those of benchmarks/sbc.py.


def _nutpie_sbc(make, reps, seed):
    rng = np.random.default_rng(seed)
    return run_sbc(make(rng), reps, draws=300, tune=300, sampler="nutpie", seed=seed, rng=rng)


@pytest.mark.slow
@pytest.mark.parametrize("make", [sbc_models.matching, sbc_models.ranking],
                         ids=["matching", "ranking"])
def test_reduced_sbc(make):
    """30 replications, 5 bins, p > 1e-3: a correct model fails with probability ~1e-3 per
    parameter (5 parameters in the two models: false-failure rate about 0.5 %)."""
    pytest.importorskip("nutpie")
    ranks = _nutpie_sbc(make, reps=30, seed=11)
    for param, rk in ranks.items():
        assert len(rk) == 30 and min(rk) >= 0 and max(rk) <= 99
        pval, _ = uniformity_pvalue(rk, bins=5)
        assert pval > 1e-3, (param, rk)


@pytest.mark.slow
def test_sbc_full_ranking_model_on_top_k_data():
    """200 replications of the full ranking model on top-k ballots (issue 18 acceptance).

    21 parameters, each tested at p > 1e-4 over 10 bins: a correct model fails with
    probability about 21 x 1e-4 = 0.2 %.
    """
    pytest.importorskip("nutpie")
    ranks = _nutpie_sbc(sbc_models.rankings_full, reps=200, seed=5)
    for param, rk in ranks.items():
        assert len(rk) == 200 and min(rk) >= 0 and max(rk) <= 99
        pval, _ = uniformity_pvalue(rk, bins=10)
        assert pval > 1e-4, (param, rk)


def test_pymc_sampler_path():
    """``sampler="pymc"``: pm.set_data and pm.sample (NUTS) per replication; ranks in range."""
    ranks = run_sbc(_normal_spec(), reps=2, n_thin=49, draws=50, tune=50, chains=1,
                    sampler="pymc", seed=1)
    assert all(len(rk) == 2 and 0 <= min(rk) and max(rk) <= 49 for rk in ranks.values())


def _discrete_spec():
    """k uniform on 0..3, five observations y ~ N(k, 1): an exact discrete posterior."""
    def build(y):
        with pm.Model() as model:
            k = pm.Categorical("k", p=np.full(4, 0.25))
            pm.Normal("y", k, 1.0, observed=pm.Data("y_obs", y))
        return model

    return SBCModel(shapes={"k": ()}, priors={"k": lambda r: r.integers(4)}, build=build,
                    simulate=lambda k, rng: rng.normal(k, 1.0, size=5), numpy_simulator=True)


def _discrete_posterior(model, y, rng):
    logw = -0.5 * ((y[None, :] - np.arange(4)[:, None]) ** 2).sum(axis=1)
    w = np.exp(logw - logw.max())
    return {"k": rng.choice(4, p=w / w.sum(), size=400)}


def test_discrete_parameter_ties_are_broken_at_random():
    """A discrete parameter ties with most of its draws: the randomised tie-breaking gives
    uniform ranks under its exact posterior (200 replications, 10 bins, fails at p < 1e-3:
    false-failure rate 0.1 %, fixed seed), where counting draws below alone piles up at 0."""
    ranks = run_sbc(_discrete_spec(), reps=200, sampler=_discrete_posterior, seed=3)["k[0]"]
    assert len(ranks) == 200 and min(ranks) >= 0 and max(ranks) <= 99
    assert uniformity_pvalue(ranks)[0] > 1e-3
    rng, below = np.random.default_rng(3), []  # counting the draws below alone: far from it
    for _ in range(200):
        k = rng.integers(4)
        draws = _discrete_posterior(None, rng.normal(k, 1.0, size=5), rng)["k"]
        below.append(int((draws[np.linspace(0, 399, 99).astype(int)] < k).sum()))
    assert uniformity_pvalue(below)[0] < 1e-10


def _exact_mallows_posterior(model, R, rng, size=400):
    """Draws from the exact marginal posteriors of alpha and of rho (all 720 consensus rankings;
    alpha on a grid, Gamma(2, rate 0.5) prior: mass beyond 40 is 4e-8)."""
    from pm_perm.reference.mallows_posterior import footrule_mallows_posterior

    grid = np.linspace(0.0, 40.0, 1001)
    post = footrule_mallows_posterior(R, grid, np.log(np.maximum(grid, 1e-300)) - 0.5 * grid)
    p_alpha = post.alpha_density / post.alpha_density.sum()
    alpha = grid[rng.choice(grid.size, p=p_alpha, size=size)] + rng.uniform(-0.02, 0.02, size)
    rho = post.perms[rng.choice(len(post.perms), p=post.prob / post.prob.sum(), size=size)]
    return {"alpha": np.abs(alpha), "rho": rho}


def test_mallows_latent_prior_and_simulator_agree_with_the_exact_posterior():
    """The latent-consensus Mallows SBC model's prior and Mallows draws against the EXACT
    posterior (no MCMC): 200 replications, 10 bins, each of the 7 entries (alpha, the six
    items' consensus ranks, ties broken at random) fails at p < 1e-3: false-failure rate about
    0.7 %, fixed seed."""
    ranks = run_sbc(sbc_models.mallows_latent(np.random.default_rng(0)), reps=200,
                    sampler=_exact_mallows_posterior, seed=2)
    for param, rk in ranks.items():
        assert len(rk) == 200 and min(rk) >= 0 and max(rk) <= 99
        assert uniformity_pvalue(rk)[0] > 1e-3, (param, uniformity_pvalue(rk))


def test_mallows_latent_model_runs_with_pm_sample():
    """The latent-consensus Mallows SBC model (benchmarks/sbc.py; 200 replications in the docs):
    two short replications through pm.sample's compound step; ranks of alpha and of each of the
    six items' consensus ranks, in range."""
    spec = sbc_models.mallows_latent(np.random.default_rng(0))
    assert dict(spec.shapes) == {"alpha": (), "rho": (6,)}
    assert sbc_models.SETTINGS["mallows_latent"]["sampler"] == "pymc"
    ranks = run_sbc(spec, reps=2, n_thin=49, draws=50, tune=50, chains=1, sampler="pymc",
                    seed=1)
    assert list(ranks) == ["alpha[0]"] + [f"rho[{i}]" for i in range(6)]
    assert all(len(rk) == 2 and 0 <= min(rk) and max(rk) <= 49 for rk in ranks.values())
