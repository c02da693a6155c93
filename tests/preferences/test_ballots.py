"""The one-component ranking models observe one row per BALLOT: ``pm.compute_log_likelihood``,
``az.loo`` and ``az.compare`` are per ballot (equal to ``loo_with_counts`` and to the data
expanded by hand), the posterior predictive has a row per ballot, and ``set_counts`` moves them.

Before (one row per distinct order, weighted by its count) the pointwise log-likelihood had
``n_distinct`` entries of ``count * log p``: each test below failed on it.
"""

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pm_perm import PlackettLuce
from pm_perm._modes import PYTHON_MODE
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences import models as rmod
from pm_perm.preferences import posterior as rpost
from pm_perm.preferences.synthetic import add_ties, simulate_rankings

LENGTHS = [0.0, 0.3, 0.3, 0.0, 0.4]  # top-1, top-2 and complete ballots of 4 items
S = 200


def _data():
    data = simulate_rankings(60, utilities=[1.0, 0.4, -0.3, -1.1], length_probs=LENGTHS, rng=3)
    return add_ties(data, 0.3, pair=1, rng=4)  # 2nd and 3rd tied


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k: compared here, not judged
        return fn(*args, **kwargs)


def _prior_as_posterior(rm, seed):
    prior = pm.sample_prior_predictive(draws=S, model=rm.model, random_seed=seed,
                                       compile_kwargs={"mode": PYTHON_MODE})["prior"]
    return xr.DataTree.from_dict({"posterior": prior.to_dataset()})


def _log_likelihood(rm, draws):
    return _quiet(pm.compute_log_likelihood, draws, model=rm.model, var_names=["ballots"],
                  progressbar=False, compile_kwargs={"mode": PYTHON_MODE})


def _per_order(rm, draws):
    """(S, n) log-likelihood of each distinct order with its length term, computed apart from
    the model (posterior_params + pointwise_loglik)."""
    post = rfit.posterior_params(draws, rm.family)
    k = (rm.data.orders >= 0).sum(axis=1)
    return (rpost.pointwise_loglik(post, rm.family, rm.data.orders)
            + np.log(post["length_probs"][:, k]))


@pytest.mark.parametrize("family, builder", [("plackett-luce", rmod.plackett_luce_model),
                                             ("full", rmod.full_model)])
def test_model_loo_is_per_ballot_and_equals_loo_with_counts(family, builder):
    data = _data()
    assert data.has_ties and (data.counts > 1).any()
    rm = builder(data)
    draws = _log_likelihood(rm, _prior_as_posterior(rm, 5))
    ll = draws["log_likelihood"]["ballots"]
    assert ll.dims == ("chain", "draw", "ballot") and ll.shape == (1, S, data.n_rankings)
    per_order = _per_order(rm, draws)
    np.testing.assert_allclose(ll.values[0], np.repeat(per_order, data.counts, axis=1),
                               rtol=1e-9)
    ours = _quiet(az.loo, draws, pointwise=True, reff=1.0)
    cheap = _quiet(rpost.loo_with_counts, per_order, data.counts)
    assert ours.elpd == pytest.approx(cheap.elpd, rel=1e-6)
    assert ours.se == pytest.approx(cheap.se, rel=1e-6)
    assert ours.p == pytest.approx(cheap.p, rel=1e-6)
    np.testing.assert_allclose(np.asarray(ours.pareto_k), np.asarray(cheap.pareto_k), rtol=1e-6)


def test_compare_accepts_the_models_and_loo_with_counts():
    data = _data()
    models = {"pl": rmod.plackett_luce_model(data), "full": rmod.full_model(data)}
    draws = {name: _log_likelihood(rm, _prior_as_posterior(rm, 6)) for name, rm in models.items()}
    plain = _quiet(az.compare, draws)
    cheap = _quiet(az.compare, {name: _quiet(rpost.loo_with_counts,
                                             _per_order(rm, draws[name]), data.counts)
                                for name, rm in models.items()})
    assert list(plain.index) == list(cheap.index)
    for col in ("elpd", "p", "elpd_diff", "se", "dse"):
        np.testing.assert_allclose(plain[col].astype(float), cheap[col].astype(float),
                                   rtol=1e-6, atol=1e-9)


