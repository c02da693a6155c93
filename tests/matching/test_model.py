import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

from pm_perm.inference import laplace_whitening
from pm_perm.kernels.permanent import permutation_marginals
from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.matching.data import make_silhouette_pairs
from pm_perm.matching.features import edge_features, shape_context
from pm_perm.matching.model import (
    baseline_prior_mean,
    calibration_table,
    feature_scale,
    fit_map,
    fit_max_margin,
    fit_nuts,
    hamming_error,
    log_likelihood,
    matching_model,
    no_learning_theta,
    posterior_matching_marginals,
    predict,
    sub_matchings,
)
from pm_perm.reference.permutations import all_permutations


def _pairs(n_train, n_test, n_points=8, seed=0):
    """Scaled SC + position features of sheared copies of a random point cloud: (x, y) of the
    train, validation (10 pairs) and test splits."""
    contour = np.random.default_rng(seed).normal(size=(40, 2))
    n_pairs = {"train": n_train, "validate": 10, "test": n_test}
    _, s = make_silhouette_pairs(contour, n_points=n_points, n_copies=40, shear=0.5,
                                 noise=0.01, n_pairs=n_pairs, seed=seed)
    feats = {k: edge_features(shape_context(v["points_a"]), shape_context(v["points_b"]),
                              v["points_a"], v["points_b"]) for k, v in s.items()}
    scale = feature_scale(feats["train"])
    return tuple((feats[k] / scale, s[k]["y"]) for k in n_pairs)


def _conditional_enum(W, y, S):
    """log p(y[S] | y elsewhere) by enumerating all M! permutations."""
    perms = all_permutations(W.shape[0])
    others = np.setdiff1d(np.arange(len(y)), S)
    keep = np.all(perms[:, others] == y[others], axis=1)
    scores = W[np.arange(len(y)), perms[keep]].sum(axis=1)
    return W[np.arange(len(y)), y].sum() - logsumexp(scores)


@pytest.mark.parametrize("disjoint", [False, True])
def test_sub_matchings_are_exact_conditionals(disjoint):
    rng = np.random.default_rng(1)
    n, M, d, size = 3, 6, 2, 3
    x = rng.normal(size=(n, M, M, d))
    theta = np.array([0.7, -1.3])
    y = np.stack([rng.permutation(M) for _ in range(n)])
    xs, ys = sub_matchings(x, y, size, n_sub=2, seed=4, disjoint=disjoint)
    assert xs.shape == (n * 2, size, size, d) and ys.shape == (n * 2, size)
    # recover which rows each sub-matching kept, then compare its log-probability with the
    # enumerated conditional of the full model
    for k in range(n * 2):
        p = k // 2
        Wp, Ws = x[p] @ theta, xs[k] @ theta
        sub_perms = all_permutations(size)
        sub_lp = Ws[np.arange(size), ys[k]].sum() - logsumexp(
            Ws[np.arange(size), sub_perms].sum(axis=1))
        true_edges = x[p][np.arange(M), y[p]]  # (M, d): features of the true edges
        rows = [int(np.flatnonzero(np.all(true_edges == xs[k][a, ys[k][a]], axis=-1))[0])
                for a in range(size)]
        np.testing.assert_allclose(sub_lp, _conditional_enum(Wp, y[p], np.array(rows)),
                                   rtol=1e-10)
    if disjoint:
        # the two sub-matchings of a pair use different rows
        first = {tuple(r) for r in xs[0].reshape(size, -1)}
        assert not first & {tuple(r) for r in xs[1].reshape(size, -1)}


def test_sub_matchings_arguments():
    x, y = np.zeros((2, 4, 4, 1)), np.tile(np.arange(4), (2, 1))
    with pytest.raises(ValueError, match="size"):
        sub_matchings(x, y, 5)
    with pytest.raises(ValueError, match="disjoint"):
        sub_matchings(x, y, 3, n_sub=2, disjoint=True)


def test_model_logp_matches_enumeration():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 4, 4, 3))
    y = np.array([[1, 0, 3, 2], [0, 1, 2, 3]])
    theta = np.array([0.5, -0.2, 1.0])
    model = matching_model(x, y, prior_sigma=2.0)
    lp = model.compile_logp(sum=False)({"theta": theta})
    perms = all_permutations(4)
    expected = 0.0
    for p in range(2):
        W = x[p] @ theta
        expected += W[np.arange(4), y[p]].sum() - logsumexp(W[np.arange(4), perms].sum(1))
    np.testing.assert_allclose(lp[1].sum(), expected, rtol=1e-10)


