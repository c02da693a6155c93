"""The type-II fit's Hessian at ``tau = 0`` (issue 50, item 2): the deviation's block is the
prior's identity, differenced only over the other coordinates, and equal to the Hessian
differenced over every coordinate; the type-II fit differences forward (``n + 1`` gradients for
``n`` coordinates), agreeing with central differences (``2 n``) to about 1e-6 relative."""

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
    assert rfit.HESSIAN_SCHEME == "forward"
    # u_raw's 3 coordinates, forward: 3 steps + the gradient at x
    assert n_all == 2 * keep.size == 2 * (3 + 9) and n_fast == 3 + 1
    np.testing.assert_allclose(fast, everything, atol=1e-6 * np.abs(everything).max())
    assert not np.array_equal(fast[:3, :3], np.eye(3))  # the likelihood's block is really there
    # at tau > 0 the deviation enters the likelihood: every coordinate is differenced
    engine.set_data(tau=np.float64(0.5))
    calls.clear()
    rfit._negative_hessian(engine, x, keep, False)
    assert len(calls) == keep.size + 1


def test_forward_and_central_differences_agree_on_a_fitted_model():
    data = simulate_rankings(150, utilities=[0.8, 0.1, -0.3, -0.6], rng=3)
    rm = rmod.full_model(data, tau=0.5)
    engine = rfit._map_engine(rm, 10)
    engine.fit(seed=0)
    x, keep = engine.x.copy(), rfit._order_model_coordinates(engine)

    def grad(z):
        full = x.copy()
        full[keep] = z
        return -engine.value_and_grad(full)[1][keep]

    central = negative_hessian(grad, x[keep])
    forward = negative_hessian(grad, x[keep], scheme="forward")
    assert not np.array_equal(forward, central)
    np.testing.assert_allclose(forward, central, atol=1e-6 * np.abs(central).max())
    log_det = [np.linalg.slogdet(H)[1] for H in (central, forward)]
    assert abs(log_det[1] - log_det[0]) < 1e-5
