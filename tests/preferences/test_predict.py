"""Prediction for a new assessor against brute-force enumeration over complete rankings.

The posteriors are a handful of fixed draws, so the comparisons are exact (no MCMC noise). The
oracle sums each draw's probabilities of the complete rankings consistent with an order
(``pm_perm.reference.rankings``), then ``E_post[p(prefix + c)] / E_post[p(prefix)]``.
"""

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy.special import logsumexp

import pm_perm
from pm_perm.preferences import models as rmod
from pm_perm.preferences.predict import predict_next, predict_top
from pm_perm.preferences.synthetic import simulate_rankings
from pm_perm.reference.rankings import mixture_loglik_enum

RNG = np.random.default_rng(53)


def _posterior(**draws):
    """A DataTree whose posterior holds the given (chain, draw, ...) arrays."""
    return xr.DataTree.from_dict({"posterior": xr.Dataset(
        {k: (("chain", "draw", *[f"{k}_{i}" for i in range(v.ndim - 2)]), v)
         for k, v in draws.items()})})


def _flat(a):
    return a.reshape((-1, *a.shape[2:]))


def _oracle(family, params, weights, prefix_row, seqs):
    """Enumerated p(prefix + seq | prefix, data) for each row of ``seqs``: params (S, K, ...),
    weights (S, K)."""
    ranked = int((prefix_row >= 0).sum())
    orders = np.repeat(prefix_row[None], len(seqs) + 1, axis=0)
    for r, s in enumerate(seqs, start=1):
        orders[r, s] = ranked + np.arange(len(s))
    ll = np.stack([mixture_loglik_enum(family, p, w, orders)[0]
                   for p, w in zip(params, weights, strict=True)])   # (S, n)
    lm = logsumexp(ll, axis=0)
    return np.exp(lm[1:] - lm[0])


def _check(out, family, params, weights, prefix_row):
    seqs = out["completions"] if "completions" in out else out["items"][:, None]
    expected = _oracle(family, params, weights, prefix_row, seqs)
    np.testing.assert_allclose(out["probs"], expected, rtol=1e-9, atol=1e-12)
    assert out["probs"].sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.diff(out["probs"]) <= 0)  # most probable first


def _pl_user_model(M, n=4):
    """A user-written Plackett-Luce model: plain Normal utilities, a Dirichlet length model,
    distinct orders with counts (no item names: items are their indices)."""
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, 2.0, shape=M)
        lp = pm.Dirichlet("lp", np.ones(M + 1))
        obs = np.array([RNG.permutation(M) for _ in range(n)])
        pm_perm.PlackettLuce("ballots", utilities=u, weights=np.arange(1, n + 1),
                             length_probs=lp, observed=obs)
    return m


def test_plackett_luce_user_model_matches_enumeration():
    M = 7
    model = _pl_user_model(M)
    u = RNG.normal(0.0, 1.5, size=(2, 3, M))
    lp = RNG.dirichlet(np.ones(M + 1), size=(2, 3))  # varies by draw: must not enter
    idata = _posterior(u=u, lp=lp)
    params, weights = _flat(u)[:, None], np.ones((6, 1))
    out = predict_next(model, idata, [3, np.int64(0)])
    row = np.full(M, -1)
    row[[3, 0]] = [0, 1]
    _check(out, "plackett-luce", params, weights, row)
    assert set(out["names"]) == {"1", "2", "4", "5", "6"}
    # the prefix is evidence: not the average of the draws' conditionals
    cond = np.mean([_oracle("plackett-luce", p[None], w[None], row, out["items"][:, None])
                    for p, w in zip(params, weights, strict=True)], axis=0)
    assert np.abs(cond - out["probs"]).max() > 1e-3
    top = predict_top(model, idata, [3, 0], 2)
    assert top["completions"].shape == (20, 2)
    _check(top, "plackett-luce", params, weights, row)
    # summing the second item out gives predict_next
    first = {i: p for i, p in zip(out["items"], out["probs"], strict=True)}
    for i in first:
        assert top["probs"][top["completions"][:, 0] == i].sum() == pytest.approx(first[i])


def test_partial_ranking_user_model_with_tied_rank_form_prefix():
    M = 6
    with pm.Model() as model:
        W = pm.Normal("W", 0.0, 1.0, shape=(M, M))
        pm_perm.PartialRanking("ballots", logits=W, observed=[[0, 1, 2, 3, 4, 5]])
    W_draws = RNG.normal(0.0, 1.0, size=(1, 4, M, M))
    idata = _posterior(W=W_draws)
    row = np.array([-1, 0, -1, 0, 2, -1])  # items 1 and 3 tied first, item 4 third
    out = predict_next(model, idata, row, rank_form=True)
    assert sorted(out["names"]) == ["0", "2", "5"]
    _check(out, "full", _flat(W_draws)[:, None], np.ones((4, 1)), row)
    top = predict_top(model, idata, row, 3, rank_form=True)
    _check(top, "full", _flat(W_draws)[:, None], np.ones((4, 1)), row)
    empty = predict_next(model, idata, [])  # the first position
    _check(empty, "full", _flat(W_draws)[:, None], np.ones((4, 1)), np.full(M, -1))
    assert empty["log_evidence"] == pytest.approx(0.0, abs=1e-12)


