"""The PlackettLuce distribution (pm_perm.distributions.plackett_luce)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.distributions.distribution import support_point

import pm_perm
from pm_perm.kernels.plackett_luce import plackett_luce_loglik as loglik_np
from pm_perm.reference.rankings import every_top_k_order
from pm_perm.testing import chi_square_pvalue


def test_logp_matches_kernel_with_weights():
    u = np.array([0.4, -1.0, 0.0, 1.2])
    orders = np.array([[0, 1, 2, 3], [1, -1, 0, -1], [0, 0, -1, -1], [-1, -1, -1, -1]])
    w = np.array([3, 0, 2, 7])
    y = pm_perm.PlackettLuce.dist(utilities=u, weights=w)
    np.testing.assert_allclose(pm.logp(y, orders).eval(), w * loglik_np(u, orders), rtol=1e-12)
    y1 = pm_perm.PlackettLuce.dist(utilities=u)
    assert float(pm.logp(y1, [0, -1, -1, -1]).eval()) == pytest.approx(
        u[0] - np.log(np.exp(u).sum()))
    assert float(pm.logp(y1, [0, 2, -1, -1]).eval()) == -np.inf   # not rank form


def test_logp_and_gradient_in_one_pass():
    """With weights, logp + dlogp compile to one fused node over all orders (not one call per
    order), and the gradient equals the kernel's."""
    import pytensor
    import pytensor.tensor as pt

    from pm_perm.kernels.plackett_luce import plackett_luce_loglik_and_grad

    orders = np.array([[0, 1, 2, 3], [1, -1, 0, -1], [0, 0, -1, -1], [2, 0, 1, -1]])
    w = np.array([3, 1, 2, 7])
    u = pt.vector("u")
    lp = pm.logp(pm_perm.PlackettLuce.dist(utilities=u, weights=w), orders).sum()
    f = pytensor.function([u], [lp, pt.grad(lp, u)])
    names = [type(getattr(n.op, "core_op", n.op)).__name__ for n in f.maker.fgraph.toposort()]
    assert names.count("PlackettLuceLoglikAndVJP") == 1 and "PlackettLuceLoglik" not in names
    u0 = np.array([0.3, -0.2, 1.0, 0.0])
    v, g = f(u0)
    want_v, want_g = plackett_luce_loglik_and_grad(u0, orders, w)
    assert v == pytest.approx(want_v, rel=1e-12)
    np.testing.assert_allclose(g, want_g, rtol=1e-10)


def test_length_probs_logp_is_a_pmf_over_ballots():
    u = np.array([0.5, -0.3, 0.0, 1.0])
    lp = np.array([0.05, 0.3, 0.25, 0.1, 0.3])
    y = pm_perm.PlackettLuce.dist(utilities=u, length_probs=lp)
    orders = every_top_k_order(4)
    assert np.exp(pm.logp(y, orders).eval()).sum() == pytest.approx(1.0, abs=1e-12)


