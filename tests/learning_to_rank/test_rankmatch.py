import itertools

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import logsumexp
from scipy.stats import chi2

from pm_perm.kernels.permanent import log_permanent as np_log_permanent
from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.metrics import evaluate_ranking
from pm_perm.learning_to_rank.rankmatch import (
    RankMatch,
    position_weights,
    ranking_predictive,
    rankmatch_model,
    sample_subsets,
    weak_label_log_likelihood,
    weak_label_mask,
)


def _enumerated_weak_label(scores, ratings, c):
    """log P(ranking consistent with the ratings), by summing over all M! permutations."""
    M = len(scores)
    W = np.outer(scores, c)
    everything, consistent = [], []
    for y in itertools.permutations(range(M)):  # y[i] = rank position of document i
        value = W[np.arange(M), y].sum()
        everything.append(value)
        if all(ratings[i] <= ratings[k] or y[i] < y[k] for i in range(M) for k in range(M)):
            consistent.append(value)
    return logsumexp(consistent) - logsumexp(everything)


_S, _MASK, _C = pt.matrix("s"), pt.tensor3("mask", dtype="bool"), pt.vector("c")
_WEAK_LABEL = None


def _compiled_weak_label(mask, c):
    """One compiled function for every M and batch size (symbolic mask and weights)."""
    global _WEAK_LABEL
    if _WEAK_LABEL is None:
        _WEAK_LABEL = pytensor.function([_S, _MASK, _C], weak_label_log_likelihood(_S, _MASK, _C))
    return lambda scores: _WEAK_LABEL(scores, mask, np.asarray(c, dtype=np.float64))


# ------------------------------------------------------------------ position weights, mask


def test_position_weights_default_and_checks():
    np.testing.assert_array_equal(position_weights(4), [3, 2, 1, 0])
    np.testing.assert_array_equal(position_weights(3, [5, 5, 1]), [5, 5, 1])
    with pytest.raises(ValueError, match="non-increasing"):
        position_weights(3, [1, 2, 3])
    with pytest.raises(ValueError, match="3 finite"):
        position_weights(3, [1, 0])
    with pytest.raises(ValueError, match="M must be an integer"):
        position_weights(0)


def test_weak_label_mask_blocks():
    mask = weak_label_mask(np.array([0, 2, 1, 2, 0]))
    expected = np.array(
        [
            [0, 0, 0, 1, 1],
            [1, 1, 0, 0, 0],
            [0, 0, 1, 0, 0],
            [1, 1, 0, 0, 0],
            [0, 0, 0, 1, 1],
        ],
        dtype=bool,
    )
    np.testing.assert_array_equal(mask, expected)
    with pytest.raises(ValueError, match="integers"):
        weak_label_mask(np.array([0.5, 1.0]))


# ------------------------------------------------------------------ likelihood vs enumeration


@pytest.mark.parametrize("M", [2, 3, 4, 5, 6])
def test_weak_label_likelihood_matches_enumeration(M):
    """All subsets go through one batched call; each equals the enumerated sum over the
    permutations consistent with its ratings (ties, all-distinct and all-equal ratings)."""
    rng = np.random.default_rng(M)
    S = 6
    ratings = rng.integers(0, 3, size=(S, M))
    ratings[0] = np.arange(M)  # no tie: the strict ranking
    ratings[1] = 1  # a single block: log-likelihood 0
    scores = rng.normal(scale=1.5, size=(S, M))
    c = np.sort(rng.exponential(size=M))[::-1]  # any non-increasing c
    got = _compiled_weak_label(weak_label_mask(ratings), c)(scores)
    want = [_enumerated_weak_label(scores[s], ratings[s], c) for s in range(S)]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    assert abs(got[1]) < 1e-10


