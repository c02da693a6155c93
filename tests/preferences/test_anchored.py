"""The Plackett-Luce-anchored full model (issue 53, finding 8, variant V3): tau = 0 is
Plackett-Luce, the evidence chooses the deviation scale, bad input is refused by name."""

import numpy as np
import pytest

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