@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 6])
def test_log_likelihood_matches_enumeration(M):
    rng = np.random.default_rng(M)
    x = rng.normal(size=(3, M, M, 2))
    y = np.stack([rng.permutation(M) for _ in range(3)])
    theta = np.array([1.5, -0.7])
    perms = all_permutations(M)
    expected = sum((x[p] @ theta)[np.arange(M), y[p]].sum()
                   - logsumexp((x[p] @ theta)[np.arange(M), perms].sum(1)) for p in range(3))
    np.testing.assert_allclose(log_likelihood(x, y, theta), expected, rtol=1e-10)
    if M > 1:
        y_bad = y.copy()
        y_bad[1, 0] = y_bad[1, 1]  # a repeated column
        with pytest.raises(ValueError, match=r"observed\[1\] .* not a permutation"):
            log_likelihood(x, y_bad, theta)


def test_prior_mean_enters_the_model_and_the_map():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 4, 3))
    y = np.array([[1, 0, 3, 2], [0, 1, 2, 3]])
    mu, theta = np.array([2.0, -1.0, 0.5]), np.array([0.3, 0.1, -0.4])
    lp = matching_model(x, y, 0.7, prior_mean=mu).compile_logp(sum=False)({"theta": theta})
    expected = -0.5 * np.sum(((theta - mu) / 0.7) ** 2) - 3 * np.log(0.7 * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(lp[0].sum(), expected, rtol=1e-10)
    # a tight prior pins the MAP to the prior mean; a zero-mean one to 0
    np.testing.assert_allclose(fit_map(x, y, 1e-4, prior_mean=mu).theta, mu, atol=1e-3)
    assert np.abs(fit_map(x, y, 1e-4).theta).max() < 1e-3
    with pytest.raises(ValueError, match="prior_mean"):
        matching_model(x, y, prior_mean=np.zeros(2))
    with pytest.raises(ValueError, match="prior_mean"):
        matching_model(x, y, prior_mean=[0.0, np.nan, 1.0])


def test_tiebreak_picks_the_scale_with_the_higher_validation_likelihood():
    (xtr, ytr), (xva, yva), _ = _pairs(20, 2)
    sigmas = (3.0, 30.0, 300.0)
    plain = fit_map(xtr, ytr, sigmas, validation=(xva, yva))
    assert plain.tiebreak_loglik == {}
    tied = [s for s in sigmas if plain.val_errors[s] == min(plain.val_errors.values())]
    assert len(tied) >= 2 and plain.prior_sigma == tied[0]  # no tie-break: the earliest
    fit = fit_map(xtr, ytr, sigmas, validation=(xva, yva), tiebreak=(xva, yva))
    ll = fit.tiebreak_loglik
    assert set(ll) == set(sigmas) and fit.val_errors == plain.val_errors
    assert fit.prior_sigma == max(tied, key=ll.get)
    np.testing.assert_allclose(ll[fit.prior_sigma], log_likelihood(xva, yva, fit.theta))


def test_baseline_prior_mean_recovers_the_temperature():
    rng = np.random.default_rng(7)
    n, M, d = 400, 5, 3
    x = rng.exponential(size=(n, M, M, d))
    direction = np.array([-1.0, -1.0, 0.0])
    y = sample_permutations(x @ (2.5 * direction), rng=rng)
    mean = baseline_prior_mean(x, y, direction)
    alpha = mean[0] / direction[0]
    assert mean[2] == 0.0 and abs(alpha - 2.5) < 0.25  # MLE s.e. about 0.06 here
    # the MLE is where the likelihood along the line peaks
    lls = [log_likelihood(x, y, a * direction) for a in (0.9 * alpha, alpha, 1.1 * alpha)]
    assert lls[1] > max(lls[0], lls[2])
    # a baseline that is right on every pair: the likelihood rises towards 1 with alpha, so a
    # point on its plateau is returned, where the baseline is all but certain
    y_id = np.tile(np.arange(M), (n, 1))
    x_sep = (1.0 - np.eye(M))[None, :, :, None] * np.ones((n, 1, 1, 1))
    mean = baseline_prior_mean(x_sep, y_id, [-1.0], spread_bounds=(1e-2, 50.0))
    assert mean[0] < 0 and -1e-3 < log_likelihood(x_sep, y_id, mean) <= 0
    with pytest.raises(ValueError, match="direction"):
        baseline_prior_mean(x, y, [1.0, 2.0])
    with pytest.raises(ValueError, match="constant"):
        baseline_prior_mean(x, y, [0.0, 0.0, 0.0])


def test_end_to_end_map_and_max_margin_recover_the_matching():
    (xtr, ytr), (xva, yva), (xte, yte) = _pairs(20, 30)
    fit = fit_map(xtr, ytr, (1.0, 30.0), validation=(xva, yva))
    # sigma = 1 shrinks too much; the validation set picks 30
    assert fit.prior_sigma == 30.0 and fit.val_errors[1.0] > fit.val_errors[30.0] == 0.0
    assert np.all(predict(xtr, fit.theta) == ytr)
    y_map = predict(xte, fit.theta)  # 27 of 30 test pairs exactly right, 6 of 240 points wrong
    assert np.mean(np.all(y_map == yte, axis=1)) >= 0.9 and hamming_error(y_map, yte) <= 0.03
    w = fit_max_margin(xtr, ytr, lam=1e-3, epochs=20)
    assert np.all(predict(xtr, w) == ytr)
    mm = hamming_error(predict(xte, w), yte)
    # plain shape-context matching is much worse on these sheared copies
    nolearn = hamming_error(predict(xte, no_learning_theta(xte.shape[-1], 60)), yte)
    assert mm <= 0.05 < 0.2 < nolearn


def test_composite_map_recovers_the_matching():
    (xtr, ytr), _, (xte, yte) = _pairs(20, 30)
    xs, ys = sub_matchings(xtr, ytr, 4, n_sub=2, seed=0, disjoint=True)
    fit = fit_map(xs, ys, 30.0)
    assert hamming_error(predict(xte, fit.theta), yte) == 0.0


def test_max_margin_separable_toy():
    # one feature: 0 on the true edges, 1 elsewhere; any negative weight is perfect
    M = 5
    y = np.stack([np.random.default_rng(s).permutation(M) for s in range(6)])
    x = (1.0 - np.eye(M)[y])[..., None]
    w, info = fit_max_margin(x, y, lam=1e-2, epochs=100, return_info=True)
    assert w[0] < 0 and np.all(predict(x, w) == y)
    # the duality-gap estimate stops BCFW well before the epoch limit on this easy problem
    assert info["gap"] <= 1e-3 and info["epochs"] < 100
    with pytest.raises(ValueError, match="lam"):
        fit_max_margin(x, y, lam=0.0)


def test_posterior_matching_marginals():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 5, 5, 3))
    draws = rng.normal(size=(4, 3))
    P = posterior_matching_marginals(x, draws)
    expected = np.mean([permutation_marginals(x @ t) for t in draws], axis=0)
    np.testing.assert_allclose(P, expected)
    np.testing.assert_allclose(P.sum(-1), 1.0)
    np.testing.assert_allclose(P.sum(-2), 1.0)