def test_permutation_exp_family_complete_rankings():
    M = 5
    with pm.Model() as model:
        W = pm.Normal("W", 0.0, 1.0, shape=(M, M))
        pm_perm.PermutationExpFamily("y", logits=W, observed=[[1, 0, 2, 3, 4]])
    W_draws = RNG.normal(0.0, 1.0, size=(2, 2, M, M))
    out = predict_top(model, _posterior(W=W_draws), [4], 2, var_name="y")
    row = np.array([-1, -1, -1, -1, 0])
    _check(out, "full", _flat(W_draws)[:, None], np.ones((4, 1)), row)


def test_package_plackett_luce_model_and_map_point():
    M = 6
    data = simulate_rankings(30, utilities=np.linspace(1, -1, M), rng=1,
                             length_probs=[0, 0, 0.5, 0.2, 0, 0, 0.3])
    rm = rmod.plackett_luce_model(data)
    u_raw = RNG.normal(0.0, 1.0, size=(1, 5, 1, M - 1))
    lp = RNG.dirichlet(np.ones(M + 1), size=(1, 5))
    idata = _posterior(u_raw=u_raw, length_probs=lp)
    u = _flat(u_raw) @ rmod.zero_sum_basis(M).T  # (S, 1, M)
    names = list(data.item_names)
    out = predict_next(rm, idata, [names[2]])
    row = np.full(M, -1)
    row[2] = 0
    _check(out, "plackett-luce", u, np.ones((5, 1)), row)
    # a MAP point (a dict of the free variables), through the pm.Model itself
    point = {"u_raw": u_raw[0, 0], "length_probs": lp[0, 0]}
    out = predict_next(rm.model, point, [2])
    _check(out, "plackett-luce", u[:1], np.ones((1, 1)), row)


@pytest.mark.parametrize("family, builder", [("plackett-luce", rmod.plackett_luce_model),
                                             ("full", rmod.full_model)])
def test_two_component_mixture_matches_enumeration(family, builder):
    M = 5
    data = simulate_rankings(20, utilities=np.linspace(1, -1, M), rng=2)
    rm = builder(data, components=2)
    S = 4
    shape = (1, S, 2, M) if family == "plackett-luce" else (1, S, 2, M, M)
    params = RNG.normal(0.0, 1.5, size=shape)
    w = RNG.dirichlet([2.0, 2.0], size=(1, S))
    name = "u" if family == "plackett-luce" else "W"
    idata = _posterior(**{name: params, "mixture_weights": w,
                          "length_probs": RNG.dirichlet(np.ones(M + 1), size=(1, S))})
    row = np.array([1, -1, 0, -1, -1])  # item 2 first, item 0 second
    out = predict_next(rm, idata, [2, 0])
    _check(out, family, _flat(params), _flat(w), row)
    top = predict_top(rm, idata, [2, 0], 2)
    _check(top, family, _flat(params), _flat(w), row)


def _mixture_user_model(mixture, M, **kwargs):
    """A user-written 2-component Plackett-Luce mixture (``mixture`` = ``pm.Mixture`` or
    ``RankingMixture``); the components carry a length model, which must not enter."""
    obs = np.array([RNG.permutation(M) for _ in range(3)])
    with pm.Model() as model:
        u = pm.Normal("u", 0.0, 1.0, shape=(2, M))
        w = pm.Dirichlet("w", np.ones(2))
        lp = pm.Dirichlet("lp", np.ones(M + 1))
        comps = [pm_perm.PlackettLuce.dist(u[k], length_probs=lp) for k in range(2)]
        mixture("ballots", w=w, comp_dists=comps, observed=obs, **kwargs)
    S = 5
    u = RNG.normal(0.0, 1.5, size=(1, S, 2, M))
    w = RNG.dirichlet([1.0, 1.0], size=(1, S))
    idata = _posterior(u=u, w=w, lp=RNG.dirichlet(np.ones(M + 1), size=(1, S)))
    return model, idata, _flat(u), _flat(w)


def test_user_written_pm_mixture_matches_enumeration():
    M = 5
    model, idata, u, w = _mixture_user_model(pm.Mixture, M)
    row = np.array([-1, -1, 0, -1, -1])
    _check(predict_next(model, idata, [2]), "plackett-luce", u, w, row)
    _check(predict_top(model, idata, [2], 2), "plackett-luce", u, w, row)


