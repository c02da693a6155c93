"""``fit_map_cv``: the type-II hyperparameter by K-fold cross-validation with the one-SE rule
(issue 53, finding 8, variant V5 of ``benchmarks/bench_small_data.py``)."""

import numpy as np
import pytest

from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.anchored import heldout_loglik, pl_anchored_model
from pm_perm.preferences.synthetic import simulate_rankings

U = np.array([1.5, 0.8, 0.0, -0.7, -1.6])
LENGTHS = [0, 0, 0.3, 0.3, 0, 0.4]  # top-2, top-3 and complete ballots


def _one_se_choice(opt):
    """The documented rule, from the returned scores: the smallest value within one SE of the
    best."""
    cv, se = opt["cv_loglik"], opt["cv_se"]
    best = max(cv, key=cv.get)
    return min(t for t in cv if cv[t] - cv[best] >= -se[t])


@pytest.mark.slow  # 40-145 s on the shared machine: three more models built and compiled
def test_cv_scores_are_the_refits_without_each_fold():
    """Each ballot's score is its log-likelihood under a model BUILT on the other folds' ballots
    and fitted from scratch (folds dealt in turn after a permutation by default_rng(seed));
    the model is left with all its ballots at the chosen tau."""
    data = simulate_rankings(18, utilities=U[:3], rng=5)
    rm = pl_anchored_model(data, deviations="rank-one")
    point = rfit.fit_map_cv(rm, grid=(0.0,), folds=3, seed=2)
    counts = data.counts
    order_of = np.random.default_rng(2).permutation(np.repeat(np.arange(counts.size), counts))
    fold_of = np.arange(order_of.size) % 3
    want = np.empty(order_of.size)
    for k in range(3):
        held = np.bincount(order_of[fold_of == k], minlength=counts.size)
        fit = rfit.fit_map(pl_anchored_model(data.with_counts(counts - held),
                                             deviations="rank-one"))
        want[fold_of == k] = heldout_loglik(fit, data.orders)[order_of[fold_of == k]]
    opt = point["_optimizer"]
    assert opt["folds"] == 3 and opt["tau"] == 0.0 and float(point["tau"]) == 0.0
    np.testing.assert_allclose(opt["cv_loglik"][0.0], want.mean(), atol=1e-4)
    np.testing.assert_array_equal(rm.model["counts"].get_value(), counts)
    np.testing.assert_allclose(point["D"], 0.0)


@pytest.mark.slow  # 110 s under load: 2 x 3 values x (2 + 3) fits
def test_cv_keeps_plackett_luce_data_at_tau_zero_and_finds_a_rank_one_departure():
    taus = (0.0, 0.5, 2.0)
    plain = rfit.fit_map_cv(pl_anchored_model(
        simulate_rankings(80, utilities=U, length_probs=LENGTHS, rng=1),
        deviations="rank-one"), grid=taus, folds=3, patience=None)
    assert plain["_optimizer"]["tau"] == _one_se_choice(plain["_optimizer"]) == 0.0
    np.testing.assert_allclose(plain["D"], 0.0)
    # permutation exponential family logits u c^T + a b^T with a tilt far from PL
    a = np.array([2.0, -2.0, 1.0, -1.0, 0.0])
    b = np.array([-1.5, 1.5, 0.5, 0.0, -0.5])
    W = np.outer(U, np.arange(4, -1, -1.0)) + np.outer(a, b)
    rich = rfit.fit_map_cv(pl_anchored_model(
        simulate_rankings(80, logits=W, length_probs=LENGTHS, rng=3), deviations="rank-one"),
        grid=taus, folds=3, patience=None)
    opt = rich["_optimizer"]
    assert opt["tau"] == _one_se_choice(opt) >= 0.5
    assert opt["cv_loglik"][opt["tau"]] > opt["cv_loglik"][0.0] + opt["cv_se"][0.0]
    assert np.abs(rich["D"]).max() > 0.5  # not the saddle D = 0
    assert set(opt["cv_loglik"]) == set(taus)


def test_patience_stops_the_scan_when_no_value_is_better_beyond_one_se():
    """Fits that stay at D = 0 differ from Plackett-Luce by rounding only: not better."""
    data = simulate_rankings(18, utilities=U[:3], rng=4)
    point = rfit.fit_map_cv(pl_anchored_model(data, deviations="rank-one"),
                            grid=(0.0, 0.0625, 0.125, 0.25), folds=2, patience=1)
    assert len(point["_optimizer"]["cv_loglik"]) < 4


@pytest.mark.parametrize("folds", [1, 0, 13, 2.0, True])
def test_folds_must_be_an_integer_up_to_the_number_of_ballots(folds):
    data = simulate_rankings(12, utilities=[1.0, 0.0, -1.0], rng=0)
    with pytest.raises(ValueError, match=r"folds must be an integer from 2 to the number of "
                                         r"ballots \(12\)"):
        rfit.fit_map_cv(pl_anchored_model(data), folds=folds)


def test_a_model_without_a_fixed_hyperparameter_is_refused_with_the_builders_named():
    data = simulate_rankings(12, utilities=[1.0, 0.0, -1.0], rng=0)
    with pytest.raises(ValueError, match=r"full_model\(data, tau=0.0\)"):
        rfit.fit_map_cv(rmod.plackett_luce_model(data))


def test_final_start_at_tau_zero_returns_the_plackett_luce_map_itself():
    """``final_start="plackett-luce"`` (V6): at ``tau = 0`` the PL-anchored model is
    Plackett-Luce, and the point returned is Plackett-Luce's MAP (same ballots, seed), not a
    second L-BFGS-B run stopping elsewhere within its tolerance; the deviations are 0."""
    data = simulate_rankings(12, utilities=[1.0, 0.0, -1.0], rng=0)
    pl = rfit.fit_map(rmod.plackett_luce_model(data), seed=3)
    point = rfit.fit_map_cv(pl_anchored_model(data, deviations="rank-one"), grid=(0.0,),
                            folds=2, seed=3, final_start="plackett-luce")
    assert point["tau"] == 0.0 and np.all(point["D"] == 0.0)
    np.testing.assert_allclose(point["u"], pl["u"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(point["length_probs"], pl["length_probs"], rtol=0, atol=1e-10)
    # the same objective there, but for the N(0, 1) priors of a_raw and b_raw (2 x 2) at 0
    assert point["_optimizer"]["log_posterior"] == pytest.approx(
        pl["_optimizer"]["log_posterior"] - 2 * np.log(2 * np.pi), rel=1e-12)


@pytest.mark.parametrize(("model", "final_start", "match"), [
    ("anchored", "pl", r"final_start must be one of \(None, 'plackett-luce'\); got 'pl'"),
    ("full", "plackett-luce", r"needs a PL-anchored model .* got a full model: leave "
                              r"final_start=None"),
])
def test_final_start_is_checked_with_the_fix_named(model, final_start, match):
    data = simulate_rankings(12, utilities=[1.0, 0.0, -1.0], rng=0)
    rm = (pl_anchored_model(data) if model == "anchored" else rmod.full_model(data, tau=0.0))
    with pytest.raises(ValueError, match=match):
        rfit.fit_map_cv(rm, final_start=final_start)
