"""The full model's learned shrinkage toward rank one (``fit_map_type2``) and the Plackett-Luce
position profile of the rank-one model (issue 53, finding 8)."""

import numpy as np
import pytest

from pm_perm.inference import CompiledMAP
from pm_perm.inference.laplace import laplace_log_evidence, negative_hessian
from pm_perm.kernels.plackett_luce import plackett_luce_loglik
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.synthetic import rank_one_logits, simulate_rankings

M = 5


def test_harmonic_profile_is_plackett_luce_to_first_order():
    """d log p_PL(order) / d u_i at u = 0 is const + c_{pos(i)} with c = harmonic_positions."""
    order = np.array([[3, 0, 4, 1, 2]])  # rank form: item i at position order[i]
    h = 1e-6
    grad = np.array([(plackett_luce_loglik(h * np.eye(M)[i], order)[0]
                      - plackett_luce_loglik(-h * np.eye(M)[i], order)[0]) / (2 * h)
                     for i in range(M)])
    c = rmod.harmonic_positions(M)[order[0]]
    np.testing.assert_allclose(grad - c, (grad - c)[0], atol=1e-7)
    assert c.max() == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4) and c.min() == 0.0


def _data_from(W, n, seed):
    return simulate_rankings(n, logits=W, length_probs=[0, 0, 0.3, 0.3, 0, 0.4], rng=seed)


def test_scale_goes_to_zero_on_rank_one_data_and_stays_large_on_full_data():
    u = np.array([1.5, 0.8, 0.0, -0.7, -1.6])
    rank_one = rank_one_logits(u, rmod.harmonic_positions(M))
    taus = (0.0, 0.0625, 0.5, 2.0)
    plain = rfit.fit_map_type2(rmod.full_model(_data_from(rank_one, 200, 0), tau=0.0), grid=taus)
    # a departure from rank one of size 2 in every entry
    W = rank_one + 2.0 * np.random.default_rng(1).normal(size=(M, M))
    rich = rfit.fit_map_type2(rmod.full_model(_data_from(W, 200, 2), tau=0.0), grid=taus)
    assert plain["_optimizer"]["tau"] <= 0.0625
    assert rich["_optimizer"]["tau"] >= 1.0
    # the returned point is the chosen scale's MAP: W departs from rank one only with tau > 0
    dev = plain["W"][0] - plain["u"][0][:, None] * rmod.harmonic_positions(M)[None, :]
    assert plain["_optimizer"]["tau"] > 0 or np.abs(dev).max() < 1e-8
    for point in (plain, rich):
        ev = point["_optimizer"]["log_evidence"]
        assert list(ev) == list(taus[:len(ev)])  # scanned upward, stopped after 2 below the best
        best = max(ev, key=ev.get)
        assert best == point["_optimizer"]["tau"] == float(point["tau"])
        assert len(ev) == len(taus) or all(ev[t] < ev[best] for t in list(ev)[-2:])


def test_evidence_at_tau_zero_is_the_rank_one_models():
    """At tau = 0 the deviation has its prior only: the evidence is rank-one's Laplace
    evidence, computed here from the rank-one model itself."""
    data = _data_from(rank_one_logits([1.0, 0.5, 0.0, -0.5, -1.0]), 120, 3)
    point = rfit.fit_map_type2(rmod.full_model(data, tau=0.0), grid=(0.0,))
    engine = CompiledMAP(rmod.rank_one_model(data).model)
    out = engine.fit(seed=0)
    n_u = M - 1  # u_raw comes first in the raveled point, then the ballot-length block
    x = engine.x.copy()

    def grad(z):
        full = x.copy()
        full[:n_u] = z
        return -engine.value_and_grad(full)[1][:n_u]

    expected = laplace_log_evidence(out["_info"]["log_posterior"], negative_hessian(grad, x[:n_u]))
    assert point["_optimizer"]["log_evidence"][0.0] == pytest.approx(expected, abs=1e-3)


def test_fit_map_type2_needs_a_fixed_scale_and_checks_it():
    assert rfit.TAU_GRID[0] == 0.0 and list(rfit.TAU_GRID) == sorted(rfit.TAU_GRID)
    data = _data_from(rank_one_logits([1.0, 0.5, 0.0, -0.5, -1.0]), 30, 4)
    with pytest.raises(ValueError, match="fixed tau"):
        rfit.fit_map_type2(rmod.full_model(data))
    with pytest.raises(ValueError, match="fixed tau"):
        rfit.fit_map_type2(rmod.rank_one_model(data))
    with pytest.raises(ValueError, match="tau must be a finite number >= 0"):
        rmod.full_model(data, tau=-1.0)
    with pytest.raises(ValueError, match="noncentered"):
        rmod.full_model(data, tau=1.0, parametrization="centered")
    with pytest.raises(ValueError, match="grid is empty"):
        rfit.fit_map_type2(rmod.full_model(data, tau=0.0), grid=())
    with pytest.raises(ValueError, match="positions must be one of"):
        rmod.rank_one_model(data, positions="convex")


def test_position_mix_follows_the_profile_the_data_were_drawn_with():
    """rank_one_model(positions=<mix>) + fit_map_type2: the evidence picks the harmonic end
    (0) on data drawn with the harmonic profile and the linear end (1) on data drawn with the
    linear one (scaled to the same range)."""
    M6 = 6
    u = np.array([2.0, 1.2, 0.4, -0.4, -1.2, -2.0])
    h = rmod.harmonic_positions(M6)
    lin = np.linspace(h[0], 0.0, M6)
    chosen = []
    for c, seed in ((h, 5), (lin, 6)):
        data = simulate_rankings(1500, logits=rank_one_logits(u, c), rng=seed)
        point = rfit.fit_map_type2(rmod.rank_one_model(data, positions=0.5), patience=None)
        assert sorted(point["_optimizer"]["log_evidence"]) == list(rfit.POSITION_MIX_GRID)
        chosen.append(point["_optimizer"]["position_mix"])
    assert chosen == [0.0, 1.0]