def test_weak_label_is_strict_likelihood_without_ties():
    """Distinct ratings: log p(y) = sum_i W[i, y_i] - log perm(W), the strict permutation."""
    rng = np.random.default_rng(3)
    ratings = np.array([[1, 3, 0, 2]])
    scores = rng.normal(size=(1, 4))
    c = position_weights(4)
    W = np.outer(scores[0], c)
    y = np.argsort(np.argsort(-ratings[0]))  # rank position of each document
    want = W[np.arange(4), y].sum() - np_log_permanent(W)
    got = _compiled_weak_label(weak_label_mask(ratings), c)(scores)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_weak_label_gradient_matches_finite_differences():
    rng = np.random.default_rng(4)
    ratings = np.array([[2, 0, 1, 0, 2], [1, 1, 0, 0, 0]])
    mask, c = weak_label_mask(ratings), position_weights(5)
    s = pt.matrix("s")
    total = weak_label_log_likelihood(s, mask, c).sum()
    grad = pytensor.function([s], pytensor.grad(total, s))
    x = rng.normal(size=(2, 5))

    def f(v):
        return sum(_enumerated_weak_label(v[k], ratings[k], c) for k in range(2))

    eps = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        fd[idx] = (f(x + d) - f(x - d)) / (2 * eps)
    np.testing.assert_allclose(grad(x), fd, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ subset sampling


def _split(labels_per_query, n_features=2, seed=0):
    rng = np.random.default_rng(seed)
    y = np.concatenate(labels_per_query)
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in labels_per_query])])
    return RankingSplit(
        X=rng.normal(size=(y.size, n_features)),
        y=y.astype(np.int64),
        group_ptr=ptr,
        qids=np.arange(len(labels_per_query)) + 10,
    )


def test_every_subset_has_every_rating_of_its_query():
    split = _split([[0, 0, 0, 1, 2, 0, 1], [1, 1, 1], [0, 1, 0, 0, 0, 0], [2, 0], [2, 1, 0, 0]])
    sub = sample_subsets(split, 3, subsets_per_doc=2.0, rng=0)
    # query 1 (one rating) and query 3 (2 documents < M) carry nothing and are skipped
    assert sub.n_skipped_queries == 2
    assert set(np.unique(sub.query)) == {0, 2, 4}
    for docs, ratings, q in zip(sub.docs, sub.ratings, sub.query, strict=True):
        lo, hi = split.group_ptr[q], split.group_ptr[q + 1]
        assert np.all((docs >= lo) & (docs < hi)) and np.unique(docs).size == 3
        assert set(ratings) == set(split.y[lo:hi])
        assert np.all(np.diff(ratings) <= 0) and np.array_equal(split.y[docs], ratings)
    for q, n_docs in [(0, 7), (2, 6), (4, 4)]:
        assert np.sum(sub.query == q) == round(2.0 * n_docs * 3)


def test_subsets_uniform_over_valid_subsets():
    """Chi-square goodness of fit against the uniform law on the 3-subsets of one query that
    hold all three ratings; false-failure rate 1e-3 (fixed seed)."""
    labels = np.array([0, 0, 0, 0, 1, 1, 2])
    split = _split([labels])
    valid = [
        s for s in itertools.combinations(range(7), 3) if set(labels[list(s)]) == {0, 1, 2}
    ]
    n = 8000
    sub = sample_subsets(split, 3, subsets_per_doc=n / 21, rng=12345)
    assert len(sub.docs) == n
    index = {s: k for k, s in enumerate(valid)}
    counts = np.bincount([index[tuple(sorted(d))] for d in sub.docs], minlength=len(valid))
    stat = ((counts - n / len(valid)) ** 2 / (n / len(valid))).sum()
    assert stat < chi2.ppf(1 - 1e-3, len(valid) - 1)


def test_sample_subsets_errors():
    split = _split([[0, 1, 2, 3], [0, 0, 0]])
    with pytest.raises(ValueError, match="4 distinct ratings but M = 3"):
        sample_subsets(split, 3)
    with pytest.raises(ValueError, match="at least 2"):
        sample_subsets(split, 1)
    with pytest.raises(ValueError, match="nothing to train on"):
        sample_subsets(_split([[1, 1], [0, 0, 0]]), 2)
    with pytest.raises(ValueError, match="RankingSplit"):
        sample_subsets(np.zeros((3, 2)), 2)


