"""Ready-made SBC setups of pm_perm's own distributions (:func:`pm_perm.testing.sbc.run_sbc`).

Each builder takes a ``numpy.random.Generator`` (for the fixed covariates) and returns an
:class:`~pm_perm.testing.sbc.SBCModel`; small, so that hundreds of replications run in minutes.
They serve the test suite and ``benchmarks/sbc.py``, and are examples of SBC for your own models:

* ``matching``: ``theta ~ N(0, 1)`` (d = 3), 20 graphs of M = 6, ``W = x . theta``,
  ``y ~ PermutationExpFamily(W)``;
* ``ranking``: RankMatch-style ``W[i, j] = c_j <psi_i, theta>``, d = 2, 15 queries of M = 5;
* ``nchoosek``: ``theta ~ N(0, 1)`` (d = 2), ``count_probs ~ Dirichlet(1)`` over 0..6, 40 rows;
* ``ordinal``: ``theta ~ N(0, 1)`` (d = 2), 30 rows of D = 5 items, fixed counts (2, 2, 1);
* ``rankings_full``: the full ranking model (``W = u c^T + tau delta_raw``, M = 4) on 40
  top-k ballots, exact partial-order likelihood, a NumPy simulator;
* ``mallows_latent``: BayesMallows' footrule model with a LATENT consensus: ``rho`` uniform over
  the permutations of n = 6 items, ``alpha ~ Gamma(2, rate 0.5)``, 10 complete rankings
  ``R ~ Mallows(rho, alpha, "footrule")``; fitted by ``pm.sample`` (``sampler="pymc"``: NUTS
  for alpha, ``PermutationLeapShift`` for rho), rho's entries ranked with randomised ties.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm.distributions.permutation import PermutationExpFamily, edge_logits
from pm_perm.testing.sbc import SBCModel

__all__ = ["MODELS", "SETTINGS", "mallows_latent", "matching", "nchoosek", "ordinal", "ranking",
           "rankings_full", "zero_sum_draw"]


def matching(rng):
    x = rng.normal(size=(20, 6, 6, 3))

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=3)
            y = pm.Data("y_obs", y_obs)
            PermutationExpFamily("y", logits=edge_logits(x, theta), observed=y)
        return model

    def simulate(theta_sym):
        return PermutationExpFamily.dist(logits=edge_logits(x, theta_sym))

    return SBCModel({"theta": (3,)}, {"theta": lambda r: r.normal(size=3)}, build, simulate)


def ranking(rng):
    M, d = 5, 2
    psi = rng.normal(size=(15, M, d))
    c = (M - np.arange(M)) / M

    def logits(theta):
        return pt.dot(psi, theta)[..., :, None] * c[None, None, :]

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=d)
            y = pm.Data("y_obs", y_obs)
            PermutationExpFamily("y", logits=logits(theta), observed=y)
        return model

    def simulate(theta_sym):
        return PermutationExpFamily.dist(logits=logits(theta_sym))

    return SBCModel({"theta": (d,)}, {"theta": lambda r: r.normal(size=d)}, build, simulate)


def nchoosek(rng):
    from pm_perm.distributions.n_choose_k import NChooseK

    D, d = 6, 2
    X = rng.normal(size=(40, D, d))

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=d)
            pk = pm.Dirichlet("count_probs", a=np.ones(D + 1))
            y = pm.Data("y_obs", y_obs)
            NChooseK("y", logits=pt.dot(X, theta), count_probs=pk, observed=y)
        return model

    def simulate(theta_sym, pk_sym):
        return NChooseK.dist(logits=pt.dot(X, theta_sym), count_probs=pk_sym)

    priors = {"theta": lambda r: r.normal(size=d),
              "count_probs": lambda r: r.dirichlet(np.ones(D + 1))}
    return SBCModel({"theta": (d,), "count_probs": (D + 1,)}, priors, build, simulate)


def ordinal(rng):
    from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK

    D, d, counts = 5, 2, np.array([2, 2, 1])
    X = rng.normal(size=(30, D, d))

    def build(y_obs):
        with pm.Model() as model:
            theta = pm.Normal("theta", 0.0, 1.0, shape=d)
            y = pm.Data("y_obs", y_obs)
            OrdinalNChooseK("y", logits=pt.dot(X, theta), counts=counts, observed=y)
        return model

    def simulate(theta_sym):
        return OrdinalNChooseK.dist(logits=pt.dot(X, theta_sym), counts=counts)

    return SBCModel({"theta": (d,)}, {"theta": lambda r: r.normal(size=d)}, build, simulate)


def zero_sum_draw(r, shape):
    """A ``pm.ZeroSumNormal(1)`` draw: iid normals centred along every axis."""
    x = r.normal(size=shape)
    for axis in range(len(shape)):
        x = x - x.mean(axis=axis, keepdims=True)
    return x


def rankings_full(rng):
    from pm_perm.ops.partial_orders import partial_order_loglik_sum
    from pm_perm.preferences.synthetic import default_positions, draw_ballots

    M, n = 4, 40
    c = default_positions(M)
    length_probs = np.array([0.0, 0.3, 0.3, 0.0, 0.4])

    def logits(u, tau, delta):
        return u[:, None] * c[None, :] + tau * delta

    def build(y_obs):
        with pm.Model() as model:
            u = pm.ZeroSumNormal("u", sigma=1.0, shape=M)
            tau = pm.HalfNormal("tau", 1.0)
            delta = pm.ZeroSumNormal("delta_raw", sigma=1.0, n_zerosum_axes=2, shape=(M, M))
            y = pm.Data("y_obs", y_obs)
            pm.Potential("ballots", partial_order_loglik_sum(logits(u, tau, delta), y,
                                                             np.ones(n)))
        return model

    def simulate(u, tau, delta, rng):
        return draw_ballots(n, logits=logits(u, tau, delta), length_probs=length_probs, rng=rng)

    priors = {"u": lambda r: zero_sum_draw(r, (M,)), "tau": lambda r: np.abs(r.normal()),
              "delta_raw": lambda r: zero_sum_draw(r, (M, M))}
    # a NumPy simulator (exact draws), not a PyMC distribution
    return SBCModel({"u": (M,), "tau": (), "delta_raw": (M, M)}, priors, build, simulate,
                    numpy_simulator=True)


def mallows_latent(rng, n=6, n_assessors=10):
    """The latent-consensus footrule Mallows model (``rng`` unused: no covariates)."""
    from pm_perm.distributions.mallows import Mallows

    def build(y_obs):
        with pm.Model() as model:
            alpha = pm.Gamma("alpha", alpha=2.0, beta=0.5)
            rho = PermutationExpFamily("rho", logits=np.zeros((n, n)))  # uniform: a latent rho
            Mallows("R", rho=rho, alpha=alpha, distance="footrule",
                    observed=pm.Data("y_obs", y_obs))
        return model

    def simulate(alpha, rho):  # the simulator's parameters are float64 tensors: rho cast back
        return Mallows.dist(pt.cast(rho, "int64"), alpha, distance="footrule",
                            shape=(n_assessors, n))

    priors = {"alpha": lambda r: r.gamma(2.0, 2.0), "rho": lambda r: r.permutation(n)}
    return SBCModel({"alpha": (), "rho": (n,)}, priors, build, simulate)


#: name -> builder ``f(rng) -> SBCModel`` (covariates drawn from ``rng``)
MODELS = {"matching": matching, "ranking": ranking, "nchoosek": nchoosek, "ordinal": ordinal,
          "rankings_full": rankings_full, "mallows_latent": mallows_latent}

#: name -> ``run_sbc`` keyword arguments of models that nutpie cannot fit (discrete latent
#: variables): ``pm.sample``'s compound step, and its draws
SETTINGS = {"mallows_latent": {"sampler": "pymc", "draws": 500, "tune": 300}}