def test_set_counts_moves_the_ballots():
    data = _data()
    rm = rmod.plackett_luce_model(data)
    draws = _prior_as_posterior(rm, 7).isel(draw=slice(0, 3))
    fold = np.random.default_rng(8).binomial(data.counts, 0.5)
    refit = rfit.set_counts(rm, fold)
    assert _log_likelihood(refit, draws.copy())["log_likelihood"].sizes["ballot"] == fold.sum()
    pp = pm.sample_posterior_predictive(draws, model=refit.model, progressbar=False,
                                        random_seed=9, compile_kwargs={"mode": PYTHON_MODE})
    assert pp["posterior_predictive"]["ballots"].shape == (1, 3, fold.sum(), 4)
    point = rfit.fit_map(refit)
    fresh = rfit.fit_map(rmod.plackett_luce_model(data.with_counts(fold)))
    np.testing.assert_allclose(point["u"], fresh["u"], atol=1e-4)


@pytest.mark.data
@pytest.mark.slow  # az.loo itself loops over the 18,723 ballots in Python: about 25 s a call
def test_apa_loo_per_ballot_equals_loo_on_the_expanded_data(shared_data):
    """APA 1998 (18,723 ballots) with 15 % of the ballots of 3+ items given a tie: PL's
    ``az.loo`` per ballot equals ``az.loo`` of a model observing the 18,723 rows."""
    from pm_perm.preferences import read_preflib

    path = shared_data / "preflib" / "apa" / "ED-00028-00000001.soi"
    if not path.exists():
        pytest.skip(f"APA 1998 absent: {path}")
    data = add_ties(read_preflib(path), 0.15, pair=1, rng=0)
    assert data.n_rankings == 18723 and data.has_ties
    rm = rmod.plackett_luce_model(data)
    rng = np.random.default_rng(1)
    M = data.n_items
    # draws near the posterior without a fit: utilities from the first choices' shares, length
    # probabilities from the lengths' shares
    first = np.bincount(np.argmax(data.orders == 0, axis=1), weights=data.counts, minlength=M)
    u = np.log(first) - np.log(first).mean()
    u_raw = rmod.zero_sum_basis(M).T @ u + 0.01 * rng.normal(size=(1, 100, 1, M - 1))
    lengths = np.bincount(data.ranked_lengths(), weights=data.counts, minlength=M + 1)
    lp = rng.dirichlet(lengths + 1, size=(1, 100))
    draws = xr.DataTree.from_dict({"posterior": xr.Dataset({
        "u_raw": (("chain", "draw", "component", "item_basis"), u_raw),
        "length_probs": (("chain", "draw", "length"), lp)})})
    ours = _log_likelihood(rm, draws.copy())
    assert ours["log_likelihood"].sizes["ballot"] == 18723
    with pm.Model() as expanded:
        u = u_raw_var = pm.Normal("u_raw", 0.0, 3.0, shape=(1, M - 1))
        u = u_raw_var[0] @ rmod.zero_sum_basis(M).T
        length_probs = pm.Dirichlet("length_probs", a=np.ones(M + 1))
        PlackettLuce("ballots", utilities=u, length_probs=length_probs,
                     observed=np.repeat(data.orders, data.counts, axis=0))
    hand = _quiet(pm.compute_log_likelihood, draws.copy(), model=expanded, progressbar=False,
                  compile_kwargs={"mode": PYTHON_MODE})
    a = _quiet(az.loo, ours, pointwise=True, reff=1.0)
    b = _quiet(az.loo, hand, pointwise=True, reff=1.0)
    assert a.elpd == pytest.approx(b.elpd, rel=1e-6)
    assert a.p == pytest.approx(b.p, rel=1e-6)
    np.testing.assert_allclose(np.asarray(a.pareto_k), np.asarray(b.pareto_k), rtol=1e-6)