def test_calibration_table_hand_case():
    # two 2 x 2 problems; the Bayes matching is the diagonal in both, with probabilities
    # 0.95 (right in problem 0) and 0.6 (wrong in problem 1: the truth is the anti-diagonal)
    P = np.array([[[0.95, 0.05], [0.05, 0.95]], [[0.6, 0.4], [0.4, 0.6]]])
    y = np.array([[0, 1], [1, 0]])
    rows = calibration_table(P, y, edges=(0.0, 0.5, 0.9, 1.0))
    assert rows == [
        {"lo": 0.5, "hi": 0.9, "n": 2, "mean_prob": pytest.approx(0.6), "frac_correct": 0.0},
        {"lo": 0.9, "hi": 1.0, "n": 2, "mean_prob": pytest.approx(0.95), "frac_correct": 1.0},
    ]
    cells = calibration_table(P, y, edges=(0.0, 0.5, 0.9, 1.0), entries="all")
    # all 8 cells: 0.05 x2 (never true), 0.4 x2 (both true), 0.6 x2 (false), 0.95 x2 (true)
    assert [(r["n"], r["frac_correct"]) for r in cells] == [(4, 0.5), (2, 0.0), (2, 1.0)]


def test_helpers():
    x = np.ones((2, 3, 3, 2)) * np.array([2.0, 0.0])
    np.testing.assert_array_equal(feature_scale(x), [2.0, 1.0])
    np.testing.assert_array_equal(no_learning_theta(4, 3), [-1, -1, -1, 0])
    assert hamming_error([[0, 1, 2]], [[0, 2, 1]]) == pytest.approx(2 / 3)


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_nuts_whitened_tiny():
    (xtr, ytr), _, (xte, yte) = _pairs(10, 10, n_points=6)
    xtr, xte = xtr[..., -3:], xte[..., -3:]  # three features keep it quick
    fit = fit_map(xtr, ytr, 1.0)
    white = laplace_whitening(matching_model(xtr, ytr, 1.0), fit.theta)
    idata = fit_nuts(xtr, ytr, 1.0, draws=200, tune=200, chains=2, whitening=white)
    theta = np.asarray(idata.posterior["theta"]).reshape(-1, 3)
    assert int(idata.sample_stats["diverging"].sum()) == 0
    np.testing.assert_allclose(theta.mean(0), fit.theta, atol=4 * theta.std(0).max())
    P = posterior_matching_marginals(xte, theta[::20])
    assert hamming_error(predict(P[..., None], np.ones(1)), yte) <= 0.2