def test_ranking_mixture_with_counts_matches_enumeration():
    mixture = pytest.importorskip("pm_perm.distributions.mixture",
                                  reason="RankingMixture (issue 53, part D) not in this tree")
    M = 6
    model, idata, u, w = _mixture_user_model(mixture.RankingMixture, M,
                                             weights=np.array([3, 1, 2]))
    row = np.array([-1, 1, -1, -1, 0, -1])
    _check(predict_next(model, idata, [4, 1]), "plackett-luce", u, w, row)
    _check(predict_top(model, idata, [4, 1], 3), "plackett-luce", u, w, row)


@pytest.fixture(scope="module")
def small():
    model = _pl_user_model(4)
    idata = _posterior(u=RNG.normal(size=(1, 2, 4)), lp=RNG.dirichlet(np.ones(5), size=(1, 2)))
    return model, idata


@pytest.mark.parametrize("prefix, kwargs, message", [
    ([1, 2, 1], {}, "item '1' appears twice in the prefix"),
    ([0, 7], {}, "unknown item 7 in the prefix"),
    (["0", "x"], {}, "unknown item 'x' in the prefix"),
    ([-1, 0], {}, "pass rank_form=True"),
    ([0, 1, 2, 3, 0], {}, "the prefix ranks 5 items but the model has M = 4"),
    ([0, 1, 2, 3], {}, "no item is left to predict"),
    ("0", {}, "prefix must be a sequence of items"),
    ([0, 1, -1, -1, -1], {"rank_form": True}, "one row of M = 4 entries"),
    ([0, 2, -1, -1], {"rank_form": True}, "is not a valid rank-form order"),
    ([0], {"var_name": "lp"}, "'lp' is not an observed variable"),
    ([0], {"var_name": "votes"}, "the model has no variable 'votes'"),
])
def test_bad_prefixes_and_arguments_raise(small, prefix, kwargs, message):
    model, idata = small
    with pytest.raises(ValueError, match=message):
        predict_next(model, idata, prefix, **kwargs)


def test_bad_n_next_posterior_and_model_raise(small):
    model, idata = small
    with pytest.raises(ValueError, match="n_next must be an integer from 1 to the 3 remaining"):
        predict_top(model, idata, [0], 4)
    with pytest.raises(ValueError, match="exceed max_completions=5"):
        predict_top(model, idata, [0], 2, max_completions=5)
    with pytest.raises(ValueError, match="the posterior has no 'u'"):
        predict_next(model, {"lp": np.full(5, 0.2)}, [0])
    with pm.Model() as other:
        p = pm.Dirichlet("p", np.ones(3))
        pm.Categorical("ballots", p=p, observed=[0, 1])
    with pytest.raises(TypeError, match="'ballots' is .or mixes. a CategoricalRV.*rank-form"):
        predict_next(other, {"p": np.full(3, 1 / 3)}, [0])
    with pm.Model() as per_row:  # one utilities row per ballot: no parameter for a new one
        u = pm.Normal("u", 0.0, 1.0, shape=(2, 3))
        pm_perm.PlackettLuce("ballots", utilities=u, observed=[[0, 1, 2], [2, 1, 0]])
    with pytest.raises(ValueError, match="differ between its rows"):
        predict_next(per_row, {"u": np.zeros((2, 3))}, [0])
    rm = rmod.plackett_luce_model(simulate_rankings(10, utilities=[1.0, 0, -1], rng=3),
                                  components=2)
    with pytest.raises(ValueError, match="the posterior has no 'u_raw'"):
        predict_next(rm.model, {}, [0])  # a mixture model (a RankingMixture) without draws


def test_find_map_point_of_a_user_model():
    model = _pl_user_model(5)
    mp = pm.find_MAP(model=model, progressbar=False, return_inferencedata=True, jitter=False)
    out = predict_next(model, mp, [1])
    row = np.array([-1, 0, -1, -1, -1])
    u = mp["posterior"]["u"].values.reshape(1, 1, 5)
    _check(out, "plackett-luce", u, np.ones((1, 1)), row)


def test_impossible_prefix_raises_and_impossible_items_get_zero():
    with pm.Model() as model:
        W = pm.Normal("W", 0.0, 1.0, shape=(3, 3))
        pm_perm.PartialRanking("ballots", logits=W, observed=[[0, 1, 2]])
    W_draws = np.zeros((1, 2, 3, 3))
    W_draws[..., 0, 0] = -np.inf  # item 0 is never first
    idata = _posterior(W=W_draws)
    with pytest.raises(ValueError, match="probability 0 under every posterior draw"):
        predict_next(model, idata, [0])
    out = predict_next(model, idata, [])
    assert out["probs"][out["items"] == 0] == 0.0
    assert out["probs"].sum() == pytest.approx(1.0)
