"""Analysis of fitted ranking models against exact small-M values (enumeration)."""

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.preferences.analysis import (
    ballot_statistics,
    component_position_marginals,
    consensus_posterior,
    pairwise_probabilities,
    position_marginals,
    ppc_summary,
    sample_rankings,
    top_k_probabilities,
)
from pm_perm.preferences.synthetic import simulate_rankings
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import permutation_complete_logp, plackett_luce_complete_logp

M = 4
PERMS = all_permutations(M)


def _post(params, weights):
    S = params.shape[0]
    return {"params": params, "weights": weights,
            "length_probs": np.tile(np.r_[0.0, 0.3, 0.3, 0.0, 0.4], (S, 1))}


def _mixture_probs(family, params, weights):
    """p(complete ranking) of each permutation, averaged over draws: (M!,)."""
    f = plackett_luce_complete_logp if family == "plackett-luce" else permutation_complete_logp
    out = 0.0
    for p, w in zip(params, weights, strict=True):
        out = out + np.exp(logsumexp([np.log(w[k]) + f(p[k], PERMS) for k in range(len(w))],
                                     axis=0))
    return out / len(params)


def _onehot():
    return np.eye(M)[PERMS]  # (M!, M items, M positions)


@pytest.fixture
def mixture_post():
    rng = np.random.default_rng(0)
    return _post(rng.normal(size=(3, 2, M, M)) * 1.5, rng.dirichlet([2, 2], size=3))


