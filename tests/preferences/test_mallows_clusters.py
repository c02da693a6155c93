"""Clusters of assessors (pm_perm.preferences.mallows_clusters): the model's per-assessor
log-likelihood and posterior predictive, memberships against enumeration, relabelling, the
find_MAP guard, bad input."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy.special import logsumexp

from pm_perm.ops.latent import LatentPermutationWarning
from pm_perm.preferences.mallows_clusters import (
    cluster_initvals,
    cluster_memberships,
    mallows_mixture_model,
    relabel_clusters,
)
from pm_perm.reference.mallows import mallows_logp_enum

N_ITEMS = 4
RANKINGS = np.array([[0, 1, 2, 3], [0, 1, 3, 2], [1, 0, 2, 3], [3, 2, 1, 0], [3, 2, 0, 1],
                     [2, 3, 1, 0], [0, 2, 1, 3]])
RHO = np.array([[[0, 1, 2, 3], [3, 2, 1, 0]], [[1, 0, 2, 3], [3, 2, 0, 1]],
                [[0, 1, 2, 3], [2, 3, 1, 0]]])  # 3 draws x 2 clusters
ALPHA = np.array([[2.0, 4.0], [3.0, 1.5], [5.0, 0.5]])
W = np.array([[0.6, 0.4], [0.3, 0.7], [0.5, 0.5]])


def _posterior(rho, alpha, w=None):
    post = {"rho": rho[None], "alpha": alpha[None]}
    if w is not None:
        post["w"] = w[None]
    dims = {"rho": ["cluster", "item"], "alpha": ["cluster"], "w": ["cluster"]}
    return az.from_dict({"posterior": post}, dims=dims)


def _memberships_enum(distance):
    """Mean over the draws of ``w_k p_k(R) / p(R)``, each normaliser by enumeration."""
    out = np.zeros((len(RANKINGS), 2))
    for rho, alpha, w in zip(RHO, ALPHA, W, strict=True):
        joint = np.array([[np.log(w[k]) + mallows_logp_enum(distance, R, rho[k], alpha[k])
                           for k in range(2)] for R in RANKINGS])
        out += np.exp(joint - logsumexp(joint, axis=1, keepdims=True))
    return out / len(RHO)


@pytest.mark.parametrize("distance", ["footrule", "kendall", "cayley"])
def test_memberships_match_enumeration(distance):
    got = cluster_memberships(_posterior(RHO, ALPHA, W), RANKINGS, distance=distance)
    np.testing.assert_allclose(got, _memberships_enum(distance), rtol=1e-10)
    np.testing.assert_allclose(got.sum(axis=1), 1.0)
    # one cluster (no w): everyone in it
    one = cluster_memberships(_posterior(RHO[:, :1], ALPHA[:, :1]), RANKINGS)
    np.testing.assert_array_equal(one, np.ones((len(RANKINGS), 1)))


def test_the_model_has_one_log_likelihood_term_per_assessor_and_predictive_draws():
    """``pm.compute_log_likelihood`` of the mixture's observed ``R``: one term per assessor,
    equal to the log of the enumerated mixture probability; az.loo runs on it; the posterior
    predictive draws one complete ranking per assessor."""
    model = mallows_mixture_model(RANKINGS, 2)
    idata = _posterior(RHO, ALPHA, W)
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    ll = np.asarray(idata["log_likelihood"]["R"])
    assert ll.shape == (1, 3, len(RANKINGS))
    for s in range(3):
        expected = [np.logaddexp(*[np.log(W[s, k]) + mallows_logp_enum("footrule", R, RHO[s, k],
                                                                         ALPHA[s, k])
                                   for k in range(2)]) for R in RANKINGS]
        np.testing.assert_allclose(ll[0, s], expected, rtol=1e-10)
    rng = np.random.default_rng(2)
    tiled = _posterior(np.tile(RHO, (20, 1, 1)), rng.uniform(0.5, 5.0, (60, 2)),
                       rng.dirichlet([5.0, 5.0], 60))
    pm.compute_log_likelihood(tiled, model=model, progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few distinct draws: PSIS may warn about its Pareto k
        loo = az.loo(tiled, pointwise=True)
    assert np.asarray(loo.pareto_k).shape == (len(RANKINGS),) and np.isfinite(float(loo.elpd))
    pp = pm.sample_posterior_predictive(idata, model=model, progressbar=False, random_seed=1,
                                        return_inferencedata=False)
    draws = np.asarray(pp["R"])
    assert draws.shape == (1, 3, len(RANKINGS), N_ITEMS)
    assert (np.sort(draws, axis=-1) == np.arange(N_ITEMS)).all()


def test_one_cluster_is_the_plain_mallows_model_under_the_same_names():
    model = mallows_mixture_model(RANKINGS, 1, distance="kendall")
    assert sorted(v.name for v in model.free_RVs) == ["alpha", "rho"]
    point = {"rho": np.array([[0, 1, 2, 3]]), "alpha_log__": np.log([2.0])}
    lp = model.compile_logp(vars=[model["R"]], sum=False)(point)[0]
    expected = [mallows_logp_enum("kendall", R, np.arange(4), 2.0) for R in RANKINGS]
    np.testing.assert_allclose(lp, expected, rtol=1e-10)


def test_relabel_clusters_gives_every_draw_one_canonical_labelling():
    """Chains with the two clusters in opposite labels (and one draw switched inside a chain):
    after relabelling, each label holds one cluster in every draw, with its alpha and w, and
    the labels are in the canonical order (CP consensus orders, lexicographically)."""
    a, b = np.array([3, 2, 1, 0]), np.array([0, 1, 3, 2])  # orders: b's starts with item 0
    rng = np.random.default_rng(0)
    C, D = 3, 40
    rho = np.empty((C, D, 2, N_ITEMS), dtype=np.int64)
    alpha = np.empty((C, D, 2))
    w = np.empty((C, D, 2))
    for c in range(C):
        for d in range(D):
            swap = (c == 1) != (c == 2 and d == 7)
            pair = [(a, 4.0 + rng.normal(0, 0.1), 0.3), (b, 1.0 + rng.normal(0, 0.1), 0.7)]
            if swap:
                pair = pair[::-1]
            for k, (r, al, wk) in enumerate(pair):
                rho[c, d, k], alpha[c, d, k], w[c, d, k] = r, al, wk
    rho[0, 5, 1] = [0, 1, 2, 3]  # a draw of b's cluster one swap away
    idata = az.from_dict({"posterior": {"rho": rho, "alpha": alpha, "w": w}},
                         dims={"rho": ["cluster", "item"], "alpha": ["cluster"],
                               "w": ["cluster"]})
    relabel_clusters(idata)
    post = idata.posterior
    assert (post["rho"].values[:, :, 0] != b).any(axis=-1).sum() == 1  # the perturbed draw
    assert (post["rho"].values[:, :, 1] == a).all()
    assert (post["alpha"].values[:, :, 1] > 3).all() and (post["alpha"].values[:, :, 0] < 2).all()
    np.testing.assert_allclose(post["w"].values[:, :, 0], 0.7)


@pytest.mark.filterwarnings("ignore:The optimizer did not converge")  # 2 iterations suffice
def test_find_map_on_the_mixture_warns_and_names_pm_sample():
    """The consensus rankings are discrete: pm.find_MAP would return them at their start
    point; the latent-permutation guard warns, naming pm.sample."""
    model = mallows_mixture_model(RANKINGS, 2)
    with model, pytest.warns(LatentPermutationWarning, match=r"pm\.sample\(\)"):
        pm.find_MAP(progressbar=False, maxiter=2, jitter=False,
                    return_inferencedata=True)


def test_cluster_initvals_are_distinct_permutations_per_chain():
    init = cluster_initvals(3, 4, chains=4, random_seed=1)
    assert len(init) == 4
    for point in init:
        rho = point["rho"]
        assert rho.shape == (3, 4) and (np.sort(rho, axis=1) == np.arange(4)).all()
        assert len({tuple(r) for r in rho}) == 3
    assert len(cluster_initvals(3, 1, chains=1)[0]["rho"]) == 3  # 1 item: repeats allowed


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.array([[0, 1, 1]]), 2), {}, r"row 0 = \[0, 1, 1\] is not a complete ranking"),
    ((np.array([[0, 1, -1]]), 2), {}, "top-k or tied rows are not supported"),
    ((np.arange(3), 2), {}, r"shape \(assessors, items\)"),
    ((RANKINGS, 0), {}, "n_clusters must be an integer >= 1"),
    ((RANKINGS, 2), {"distance": "euclid"}, "distance"),
    ((RANKINGS, 2), {"alpha_rate": 0.0}, "alpha_rate must be a finite number > 0"),
    ((RANKINGS, 2), {"concentration": -1}, "concentration must be a finite number > 0"),
    ((RANKINGS, 2), {"item_names": ["a"]}, "item_names has 1 names for 4 items"),
])
def test_bad_input_is_named(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mallows_mixture_model(*args, **kwargs)


def test_helpers_refuse_a_posterior_without_the_variables():
    idata = _posterior(RHO, ALPHA, W)
    with pytest.raises(ValueError, match="no variable 'consensus'"):
        relabel_clusters(idata, rho="consensus")
    with pytest.raises(ValueError, match="no variable 'a'"):
        cluster_memberships(idata, RANKINGS, alpha="a")
    with pytest.raises(ValueError, match="rankings have 3 items, the posterior's rho 4"):
        cluster_memberships(idata, np.tile(np.arange(3), (2, 1)))
