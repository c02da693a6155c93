"""numpyro, blackjax and nutpie's JAX backend on pm_perm models, against the default sampler.

Each sampler must give r_hat <= 1.01, no divergences, and posterior means within Monte Carlo
error of the default sampler's (nutpie on the numba backend) on the same model and data:
``|mean_a - mean_b| <= 5 sqrt(mcse_a^2 + mcse_b^2)`` for every scalar; with ~10-20 scalars per
model and independent chains, a false failure needs a 5-sigma MC deviation (p ~ 6e-7 each, so
below 1e-5 per model), and the seeds are fixed. r_hat <= 1.01 over every scalar is the
criterion most exposed to chance: with 4 x 1,000 draws the rank-normalised split r_hat of a
well-mixed chain has a spread of a few 1e-3 (4 x 500 draws gave 1.0111 once on the NChooseK
model, with numpyro, so the runs are 4 x (1,000 tune + 1,000 draws)). The models: the task
models and every pm_perm distribution (PartialRanking and PlackettLuce on top-k ballots from
pm_perm.preferences.synthetic included), each on small generated data. All are
@pytest.mark.slow (each compiles a JAX model and samples with two samplers: a minute or more
per case on a shared 2-core machine). ``benchmarks/bench_jax_samplers.py`` prints the same
comparison as a table.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests._jax import require_jax

jax = require_jax()
pytest.importorskip("numpyro", reason="numpyro is not installed: pip install pm-perm[jax]")

import arviz as az  # noqa: E402
import pymc as pm  # noqa: E402

import pm_perm  # noqa: E402

DRAWS, TUNE, CHAINS = 1000, 1000, 4


def sample(model, sampler, seed=1):
    with model, warnings.catch_warnings():
        # jax/numpyro progress and device-count notices are not errors of the model
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        if sampler == "default":
            return pm.sample(DRAWS, tune=TUNE, chains=CHAINS, random_seed=seed, progressbar=False)
        if sampler == "nutpie-jax":
            import nutpie

            compiled = nutpie.compile_pymc_model(model, backend="jax")
            return nutpie.sample(compiled, draws=DRAWS, tune=TUNE, chains=CHAINS, seed=seed,
                                 progress_bar=False)
        return pm.sample(DRAWS, tune=TUNE, chains=CHAINS, random_seed=seed, progressbar=False,
                         nuts_sampler=sampler, nuts={"chain_method": "vectorized"})


def _free_names(model):
    return [v.name for v in model.free_RVs]


def compare(model, idata, ref):
    """``(max r_hat, divergences, max |mean - ref mean| / MC se)`` over the free variables,
    with the MC standard error of the difference ``sqrt(mcse_a^2 + mcse_b^2)``."""
    names = _free_names(model)
    rhat = az.rhat(idata, var_names=names)
    mcse_a, mcse_b = az.mcse(idata, var_names=names), az.mcse(ref, var_names=names)
    max_rhat, max_z = 0.0, 0.0
    for name in names:
        a = idata.posterior[name].values.reshape(-1, *idata.posterior[name].shape[2:])
        b = ref.posterior[name].values.reshape(-1, *ref.posterior[name].shape[2:])
        se = np.sqrt(mcse_a[name].values ** 2 + mcse_b[name].values ** 2)
        max_rhat = max(max_rhat, float(rhat[name].max()))
        max_z = max(max_z, float(np.max(np.abs(a.mean(0) - b.mean(0)) / se)))
    return max_rhat, int(idata.sample_stats["diverging"].values.sum()), max_z


def _check_against_default(model, idata, ref):
    max_rhat, div, max_z = compare(model, idata, ref)
    assert max_rhat <= 1.01, f"max r_hat {max_rhat}"
    assert div == 0, f"{div} divergences"
    assert max_z <= 5, f"max |mean difference| / MC se = {max_z} > 5"


# ----------------------------------------------------------------------------- models


def cb_model():
    rng = np.random.default_rng(3)
    D, N = 5, 40
    y = pm.draw(pm_perm.ConditionalBernoulli.dist(logits=np.array([1.5, 0.5, 0, -0.5, -1.5]),
                                                  k=2, size=N), random_seed=rng)
    with pm.Model() as m:
        theta = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        pm_perm.ConditionalBernoulli("y", logits=theta, k=2, observed=y)
    return m


def perm_model(method="exact"):
    rng = np.random.default_rng(4)
    N, M, d = 30, 4, 2
    x = rng.normal(size=(N, M, M, d))
    x[:, np.arange(M), np.arange(M), 0] += 1.5
    true = np.array([1.0, -0.5])
    y = pm.draw(pm_perm.PermutationExpFamily.dist(logits=x @ true), random_seed=rng)
    with pm.Model() as m:
        theta = pm.Normal("theta", 0.0, 1.0, shape=d)
        pm_perm.PermutationExpFamily("y", logits=pm_perm.edge_logits(x, theta), method=method,
                                     observed=y)
    return m


def nchoosek_model():
    rng = np.random.default_rng(5)
    D, N = 5, 60
    pk = np.array([0.05, 0.15, 0.4, 0.25, 0.1, 0.05])
    y = pm.draw(pm_perm.NChooseK.dist(logits=np.linspace(1, -1, D), count_probs=pk, size=N),
                random_seed=rng)
    with pm.Model() as m:
        p = pm.Dirichlet("pk", a=np.ones(D + 1))
        theta = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        pm_perm.NChooseK("y", logits=theta, count_probs=p, observed=y)
    return m


def ordinal_model():
    rng = np.random.default_rng(6)
    D, N = 6, 40
    y = pm.draw(pm_perm.OrdinalNChooseK.dist(logits=np.linspace(1.5, -1.5, D), counts=[3, 2, 1],
                                             size=N), random_seed=rng)
    with pm.Model() as m:
        theta = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        pm_perm.OrdinalNChooseK("y", logits=theta, counts=[3, 2, 1], observed=y)
    return m


def _split():
    """A small synthetic LETOR-like split: 8 queries x 6 documents, 3 features, labels 0..2."""
    from pm_perm.learning_to_rank.data import RankingSplit

    rng = np.random.default_rng(7)
    nq, nd, f = 8, 6, 3
    X = rng.normal(size=(nq * nd, f))
    score = X @ np.array([1.0, -0.5, 0.3]) + rng.gumbel(size=nq * nd)
    y = np.zeros(nq * nd, dtype=np.int64)
    for q in range(nq):
        rows = slice(q * nd, (q + 1) * nd)
        y[rows] = np.searchsorted([2, 4], np.argsort(np.argsort(score[rows])), side="right")
    return RankingSplit(X, y, np.arange(0, nq * nd + 1, nd), np.arange(nq))


def matching_task_model():
    from pm_perm.matching.model import matching_model

    rng = np.random.default_rng(8)
    G, M, d = 20, 5, 3
    x = rng.normal(size=(G, M, M, d))
    x[:, np.arange(M), np.arange(M), 0] += 1.5
    y = pm.draw(pm_perm.PermutationExpFamily.dist(logits=x @ np.array([1.0, -0.3, 0.2])),
                random_seed=rng)
    return matching_model(x, y)


def rankmatch_task_model():
    from pm_perm.learning_to_rank.rankmatch import rankmatch_model, sample_subsets

    split = _split()
    return rankmatch_model(split.X, sample_subsets(split, 3, rng=np.random.default_rng(9)))


def ordinal_task_model():
    from pm_perm.learning_to_rank.ordinal import ordinal_model, pad_queries

    return ordinal_model(pad_queries(_split()))


def partial_ranking_model():
    """Top-k ballots of 4 items drawn from the full model (pm_perm.preferences.synthetic), kept as
    distinct orders with counts in ``pm.Data`` (as pm_perm.preferences.models does), observed
    through PartialRanking under a ZeroSumNormal item x position W."""
    from pm_perm.preferences.synthetic import simulate_rankings

    M = 4
    W_true = np.outer(np.linspace(1.0, -1.0, M), np.linspace(1.5, -1.5, M))
    data = simulate_rankings(150, logits=W_true, length_probs=[0, 0.3, 0.4, 0.3, 0], rng=10)
    with pm.Model() as m:
        orders = pm.Data("orders", data.orders)
        counts = pm.Data("counts", data.counts.astype(np.float64))
        W = pm.ZeroSumNormal("W", sigma=1.5, shape=(M, M), n_zerosum_axes=2)
        pm_perm.PartialRanking("y", logits=W, weights=counts, observed=orders)
    return m


def plackett_luce_model():
    """Top-k Plackett-Luce ballots of 5 items (pm_perm.preferences.synthetic), distinct orders with
    counts, under ZeroSumNormal utilities."""
    from pm_perm.preferences.synthetic import simulate_rankings

    data = simulate_rankings(150, utilities=np.linspace(1.0, -1.0, 5),
                             length_probs=[0, 0.2, 0.3, 0.3, 0.2, 0], rng=11)
    with pm.Model() as m:
        u = pm.ZeroSumNormal("u", sigma=2.0, shape=5)
        pm_perm.PlackettLuce("y", utilities=u, weights=data.counts, observed=data.orders)
    return m


FAST = {"conditional_bernoulli": cb_model, "permutation": perm_model}
SLOW = {
    "partial_ranking": partial_ranking_model,
    "plackett_luce": plackett_luce_model,
    "permutation_bethe": lambda: perm_model("bethe"),
    "nchoosek_dirichlet": nchoosek_model,
    "ordinal_nchoosek": ordinal_model,
    "task_matching": matching_task_model,
    "task_rankmatch": rankmatch_task_model,
    "task_ordinal_ranker": ordinal_task_model,
}
SAMPLERS = ["numpyro", "blackjax", "nutpie-jax"]


@pytest.fixture(scope="module")
def references():
    return {}


def _run(name, build, sampler, references):
    model = build()
    if name not in references:
        references[name] = sample(model, "default")
    _check_against_default(model, sample(model, sampler), references[name])


@pytest.mark.slow
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", list(FAST))
def test_small_models(name, sampler, references):
    _run(name, FAST[name], sampler, references)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", list(SLOW))
def test_all_distributions(name, sampler, references):
    _run(name, SLOW[name], sampler, references)
