"""RankingMixture: per-row logp and memberships against enumeration, exact draws (chi-square),
one row per ballot with counts (pointwise log-likelihood, LOO, posterior predictive)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pymc as pm
import pytest
from scipy.special import logsumexp

import pm_perm
from pm_perm.distributions import RankingMixture, mixture_memberships
from pm_perm.kernels.patterns import coarsen_to_patterns
from pm_perm.reference.rankings import every_top_k_order, mixture_loglik_enum
from pm_perm.testing import chi_square_pvalue
from tests._jax import require_jax, shared_rng_copied

M = 4
U = np.array([[2.0, 1.0, 0.0, -1.0], [-1.5, 0.0, 0.5, 1.0]])
W = np.stack([np.outer(U[0], np.linspace(1, 0, M)), np.outer(U[1], np.linspace(1, 0, M))])
WEIGHTS = np.array([0.65, 0.35])
LENGTHS = np.array([0.0, 0.3, 0.3, 0.0, 0.4])
CELLS = every_top_k_order(M)
ORDERS = np.array([[0, 1, 2, 3], [3, 2, 1, 0], [0, -1, -1, -1], [1, 0, -1, -1], [0, 0, 2, 2],
                   [2, 0, 1, -1]])


def _components(family, length_probs=None):
    if family == "plackett-luce":
        return [pm_perm.PlackettLuce.dist(u, length_probs=length_probs) for u in U]
    return [pm_perm.PartialRanking.dist(w, length_probs=length_probs) for w in W]


def _enum(family, orders):
    return mixture_loglik_enum(family, U if family == "plackett-luce" else W, WEIGHTS, orders)


@pytest.mark.parametrize("family", ["plackett-luce", "full"])
def test_logp_and_memberships_match_enumeration(family):
    y = RankingMixture.dist(w=WEIGHTS, comp_dists=_components(family))
    ll, comps = _enum(family, ORDERS)
    np.testing.assert_allclose(pm.logp(y, ORDERS).eval(), ll, rtol=1e-10)
    brute = np.exp(np.log(WEIGHTS)[:, None] + comps - ll[None, :]).T  # (n, K)
    np.testing.assert_allclose(mixture_memberships(y, ORDERS).eval(), brute, rtol=1e-10)
    # with length_probs: the shared log length_probs[k] term is added
    lengths = np.array([0.05, 0.25, 0.2, 0.1, 0.4])
    y = RankingMixture.dist(w=WEIGHTS, comp_dists=_components(family, lengths))
    k = (ORDERS >= 0).sum(axis=1)
    np.testing.assert_allclose(pm.logp(y, ORDERS).eval(), ll + np.log(lengths[k]), rtol=1e-10)


@pytest.mark.parametrize("family, mode", [("plackett-luce", "NUMBA"), ("full", "NUMBA"),
                                          ("plackett-luce", "JAX")])
def test_draws_match_the_exact_mixture_probabilities(family, mode):
    """Component from w, then that component's exact top-k draw: chi-square against
    ``length_probs[k] * p_mix(order)`` by enumeration (level 1e-3)."""
    if mode == "JAX":
        require_jax()
        import pm_perm.backends.jax  # noqa: F401
    N = 20_000
    y = RankingMixture.dist(w=WEIGHTS, comp_dists=_components(family, LENGTHS), size=N)
    with shared_rng_copied():
        draws = np.asarray(pm.draw(y, random_seed=11, mode=mode))
    assert draws.shape == (N, M)
    ll, _ = _enum(family, CELLS)
    probs = LENGTHS[(CELLS >= 0).sum(axis=1)] * np.exp(ll)
    assert probs.sum() == pytest.approx(1.0)
    assert chi_square_pvalue(draws, CELLS, probs) > 1e-3


def test_pm_mixture_with_counts_on_the_components_is_a_different_likelihood():
    """Why RankingMixture: ``pm.Mixture`` of components given ``weights=counts`` puts the count
    inside the sum over components (not ``count * log p_mix``)."""
    counts = np.array([3, 1, 2, 1, 1, 2])
    ll, _ = _enum("plackett-luce", ORDERS)
    comps = [pm_perm.PlackettLuce.dist(u, weights=counts) for u in U]
    wrong = pm.logp(pm.Mixture.dist(w=WEIGHTS, comp_dists=comps), ORDERS).eval()
    assert np.abs(wrong - counts * ll).max() > 0.1


def _model(orders, counts, expanded=False):
    with pm.Model() as model:
        u = pm.Normal("u", 0.0, 1.0, shape=(2, M))
        w = pm.Dirichlet("w", np.ones(2))
        lp = pm.Dirichlet("lp", np.ones(M + 1))
        comps = [pm_perm.PlackettLuce.dist(u[k], length_probs=lp) for k in range(2)]
        if expanded:
            RankingMixture("ballots", w=w, comp_dists=comps,
                           observed=np.repeat(orders, counts, axis=0))
        else:
            RankingMixture("ballots", w=w, comp_dists=comps,
                           weights=pm.Data("counts", counts.astype(np.float64)),
                           observed=pm.Data("orders", orders))
    return model


def test_counts_give_one_row_per_ballot_loo_and_predictive():
    """With ``weights=counts``: the log-likelihood has one entry per ballot, ``az.loo`` equals
    the one of the hand-expanded data (elpd, p_loo, every Pareto k), the summed logp is the
    count-weighted one, and the posterior predictive draws one ballot per observed ballot."""
    import arviz as az

    rng = np.random.default_rng(3)
    orders = np.unique(np.vstack([CELLS[rng.choice(len(CELLS), 30)], ORDERS]), axis=0)
    counts = rng.integers(0, 6, size=len(orders))
    counts[:3] = [40, 1, 0]  # a heavy order, a single one, an absent one
    N = int(counts.sum())
    model, ref = _model(orders, counts), _model(orders, counts, expanded=True)
    point = {k: v + rng.normal(scale=0.3, size=np.shape(v))
             for k, v in model.initial_point().items()}
    np.testing.assert_allclose(model.compile_logp()(point), ref.compile_logp()(point), rtol=1e-12)
    np.testing.assert_allclose(model.compile_dlogp()(point), ref.compile_dlogp()(point),
                               rtol=1e-10, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prior = pm.sample_prior_predictive(draws=200, model=model, random_seed=4)
    posterior = prior["prior"]
    idatas = []
    for m in (model, ref):
        idata = az.from_dict({"posterior": {k: posterior[k].values for k in ("u", "w", "lp")}})
        pm.compute_log_likelihood(idata, model=m, progressbar=False)
        idatas.append(idata)
    ll, ll_ref = (np.asarray(i["log_likelihood"]["ballots"]) for i in idatas)
    assert ll.shape == (1, 200, N)
    np.testing.assert_allclose(ll, ll_ref, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto k of prior draws
        loo, loo_ref = (az.loo(i, pointwise=True) for i in idatas)
    assert float(loo.elpd) == pytest.approx(float(loo_ref.elpd), rel=1e-10)
    assert float(loo.p) == pytest.approx(float(loo_ref.p), rel=1e-10)
    np.testing.assert_allclose(np.asarray(loo.pareto_k), np.asarray(loo_ref.pareto_k))
    # the posterior predictive: one replicated ballot per observed ballot
    pp = pm.sample_posterior_predictive(idatas[0], model=model, progressbar=False,
                                        random_seed=5, return_inferencedata=False)
    assert np.asarray(pp["ballots"]).shape == (1, 200, N, M)
    # a refit on new counts (pm.set_data): the same compiled function, the new ballots
    f = model.compile_logp(sum=False)
    with model:
        pm.set_data({"counts": np.ones(len(orders))})
    assert f(point)[-1].shape == (len(orders),)


def test_memberships_of_a_model_variable_with_counts_are_per_ballot():
    counts = np.array([2, 0, 1, 3, 1, 1])
    with pm.Model():
        y = RankingMixture("y", w=WEIGHTS, comp_dists=_components("plackett-luce"),
                           weights=counts, observed=ORDERS)
    probs = mixture_memberships(y, np.repeat(ORDERS, counts, axis=0)).eval()
    _, comps = _enum("plackett-luce", ORDERS)
    ll = logsumexp(np.log(WEIGHTS)[:, None] + comps, axis=0)
    brute = np.exp(np.log(WEIGHTS)[:, None] + comps - ll).T
    np.testing.assert_allclose(probs, np.repeat(brute, counts, axis=0), rtol=1e-10)


@pytest.mark.parametrize("kwargs, match", [
    ({"comp_dists": [pm_perm.PlackettLuce.dist(U[0])]}, "at least 2 components"),
    ({"comp_dists": [pm.Normal.dist(), pm.Normal.dist()]},
         "PlackettLuce.dist, PartialRanking.dist or TopKRanking.dist"),
    ({"comp_dists": [pm_perm.PlackettLuce.dist(u, weights=2) for u in U]},
     "must not have weights"),
    ({"comp_dists": [pm_perm.PlackettLuce.dist(u) for u in U], "weights": [1, 2]},
     "observed model variable"),
])
def test_refuses_bad_components_and_dist_weights(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RankingMixture.dist(w=WEIGHTS, **kwargs)


def test_refuses_bad_counts():
    comps = _components("plackett-luce")
    with pm.Model(), pytest.raises(ValueError, match="non-negative integers"):
        RankingMixture("y", w=WEIGHTS, comp_dists=comps, weights=[1, -1, 1, 1, 1, 1],
                       observed=ORDERS)
    with pm.Model(), pytest.raises(ValueError, match="needs observed"):
        RankingMixture("y", w=WEIGHTS, comp_dists=comps, weights=[1] * 6)


def _tied(rows):
    """Share of rows with a tie: two ranked items at one position."""
    rows = np.asarray(rows)
    ranked = np.sort(np.where(rows >= 0, rows, M + np.arange(M)), axis=-1)
    return np.mean(np.any(ranked[..., 1:] == ranked[..., :-1], axis=-1), axis=-1)


@pytest.mark.parametrize("family", ["plackett-luce", "full"])
def test_posterior_predictive_keeps_each_ballots_pattern(family):
    """Plain ``pm.sample_posterior_predictive`` of an observed mixture with counts: each
    replicated ballot has its observed ballot's pattern (length and tie blocks), so 100 % of
    the lengths and the tie share are the observed ones (exactly: the pattern is kept, no
    Monte Carlo error), while the orders are drawn. ``keep_pattern=False``: lengths from
    ``length_probs`` and no ties (what every draw was before)."""
    import xarray as xr

    rng = np.random.default_rng(7)
    orders = np.unique(np.vstack([CELLS[rng.choice(len(CELLS), 25)], ORDERS]), axis=0)
    counts = rng.integers(1, 4, size=len(orders))
    ballots = np.repeat(orders, counts, axis=0)
    assert 0 < _tied(ballots) < 1
    S = 40
    draws = xr.Dataset({"w": (("chain", "draw", "k"), rng.dirichlet([5.0, 5.0], (1, S))),
                        "lp": (("chain", "draw", "l"), rng.dirichlet(np.ones(M + 1), (1, S)))})
    out = {}
    for keep in (True, False):
        with pm.Model():
            w = pm.Dirichlet("w", np.ones(2))
            lp = pm.Dirichlet("lp", np.ones(M + 1))
            comps = [pm_perm.PlackettLuce.dist(u, length_probs=lp) for u in U] \
                if family == "plackett-luce" else \
                [pm_perm.PartialRanking.dist(x, length_probs=lp) for x in W]
            RankingMixture("ballots", w=w, comp_dists=comps, keep_pattern=keep,
                           weights=pm.Data("counts", counts.astype(np.float64)),
                           observed=pm.Data("orders", orders))
            pp = pm.sample_posterior_predictive(draws, random_seed=8, progressbar=False,
                                                return_inferencedata=False)
        out[keep] = np.asarray(pp["ballots"])[0]
        assert out[keep].shape == (S, len(ballots), M)
    y = out[True]
    lengths = (y >= 0).sum(-1)
    assert np.mean(lengths == (ballots >= 0).sum(-1)) == 1.0
    np.testing.assert_array_equal(_tied(y), np.full(S, _tied(ballots)))
    np.testing.assert_array_equal(np.sort(y, axis=-1),
                                  np.broadcast_to(np.sort(ballots, axis=-1), y.shape))
    assert np.mean(y[0] != y[1]) > 0.1  # drawn, not copied
    free = out[False]
    assert np.mean((free >= 0).sum(-1) == (ballots >= 0).sum(-1)) < 0.6
    assert _tied(free).max() == 0.0


@pytest.mark.parametrize("family", ["plackett-luce", "full"])
def test_pattern_draws_match_the_mixture_probabilities_of_the_pattern(family):
    """Draws with one ballot's pattern (a tie for first, then one more item: top-3) are the
    mixture's distribution over the orders of that pattern: chi-square against the mixture
    probabilities of the tied orders by enumeration (level 1e-3: one false failure in 1,000
    seeds; fixed seed)."""
    pattern = np.array([0, 0, 2, -1])
    perms = np.array(list(itertools.permutations(range(M))))
    cells = np.unique(coarsen_to_patterns(perms, np.broadcast_to(pattern, perms.shape)), axis=0)
    assert len(cells) == 12  # 4 * 3 / 2 tied pairs first, then 2 choices of the third
    ll, _ = _enum(family, cells)
    probs = np.exp(ll)
    assert probs.sum() == pytest.approx(1.0)  # every complete ranking coarsens to one cell
    N = 6000
    with pm.Model():
        y = RankingMixture("y", w=WEIGHTS, comp_dists=_components(family),
                           weights=[N], observed=pattern[None])
    draws = pm.draw(y, random_seed=12)
    assert draws.shape == (N, M)
    assert chi_square_pvalue(draws, cells, probs) > 1e-3


def test_keep_pattern_refuses_bad_values_and_names_a_bad_observed_row():
    comps = _components("plackett-luce")
    with pm.Model(), pytest.raises(ValueError, match="keep_pattern must be True or False"):
        RankingMixture("y", w=WEIGHTS, comp_dists=comps, observed=ORDERS, keep_pattern=None)
    with pm.Model(), pytest.raises(ValueError, match=r"RankingMixture: observed\[1\]"):
        RankingMixture("y", w=WEIGHTS, comp_dists=comps, observed=[[0, 1, 2, 3], [0, 0, 0, 5]])


def test_counts_with_a_new_ballot_dim():
    """``dims=("ballot", "item")`` with counts: the new ballot dim takes its length from the
    counts (as for PlackettLuce), so the pointwise log-likelihood is labelled per ballot."""
    counts = np.array([2, 0, 1, 3, 1, 1])
    with pm.Model(coords={"item": list("abcd")}) as model:
        RankingMixture("y", w=WEIGHTS, comp_dists=_components("plackett-luce"),
                       weights=counts, observed=ORDERS, dims=("ballot", "item"))
    assert model.dim_lengths["ballot"].eval() == counts.sum()
    assert model.named_vars_to_dims["y"] == ("ballot", "item")