def test_batched_utilities_one_order_per_row():
    U = np.random.default_rng(0).normal(size=(3, 4))
    orders = np.array([[0, 1, 2, 3], [1, -1, 0, -1], [0, 0, 2, 2]])
    y = pm_perm.PlackettLuce.dist(utilities=U)
    got = pm.logp(y, orders).eval()
    want = [loglik_np(U[r], orders[r:r + 1])[0] for r in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_draws_goodness_of_fit_top_k():
    """Compiled (numba) draws of top-k ballots vs exp(logp) over all 16 ballots of M = 3;
    chi-square, false-failure rate 1e-3."""
    u = np.array([0.5, -0.3, 0.0])
    lp = np.array([0.1, 0.3, 0.25, 0.35])
    y = pm_perm.PlackettLuce.dist(utilities=u, length_probs=lp, size=20_000)
    draws = pm.draw(y, random_seed=5)
    assert draws.shape == (20_000, 3) and draws.dtype == np.int64
    orders = every_top_k_order(3)
    probs = np.exp(pm.logp(pm_perm.PlackettLuce.dist(utilities=u, length_probs=lp),
                           orders).eval())
    assert chi_square_pvalue(draws, orders, probs) > 1e-3


def test_complete_draws_and_support_point():
    u = np.array([0.0, 2.0, -1.0, 1.0])
    y = pm_perm.PlackettLuce.dist(utilities=u, size=(5, 2))
    d = pm.draw(y, random_seed=1)
    assert d.shape == (5, 2, 4)
    assert (np.sort(d, axis=-1) == np.arange(4)).all()
    np.testing.assert_array_equal(support_point(pm_perm.PlackettLuce.dist(u)).eval(),
                                  [2, 0, 3, 1])
    sp = support_point(pm_perm.PlackettLuce.dist(u, length_probs=[0, 0.7, 0.3, 0, 0])).eval()
    np.testing.assert_array_equal(sp, [-1, 0, -1, -1])


@pytest.mark.numba  # the messages a user of the default backend reads
def test_bad_parameters():
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        pm_perm.PlackettLuce.dist(utilities=np.zeros(3), weights=[1.5])
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        pm_perm.PlackettLuce.dist(utilities=np.zeros(3), weights=[-1])
    with pytest.raises(ValueError, match="M \\+ 1 = 4 entries"):
        pm_perm.PlackettLuce.dist(utilities=np.zeros(3), length_probs=[0.5, 0.5])
    y = pm_perm.PlackettLuce.dist(utilities=np.array([0.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="utilities must be finite"):
        pm.logp(y, [0, 1, 2]).eval()
    with pytest.raises(ValueError, match="finite"):
        pm.draw(y, random_seed=1)


def test_observed_validated_at_model_build():
    with pm.Model():
        u = pm.ZeroSumNormal("u", sigma=1.0, shape=3)
        with pytest.raises(ValueError, match=r"observed\[1\] = \[0, 2, -1\] is not a valid"):
            pm_perm.PlackettLuce("a", utilities=u, observed=[[0, 1, 2], [0, 2, -1]])
        with pytest.raises(ValueError, match="non-integer"):
            pm_perm.PlackettLuce("b", utilities=u, observed=[[0.5, 1, 2]])
        with pytest.raises(ValueError, match="length 4 but there are 3"):
            pm_perm.PlackettLuce("c", utilities=u, observed=[[0, 1, 2, 3]])
        with pytest.raises(ValueError, match="NaN"):
            pm_perm.PlackettLuce("d", utilities=u, observed=[[0, np.nan, 1]])


def test_map_recovers_utilities_from_aggregated_ballots():
    """Weighted (aggregated) top-k data: find_MAP with a ZeroSumNormal prior lands near the
    truth (4,000 ballots: standard errors about 0.05)."""
    from pm_perm.preferences import RankingData

    true = np.array([1.0, 0.3, -0.4, -0.9])
    draws = pm.draw(pm_perm.PlackettLuce.dist(true, length_probs=[0, 0.3, 0.3, 0.2, 0.2],
                                              size=4000), random_seed=3)
    data = RankingData.from_orders(draws)
    with pm.Model():
        u = pm.ZeroSumNormal("u", sigma=5.0, shape=4)
        pm_perm.PlackettLuce("y", utilities=u, weights=data.counts, observed=data.orders)
        fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
    est = np.asarray(fit.posterior["u"]).reshape(-1)
    np.testing.assert_allclose(est, true - true.mean(), atol=0.2)


def test_non_finite_weights_in_a_model_give_minus_inf_not_nan():
    import pytensor.tensor as pt

    with pm.Model() as m:
        w = pm.Data("w", 1.0)
        x = pm.Normal("x")
        pm_perm.PlackettLuce("y", utilities=pt.stack([x, 0.0, 0.0]), weights=w,
                             observed=[[-1, -1, -1], [0, 1, 2]])
    m.set_data("w", np.inf)
    assert m.compile_logp()({"x": 0.0}) == -np.inf


def test_m_zero_refused_at_dist():
    # before: the draw returned [] and logp failed with a Reshape error
    for shape in ((0,), (2, 0)):
        with pytest.raises(ValueError, match=r"^PlackettLuce: utilities must have shape "
                           r"\(\.\.\., M\) with M >= 1 \(at least one item\); got shape"):
            pm_perm.PlackettLuce.dist(utilities=np.zeros(shape))