def test_ranking_predictive_matches_exact_marginals():
    """Rank-position frequencies of the draws (one theta repeated) against the enumerated
    marginals p(y[i] = j); chi-square per document, false-failure rate < 1e-3 overall."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4, 2))
    theta = np.array([0.8, -0.4])
    n = 4000
    y = ranking_predictive(np.tile(theta, (n, 1)), X, rng=1)
    W = np.outer(X @ theta, position_weights(4))
    probs = np.zeros((4, 4))
    for perm in itertools.permutations(range(4)):
        probs[np.arange(4), perm] += np.exp(W[np.arange(4), perm].sum())
    probs /= probs.sum(axis=1, keepdims=True)
    for i in range(4):
        counts = np.bincount(y[:, i], minlength=4)
        stat = ((counts - n * probs[i]) ** 2 / (n * probs[i])).sum()
        assert stat < chi2.ppf(1 - 2.5e-4, 3)
    with pytest.raises(ValueError, match="share n_features"):
        ranking_predictive(np.ones((3, 5)), X)


# ------------------------------------------------------------------ model and fitting


def _synthetic(n_queries, docs_per_query, theta, seed):
    """Queries whose labels are 3 quantile levels of a noisy linear score."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_queries * docs_per_query, theta.size))
    s = X @ theta + rng.normal(scale=0.5, size=X.shape[0])
    y = np.zeros(X.shape[0], dtype=np.int64)
    for q in range(n_queries):
        rows = slice(q * docs_per_query, (q + 1) * docs_per_query)
        y[rows] = np.digitize(s[rows], np.quantile(s[rows], [0.6, 0.85]))
    ptr = np.arange(n_queries + 1) * docs_per_query
    return RankingSplit(X=X, y=y, group_ptr=ptr, qids=np.arange(n_queries))


def test_model_logp_is_prior_plus_weak_label_sum():
    split = _synthetic(4, 8, np.array([1.0, -0.5, 0.2]), seed=1)
    sub = sample_subsets(split, 4, rng=0)
    model = rankmatch_model(split.X, sub, prior_sigma=2.0)
    theta = np.array([0.3, -0.2, 0.7])
    logp = model.compile_logp()({"theta": theta})
    prior = -0.5 * np.sum((theta / 2.0) ** 2) - 3 * np.log(2.0 * np.sqrt(2 * np.pi))
    s = split.X @ theta
    lik = sum(
        _enumerated_weak_label(s[d], r, position_weights(4))
        for d, r in zip(sub.docs, sub.ratings, strict=True)
    )
    np.testing.assert_allclose(logp, prior + lik, rtol=1e-9)


def test_whitened_model_has_the_same_posterior_density():
    """theta = loc + L z: logp(z) of the whitened model equals logp(theta) of the plain one
    (flat prior on z, constant Jacobian)."""
    split = _synthetic(4, 8, np.array([1.0, -0.5, 0.2]), seed=1)
    sub = sample_subsets(split, 3, rng=0)
    rng = np.random.default_rng(5)
    loc, L = rng.normal(size=3), rng.normal(size=(3, 3))
    plain = rankmatch_model(split.X, sub, prior_sigma=2.0).compile_logp()
    white = rankmatch_model(split.X, sub, prior_sigma=2.0, whitening=(loc, L)).compile_logp()
    for _ in range(3):
        z = rng.normal(size=3)
        np.testing.assert_allclose(white({"z": z}), plain({"theta": loc + L @ z}), rtol=1e-10)


def test_fit_map_recovers_direction_and_ranks_well():
    theta = np.array([1.0, -0.5, 0.25])
    train = _synthetic(30, 10, theta, seed=2)
    valid = _synthetic(15, 10, theta, seed=3)
    test = _synthetic(30, 10, theta, seed=4)
    rm = RankMatch(M=4, prior_sigmas=(1.0, 10.0), seed=0).fit_map(train, valid)
    assert set(rm.validation_) == {1.0, 10.0}
    cosine = rm.theta_ @ theta / np.linalg.norm(rm.theta_) / np.linalg.norm(theta)
    assert cosine > 0.95
    fitted = evaluate_ranking(rm.decision_function(test.X), test.y, test.group_ptr, ks=(3,))
    random = evaluate_ranking(np.zeros(test.n_docs), test.y, test.group_ptr, ks=(3,), ties="random",
                              seed=0)
    assert fitted["ndcg@3"] > random["ndcg@3"] + 0.3


@pytest.mark.slow
@pytest.mark.data
def test_mq2008_fold1_map(shared_data):
    """Fold 1 of MQ2008 at the prior scale validation picks there (3.0); measured test NDCG@5
    (LETOR-4.0 discount) 0.4558, ridge regression 0.4514."""
    from pm_perm.datasets.mq2008 import load_mq2008_fold

    train, _, test = load_mq2008_fold(1, shared_data)
    rm = RankMatch(M=3, prior_sigmas=(3.0,), seed=0).fit_map(train)
    m = evaluate_ranking(rm.decision_function(test.X), test.y, test.group_ptr, ks=(5,),
                         convention="letor4")
    assert m["ndcg@5"] > 0.44
    assert rm.timings_["map"] < 120
