"""The PL-anchored family in the posterior helpers (issue 53, finding 8: the CLI's defaults):
exact marginals and mode against enumeration, pointwise log-likelihoods, draws, bad shapes."""

import numpy as np
import pytest

from pm_perm.preferences import _anchored_draws, analysis
from pm_perm.preferences import fitting as rfit
from pm_perm.preferences.anchored import pl_anchored_model
from pm_perm.preferences.posterior import pointwise_loglik
from pm_perm.preferences.synthetic import simulate_rankings
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import pl_tilted_complete_logp

FAMILY = "pl-anchored"


def _post(u, D, M):
    from pm_perm.preferences._families import anchored_params

    return {"params": anchored_params(u, D)[None, None], "weights": np.ones((1, 1)),
            "length_probs": np.full((1, M + 1), 1 / (M + 1))}


@pytest.mark.parametrize("M", [2, 3, 4, 5])
def test_marginals_and_mode_match_enumeration(M):
    rng = np.random.default_rng(M)
    perms = all_permutations(M)
    for _ in range(3):
        u, D = rng.normal(size=M), 1.5 * rng.normal(size=(M, M))
        p = np.exp(pl_tilted_complete_logp(u, D, perms))
        want = np.einsum("n,nij->ij", p, np.eye(M)[perms])
        post = _post(u, D, M)
        np.testing.assert_allclose(analysis.position_marginals(post, FAMILY), want, atol=1e-12)
        mode = perms[np.argmax(p)]
        np.testing.assert_array_equal(_anchored_draws.mode(post["params"][0, 0]), mode)
        order = tuple(int(i) for i in np.argsort(mode))
        assert analysis.consensus_posterior(post, FAMILY) == [(order, 1.0)]


def test_pointwise_loglik_and_posterior_params_of_a_fit():
    data = simulate_rankings(40, utilities=[1.0, 0.3, -0.2, -1.1],
                             length_probs=[0, 0, .5, 0, .5], rng=1)
    point = rfit.fit_map(pl_anchored_model(data, tau=0.8, deviations="rank-one"))
    post = rfit.posterior_params(point, FAMILY)
    assert post["params"].shape == (1, 1, 4, 5)
    np.testing.assert_array_equal(post["params"][0, 0, :, :4], point["D"][0])
    np.testing.assert_array_equal(post["params"][0, 0, :, 4], point["u"][0])
    from pm_perm.kernels.pl_tilted import pl_tilted_loglik

    np.testing.assert_allclose(pointwise_loglik(post, FAMILY, data.orders)[0],
                               pl_tilted_loglik(point["u"][0], point["D"][0], data.orders))
    with pytest.raises(ValueError, match="source has no 'u'"):
        rfit.posterior_params({"D": point["D"], "length_probs": point["length_probs"]}, FAMILY)


def test_draws_have_the_model_marginals_and_lengths():
    """Exact draws cut to their lengths: the share of item i at position j over 4000 complete
    draws is within 5 binomial SE of the exact marginal (each of the 16 cells: a false failure
    about once in 10^5 runs), and the lengths follow length_probs."""
    M = 4
    rng = np.random.default_rng(3)
    u, D = rng.normal(size=M), rng.normal(size=(M, M))
    post = _post(u, D, M)
    y = analysis.sample_rankings(post, FAMILY, 4000, rng=4)
    P = analysis.position_marginals(post, FAMILY)
    share = np.eye(M)[y].mean(axis=0)
    assert np.all(np.abs(share - P) <= 5 * np.sqrt(P * (1 - P) / 4000))
    cut = analysis.sample_rankings(post, FAMILY, 2000, rng=5, length_probs=True)
    lengths = (cut >= 0).sum(axis=1)
    assert set(np.unique(lengths)) <= set(range(M + 1)) and (lengths < M).any()


def test_a_post_of_another_shape_is_refused():
    post = {"params": np.zeros((1, 1, 4, 4)), "weights": np.ones((1, 1))}
    with pytest.raises(ValueError, match=r"D and u packed as \(S, 1, M, M \+ 1\)"):
        analysis.position_marginals(post, FAMILY)