def _tiny_pair(M=5):
    rng = np.random.default_rng(0)
    pa = rng.normal(size=(M, 2))
    pb = pa + 0.01 * rng.normal(size=(M, 2))
    return edge_features(shape_context(pa), shape_context(pb))[None], np.arange(M)[None]


def test_fit_max_margin_refuses_a_y_that_is_not_a_permutation():
    x, _ = _tiny_pair()
    for y in (np.zeros((1, 5), int), np.array([[0, 1, 2, 3, 9]])):
        with pytest.raises(ValueError, match="is not a permutation"):
            fit_max_margin(x, y, epochs=3)


def test_hamming_error_refuses_mismatched_shapes():
    assert hamming_error(np.arange(5)[None], np.arange(5)[None]) == 0.0
    with pytest.raises(ValueError, match="y_pred and y_true must have the same shape"):
        hamming_error(np.arange(5)[:, None], np.arange(5))
    with pytest.raises(ValueError, match="y_pred and y_true must have the same shape"):
        hamming_error(np.arange(5), np.arange(4))


def test_non_finite_features_are_refused_at_every_entry_point():
    x, y = _tiny_pair()
    xn = x.copy()
    xn[0, 0, 0, 0] = np.nan
    theta = -np.ones(x.shape[-1])
    calls = [lambda: matching_model(xn, y), lambda: fit_map(xn, y),
             lambda: fit_max_margin(xn, y, epochs=3), lambda: log_likelihood(xn, y, theta),
             lambda: baseline_prior_mean(xn, y, theta), lambda: predict(xn, theta),
             lambda: posterior_matching_marginals(xn, theta[None]),
             lambda: sub_matchings(xn, y, 2),
             lambda: fit_map(x, y, validation=(xn, y), prior_sigmas=(1.0, 2.0))]
    for call in calls:
        with pytest.raises(ValueError, match="x contains NaN or inf features"):
            call()


@pytest.mark.parametrize("sigmas", [(-1.0,), (1.0, 0.0), (np.nan,), ()])
def test_fit_map_refuses_non_positive_prior_scales(sigmas):
    x, y = _tiny_pair()
    with pytest.raises(ValueError, match="prior_sigmas must be positive numbers"):
        fit_map(x, y, prior_sigmas=sigmas)
    with pytest.raises(ValueError, match="prior_sigma must be a positive number"):
        matching_model(x, y, prior_sigma=-1.0)


def test_theta_of_the_wrong_length_is_refused():
    x, y = _tiny_pair()
    theta = -np.ones(x.shape[-1])
    with pytest.raises(ValueError, match=r"theta must have shape \(60,\)"):
        predict(x, theta[:3])
    with pytest.raises(ValueError, match=r"theta must have shape \(60,\)"):
        log_likelihood(x, y, theta[:3])
    with pytest.raises(ValueError, match=r"theta_draws must have shape \(S, 60\)"):
        posterior_matching_marginals(x, theta[None, :3])
    np.testing.assert_array_equal(predict(x, theta), predict(x[0], theta)[None])


def test_non_finite_theta_and_overflowing_logits_are_refused_naming_theta():
    """A NaN theta (a failed fit) got the permanent kernel's message about "logits"; a finite
    theta whose products overflow gave +inf logits with a RuntimeWarning."""
    x, y = _tiny_pair()
    theta = -np.ones(x.shape[-1])
    theta[7] = np.nan
    for call in (lambda: predict(x, theta), lambda: log_likelihood(x, y, theta),
                 lambda: posterior_matching_marginals(x, np.stack([-np.ones(60), theta]))):
        with pytest.raises(ValueError, match=r"theta(_draws)? must be finite; theta(_draws)?"
                                             r"\[(1, )?7\] is nan \(a failed fit\?"):
            call()
    x2 = np.ones((1, 3, 3, 2))  # x . theta = 2e308: inf
    y2 = np.array([[0, 1, 2]])
    huge = np.full(2, 1e308)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        for call in (lambda: predict(x2, huge), lambda: log_likelihood(x2, y2, huge),
                     lambda: posterior_matching_marginals(x2, huge[None])):
            with pytest.raises(ValueError, match=r"x \. theta overflows float64 .*max \|theta\|"
                                                 r" = 1e\+308"):
                call()


def test_calibration_table_refuses_unsorted_edges_and_mismatched_shapes():
    """Unsorted edges gave a bin with lo 1.0 and hi 0.5."""
    P = np.full((1, 2, 2), 0.5)
    with pytest.raises(ValueError, match="edges must be at least two increasing"):
        calibration_table(P, np.array([[0, 1]]), edges=(0.0, 1.0, 0.5))
    with pytest.raises(ValueError, match="P must have shape"):
        calibration_table(P, np.array([0, 1]))
