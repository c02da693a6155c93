"""The type-II fit's Hessian at ``tau = 0`` (issue 50, item 2): the deviation's block is the
prior's identity, differenced only over the other coordinates, and equal to the Hessian
differenced over every coordinate."""

from __future__ import annotations

import numpy as np

from pm_perm.inference.laplace import negative_hessian
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences.synthetic import simulate_rankings


def test_tau_zero_hessian_equals_the_hessian_of_every_coordinate():
    data = simulate_rankings(200, utilities=[1.0, 0.3, -0.2, -1.1], rng=0,
                             length_probs=[0, 0.2, 0.3, 0.2, 0.3])
    rm = rmod.full_model(data, tau=0.0)
    engine = rfit._map_engine(rm, 10)
    engine.fit(seed=0)
    x = engine.x.copy()
    keep = rfit._order_model_coordinates(engine)
    calls = []

    def grad(z):
        full = x.copy()
        full[keep] = z
        calls.append(1)
        return -engine.value_and_grad(full)[1][keep]

    everything = negative_hessian(grad, x[keep])
    n_all = len(calls)
    orig = engine.value_and_grad
    engine.value_and_grad = lambda z: (calls.append(1), orig(z))[1]
    fast = rfit._negative_hessian(engine, x, keep, True)
    n_fast = len(calls) - n_all
    assert n_all == 2 * keep.size == 2 * (3 + 9) and n_fast == 2 * 3  # u_raw's 3 coordinates
    np.testing.assert_allclose(fast, everything, atol=1e-6)
    assert not np.array_equal(fast[:3, :3], np.eye(3))  # the likelihood's block is really there
    # at tau > 0 the deviation enters the likelihood: every coordinate is differenced
    engine.set_data(tau=np.float64(0.5))
    calls.clear()
    rfit._negative_hessian(engine, x, keep, False)
    assert len(calls) == 2 * keep.size