def test_position_marginals_exact(mixture_post):
    p = _mixture_probs("full", mixture_post["params"], mixture_post["weights"])
    exact = np.tensordot(p, _onehot(), axes=1)
    # the mixture weights and W vary across draws: the average of per-draw mixtures
    P = position_marginals(mixture_post, "full")
    comp = component_position_marginals(mixture_post, "full")
    per_draw = np.einsum("sk,skij->ij", mixture_post["weights"],
                         np.stack([component_position_marginals(
                             {k: v[s:s + 1] for k, v in mixture_post.items()}, "full")
                             for s in range(3)])) / 3
    np.testing.assert_allclose(per_draw, exact, atol=1e-12)
    np.testing.assert_allclose(P, exact, atol=1e-12)
    np.testing.assert_allclose(P.sum(axis=0), 1.0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert comp.shape == (2, M, M)
    # single component: exact average of per-draw marginals
    one = {k: v[:, :1] if k == "params" else v for k, v in mixture_post.items()}
    one["weights"] = np.ones((3, 1))
    exact1 = np.tensordot(_mixture_probs("full", one["params"], one["weights"]), _onehot(), 1)
    np.testing.assert_allclose(position_marginals(one, "full"), exact1, atol=1e-12)
    np.testing.assert_allclose(top_k_probabilities(exact1, 2), exact1[:, :2].sum(1))


def test_plackett_luce_marginals_monte_carlo():
    post = _post(np.array([[[1.0, 0.2, -0.3, -0.9]]]), np.ones((1, 1)))
    exact = np.tensordot(_mixture_probs("plackett-luce", post["params"], post["weights"]),
                         _onehot(), 1)
    P = position_marginals(post, "plackett-luce", n_per_draw=40_000, rng=1)
    # binomial standard error <= 0.0025; 6 SE bound: false failure < 1e-8 per entry
    np.testing.assert_allclose(P, exact, atol=0.015)


def test_pairwise_probabilities(mixture_post):
    p = _mixture_probs("full", mixture_post["params"], mixture_post["weights"])
    exact = np.einsum("p,pij->ij", p, (PERMS[:, :, None] < PERMS[:, None, :]).astype(float))
    Q = pairwise_probabilities(mixture_post, "full", n_per_draw=15_000, rng=2)
    # 45,000 draws: SE <= 0.0024; 6 SE bound
    np.testing.assert_allclose(Q, exact, atol=0.015)
    np.testing.assert_allclose(Q + Q.T + np.eye(M), 1.0, atol=1e-12)


def test_consensus_is_the_mode_of_each_draw():
    rng = np.random.default_rng(3)
    params = rng.normal(size=(6, 1, M, M)) * 2
    post = _post(params, np.ones((6, 1)))
    modes = [tuple(np.argsort(PERMS[np.argmax(permutation_complete_logp(W[0], PERMS))]))
             for W in params]
    result = consensus_posterior(post, "full", top=10)
    expect = {o: modes.count(o) / 6 for o in modes}
    assert dict(result) == pytest.approx(expect)
    assert [p for _, p in result] == sorted((p for _, p in result), reverse=True)
    pl = consensus_posterior(_post(np.array([[[0.0, 2.0, 1.0, -1.0]]]), np.ones((1, 1))),
                             "plackett-luce")
    assert pl == [((1, 2, 0, 3), 1.0)]


def test_mixture_consensus_separated_blocs():
    # two well-separated blocs with opposite orders; the heavier bloc's order is the mode
    u = np.array([3.0, 1.0, -1.0, -3.0])
    params = np.stack([u[:, None] * np.linspace(1, 0, M), -u[:, None] * np.linspace(1, 0, M)])
    post = _post(params[None], np.array([[0.35, 0.65]]))
    p = _mixture_probs("full", post["params"], post["weights"])
    best = tuple(np.argsort(PERMS[np.argmax(p)]))
    assert consensus_posterior(post, "full") == [(best, 1.0)]
    assert best == (3, 2, 1, 0)


def test_ballot_statistics_by_hand():
    orders = np.array([[0, 1, -1, -1],    # a > b, c d unranked
                       [1, 0, 2, 3],      # b > a > c > d
                       [0, 0, -1, -1]])   # a ~ b tied first
    counts = np.array([2, 1, 1])
    s = ballot_statistics(orders, counts)
    np.testing.assert_allclose(s["first"], [2.5 / 4, 1.5 / 4, 0, 0])
    np.testing.assert_allclose(s["lengths"], [0, 0, 3 / 4, 0, 1 / 4])
    pw = s["pairwise"]
    assert pw[0, 1] == pytest.approx(2 / 4) and pw[1, 0] == pytest.approx(1 / 4)
    assert pw[0, 2] == pytest.approx(1.0) and pw[2, 3] == pytest.approx(1 / 4)
    assert pw[2, 0] == 0 and pw[3, 2] == 0 and np.all(np.diag(pw) == 0)


def test_ppc_calibrated_at_the_true_parameters():
    rng = np.random.default_rng(4)
    W = rng.normal(size=(1, M, M))
    lp = np.r_[0.0, 0.3, 0.3, 0.0, 0.4]
    data = simulate_rankings(3000, logits=W[0], length_probs=lp, rng=5)
    post = {"params": W[None], "weights": np.ones((1, 1)), "length_probs": lp[None]}
    out = ppc_summary(data, post, "full", n_reps=200, rng=6)
    assert set(out) == {"first", "lengths", "pairwise", "tied"}
    # the data come from the model: observed statistics fall in the 90% intervals about 90%
    # of the time (entries are dependent; 50% is far below any plausible outcome)
    inside = np.concatenate([((o["observed"] >= o["lower"]) & (o["observed"] <= o["upper"]))
                             .ravel() for o in out.values()])
    assert inside.mean() > 0.5
    assert out["first"]["observed"].shape == (M,) and out["pairwise"]["p_value"].shape == (M, M)
    # and a wrong model is flagged: reversed logits put the observed first preferences outside
    bad = ppc_summary(data, {**post, "params": -W[None]}, "full", n_reps=50, rng=7)
    assert np.any(bad["first"]["p_value"] < 0.05)


@pytest.mark.parametrize("family", ["bogus", "Full", "PL"])
def test_every_function_refuses_an_unknown_family(mixture_post, family):
    from pm_perm.preferences.analysis import posterior_predictive, sample_rankings

    calls = [lambda: position_marginals(mixture_post, family),
             lambda: component_position_marginals(mixture_post, family),
             lambda: pairwise_probabilities(mixture_post, family, n_per_draw=5),
             lambda: consensus_posterior(mixture_post, family),
             lambda: sample_rankings(mixture_post, family, 2),
             lambda: posterior_predictive(mixture_post, family, 5, n_reps=2)]
    for call in calls:
        with pytest.raises(ValueError, match=r"family must be one of \('plackett-luce', "
                                             r"'rank-one', 'full', 'top-k', 'pl-anchored'\)"):
            call()


def test_params_of_another_family_or_weights_of_another_k_are_refused(mixture_post):
    # W logits read as Plackett-Luce utilities, and the other way round
    with pytest.raises(ValueError, match=r"utilities u \(S, K, M\) for family 'plackett-luce'"):
        position_marginals(mixture_post, "plackett-luce")
    with pytest.raises(ValueError, match=r"utilities u \(S, K, M\) for family 'plackett-luce'"):
        consensus_posterior(mixture_post, "plackett-luce")
    pl = _post(np.zeros((1, 1, M)), np.ones((1, 1)))
    with pytest.raises(ValueError, match=r"logits W \(S, K, M, M\) for family 'full'"):
        position_marginals(pl, "full")
    # K = 2 components with one weight: the rows of the marginals would sum to 2
    one_weight = {**mixture_post, "weights": np.ones((3, 1))}
    with pytest.raises(ValueError, match=r"post\['weights'\] must have shape \(S, K\) = \(3, 2\)"):
        position_marginals(one_weight, "full")


@pytest.mark.parametrize("bad", [[0.7, 0.7], [1.2, -0.2], [np.nan, 1.0]])
def test_mixture_weights_must_be_probability_vectors(mixture_post, bad):
    """As posterior_params refuses them. Before, one draw's weights summing to 1.4 gave position
    marginals whose rows summed to 1.13, NaN weights NaN marginals, and a negative weight a
    consensus from NaN log-probabilities, all without an error."""
    w = np.array(mixture_post["weights"], dtype=float)
    w[1] = bad
    post = {**mixture_post, "weights": w}
    for call in (lambda: position_marginals(post, "full"),
                 lambda: consensus_posterior(post, "full"),
                 lambda: sample_rankings(post, "full", 2, rng=0)):
        with pytest.raises(ValueError, match=r"post\['weights'\] \(draw 1\) is .*: it must be "
                                             r"non-negative and sum to 1"):
            call()


@pytest.mark.parametrize("k", [-1, 0, M + 1, 1.5, True])
def test_top_k_refuses_k_outside_1_to_m(mixture_post, k):
    P = position_marginals(mixture_post, "full")
    with pytest.raises(ValueError, match=f"k must be an integer from 1 to M = {M}"):
        top_k_probabilities(P, k)
    np.testing.assert_allclose(top_k_probabilities(P, M), 1.0)
    np.testing.assert_allclose(top_k_probabilities(P, 1), P[:, 0])


def test_ppc_summary_refuses_bad_replications():
    data = simulate_rankings(30, utilities=np.zeros(M), length_probs=[0, 0.5, 0, 0, 0.5], rng=1)
    post = _post(np.zeros((1, 1, M, M)), np.ones((1, 1)))
    ok = np.tile(np.arange(M), (3, 10, 1))
    assert ppc_summary(data, replicated=ok)["first"]["mean"].tolist() == [1.0, 0, 0, 0]
    cases = [
        ({"replicated": np.full((3, 10, M), 7)}, r"\[7, 7, 7, 7\] is not a valid rank-form"),
        ({"replicated": np.tile(np.arange(M + 1), (3, 10, 1))},
         rf"replicated ballots must have shape \(\.\.\., n, {M}\).*got \(3, 10, 5\)"),
        ({"replicated": np.zeros((0, 10, M), int)}, "at least one data set"),
        ({"replicated": {"first": np.zeros((3, M))}}, "replicated statistics lack 'lengths'"),
        ({"replicated": {"first": np.zeros((3, M + 1)), "lengths": np.zeros((3, M + 1)),
                         "pairwise": np.zeros((3, M, M))}},
         rf"replicated\['first'\] must have shape \(R, {M}\)"),
        ({"post": post, "family": "full", "n_reps": 0}, "n_reps must be a positive integer"),
        ({"post": post, "family": "full", "interval": 1.5}, r"interval must be in \(0, 1\)"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            ppc_summary(data, **kwargs)
