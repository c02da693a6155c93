"""The Plackett-Luce-anchored full model (issue 53, finding 8, variant V3): tau = 0 is
Plackett-Luce, the evidence chooses the deviation scale, bad input is refused by name."""

import warnings

import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pm_perm._modes import PYTHON_MODE
from pm_perm.kernels.pl_tilted import pl_tilted_loglik
from pm_perm.kernels.plackett_luce import plackett_luce_loglik
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.anchored import FAMILY, heldout_loglik, pl_anchored_model
from pm_perm.preferences.data import RankingData
from pm_perm.preferences.synthetic import simulate_rankings

M = 5
LENGTHS = [0, 0, 0.3, 0.3, 0, 0.4]  # top-2, top-3 and complete ballots


def test_at_tau_zero_the_fit_is_the_plackett_luce_fit():
    data = simulate_rankings(150, utilities=[1.5, 0.8, 0.0, -0.7, -1.6],
                             length_probs=LENGTHS, rng=0)
    point = rfit.fit_map(pl_anchored_model(data, tau=0.0))
    pl = rfit.fit_map(rmod.plackett_luce_model(data))
    np.testing.assert_allclose(point["D"], 0.0)
    np.testing.assert_allclose(point["u"], pl["u"], atol=2e-3)
    np.testing.assert_allclose(heldout_loglik(point, data.orders),
                               plackett_luce_loglik(pl["u"][0], data.orders), atol=2e-3)


# two type-II grids (62 s of wall time on empty compile caches at load 10; the rank-one
# tilt's test below covers the same rule): --runslow
@pytest.mark.slow
def test_evidence_keeps_plackett_luce_data_at_small_tau_and_finds_a_departure():
    taus = (0.0, 0.0625, 0.5, 2.0)
    pl_data = simulate_rankings(200, utilities=[1.5, 0.8, 0.0, -0.7, -1.6],
                                length_probs=LENGTHS, rng=1)
    plain = rfit.fit_map_type2(pl_anchored_model(pl_data), grid=taus, patience=None)
    # data of the permutation exponential family far from Plackett-Luce: logits of size 2
    W = 2.0 * np.random.default_rng(2).normal(size=(M, M))
    rich = rfit.fit_map_type2(pl_anchored_model(simulate_rankings(
        200, logits=W, length_probs=LENGTHS, rng=3)), grid=taus, patience=None)
    assert plain["_optimizer"]["tau"] <= 0.0625
    assert rich["_optimizer"]["tau"] >= 0.5
    assert set(rich["_optimizer"]["log_evidence"]) == set(taus)


def test_the_model_is_marked_and_refuses_bad_input():
    data = simulate_rankings(20, utilities=[1.0, 0.0, -1.0], rng=0)
    rm = pl_anchored_model(data, tau=0.5)
    assert rm.family == FAMILY and rm.components == 1
    with pytest.raises(ValueError, match="tau must be a finite number >= 0"):
        pl_anchored_model(data, tau=-1.0)
    with pytest.raises(ValueError, match="prior_sigma must be a positive finite number"):
        pl_anchored_model(data, prior_sigma=0.0)
    tied = RankingData.from_orders(np.array([[0, 1, 2], [0, 0, 2]]))
    with pytest.raises(ValueError, match=r"tied items before its last block.*full_model\(data\)"):
        pl_anchored_model(tied)
    with pytest.raises(ValueError, match="point has no 'D'; pass a fit of pl_anchored_model"):
        heldout_loglik({"u": np.zeros((1, 3))}, data.orders)


def _prior_as_posterior(rm, draws=4):
    """Prior draws of the free variables, put where PyMC reads posterior draws (no fit: the test
    is of what PyMC computes from the draws)."""
    names = [*(v.name for v in rm.model.free_RVs), "u", "D"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prior = pm.sample_prior_predictive(draws=draws, model=rm.model, random_seed=4,
                                           var_names=names,
                                           compile_kwargs={"mode": PYTHON_MODE})
    return xr.DataTree.from_dict({"posterior": prior["prior"].to_dataset()})


def test_ballots_are_observed_with_one_pointwise_row_per_ballot():
    """No Potential: pm.compute_log_likelihood has one row per BALLOT, equal to the kernel's
    log p(order) + log length_probs[k] of its order; the summed logp is counts times it."""
    data = simulate_rankings(12, utilities=[1.0, 0.4, -0.3, -1.1], length_probs=[0, 0, .4, 0, .6],
                             rng=5)
    assert (data.counts > 1).any()  # repeated orders: rows per ballot differ from per order
    rm = pl_anchored_model(data, tau=0.7)
    assert not rm.model.potentials
    post = _prior_as_posterior(rm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt = pm.compute_log_likelihood(post.copy(), model=rm.model, progressbar=False,
                                       compile_kwargs={"mode": PYTHON_MODE})
    ll = dt["log_likelihood"]["ballots"]
    n_ballots = int(data.counts.sum())
    assert ll.shape == (1, 4, n_ballots) and ll.dims[-1] == "ballot"
    p = post["posterior"]
    k = data.ranked_lengths()
    for s in range(4):
        u, D = p["u"].values[0, s, 0], p["D"].values[0, s, 0]
        assert np.abs(D).max() > 0.01  # tau > 0: a real tilt
        per_order = pl_tilted_loglik(u, D, data.orders) \
            + np.log(p["length_probs"].values[0, s][k])
        np.testing.assert_allclose(ll.values[0, s], np.repeat(per_order, data.counts),
                                   rtol=1e-10)


def test_posterior_predictive_draws_ballots_with_their_pattern():
    data = simulate_rankings(10, utilities=[1.0, 0.4, -0.3, -1.1],
                             length_probs=[0, 0, .4, 0, .6], rng=6)
    rm = pl_anchored_model(data, tau=0.7)
    pp = pm.sample_posterior_predictive(_prior_as_posterior(rm, 3), model=rm.model,
                                        progressbar=False, random_seed=7,
                                        compile_kwargs={"mode": PYTHON_MODE})
    y = pp["posterior_predictive"]["ballots"].values
    expanded = np.repeat(data.orders, data.counts, axis=0)
    assert y.shape == (1, 3, len(expanded), data.n_items)
    # each replicated ballot ranks as many items as its observed ballot (its pattern)
    np.testing.assert_array_equal(np.sort(y, axis=-1),
                                  np.broadcast_to(np.sort(expanded, axis=-1), y.shape))
    assert not (y == expanded).all()  # drawn, not copied


# --- the rank-one tilt D = tau (B a)(B b)^T (variant V4) -------------------------------------


def test_rank_one_tilt_at_tau_zero_is_the_plackett_luce_fit():
    data = simulate_rankings(150, utilities=[1.5, 0.8, 0.0, -0.7, -1.6],
                             length_probs=LENGTHS, rng=0)
    point = rfit.fit_map(pl_anchored_model(data, tau=0.0, deviations="rank-one"))
    pl = rfit.fit_map(rmod.plackett_luce_model(data))
    np.testing.assert_allclose(point["D"], 0.0)
    np.testing.assert_allclose(heldout_loglik(point, data.orders),
                               plackett_luce_loglik(pl["u"][0], data.orders), atol=2e-3)


def test_rank_one_tilt_pointwise_rows_match_brute_force_enumeration():
    """M = 4, every ballot (complete and top-k, repeated orders): each row of
    pm.compute_log_likelihood is log-sum over the consistent complete rankings of the
    enumerated tilted probability, plus log length_probs[k]; D is rank one and zero-sum."""
    from scipy.special import logsumexp

    from pm_perm.reference.permutations import all_permutations
    from pm_perm.reference.rankings import consistent_mask, pl_tilted_complete_logp

    data = simulate_rankings(15, utilities=[1.0, 0.4, -0.3, -1.1],
                             length_probs=[0, 0, .3, .3, .4], rng=8)
    assert (data.counts > 1).any()
    rm = pl_anchored_model(data, tau=0.9, deviations="rank-one")
    post = _prior_as_posterior(rm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt = pm.compute_log_likelihood(post.copy(), model=rm.model, progressbar=False,
                                       compile_kwargs={"mode": PYTHON_MODE})
    ll = dt["log_likelihood"]["ballots"].values
    assert ll.shape == (1, 4, int(data.counts.sum()))
    perms = all_permutations(4)
    p = post["posterior"]
    k = data.ranked_lengths()
    for s in range(4):
        u, D = p["u"].values[0, s, 0], p["D"].values[0, s, 0]
        assert np.linalg.matrix_rank(D, tol=1e-10) == 1
        np.testing.assert_allclose([D.sum(0), D.sum(1)], 0.0, atol=1e-12)
        full = pl_tilted_complete_logp(u, D, perms)
        enum = np.array([logsumexp(full[consistent_mask(y, perms)]) for y in data.orders])
        want = enum + np.log(p["length_probs"].values[0, s][k])
        np.testing.assert_allclose(ll[0, s], np.repeat(want, data.counts), rtol=1e-9)


def test_rank_one_tilt_evidence_keeps_plackett_luce_and_finds_a_rank_one_departure():
    """Type-II tau: small on Plackett-Luce data; on data with a strong rank-one tilt a large
    tau whose MAP is off the saddle a = b = 0 (the jittered refit of each tau > 0)."""
    taus = (0.0, 0.0625, 0.5, 2.0)
    u = np.array([1.5, 0.8, 0.0, -0.7, -1.6])
    plain = rfit.fit_map_type2(pl_anchored_model(
        simulate_rankings(200, utilities=u, length_probs=LENGTHS, rng=1),
        deviations="rank-one"), grid=taus, patience=None)
    assert plain["_optimizer"]["tau"] <= 0.0625
    # permutation exponential family logits u c^T + a b^T with a tilt far from PL
    a = np.array([2.0, -2.0, 1.0, -1.0, 0.0])
    b = np.array([-1.5, 1.5, 0.5, 0.0, -0.5])
    W = np.outer(u, np.arange(4, -1, -1.0)) + np.outer(a, b)
    rich = rfit.fit_map_type2(pl_anchored_model(
        simulate_rankings(200, logits=W, length_probs=LENGTHS, rng=3), deviations="rank-one"),
        grid=taus, patience=None)
    assert rich["_optimizer"]["tau"] >= 0.5
    assert np.abs(rich["D"]).max() > 0.5  # not the saddle D = 0
    assert set(rich["_optimizer"]["log_evidence"]) == set(taus)


def test_deviations_must_be_named():
    data = simulate_rankings(20, utilities=[1.0, 0.0, -1.0], rng=0)
    with pytest.raises(ValueError, match=r"deviations must be one of \('full', 'rank-one'\)"):
        pl_anchored_model(data, deviations="rank_one")


@pytest.mark.parametrize("deviations", ["full", "rank-one"])
def test_the_hessians_gradient_is_the_engines_without_work_per_order(deviations):
    """log_p_gradient (the type-II fit's Laplace differences: priors and the Jacobian of (u, D)
    from a small graph, the likelihood from the kernel on the orders' summed weights) is the
    MAP engine's gradient of log p, at new counts too, and gives the same Hessian."""
    from pm_perm.preferences.anchored import log_p_gradient

    data = simulate_rankings(120, utilities=np.linspace(1, -1, M), length_probs=LENGTHS, rng=6)
    rm = pl_anchored_model(data, tau=0.4, deviations=deviations)
    engine = rfit._map_engine(rm, 10)
    x = engine.x + np.random.default_rng(2).normal(0, 0.3, engine.x.size)
    keep = rfit._order_model_coordinates(engine)
    for counts in (data.counts, data.counts * 3 + 1):
        rfit.set_counts(rm, counts)
        want = -engine.value_and_grad(x)[1] * engine.scale
        np.testing.assert_allclose(log_p_gradient(rm, engine)(x)[keep], want[keep],
                                   rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rfit._negative_hessian(engine, x, keep, False, rm=rm),
                               rfit._negative_hessian(engine, x, keep, False),
                               rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="needs a model of pl_anchored_model"):
        log_p_gradient(rmod.plackett_luce_model(data), engine)
