"""pm_perm.learning_to_rank.baselines: AdaRank and RankBoost re-implementations, paired
bootstrap."""

import itertools

import numpy as np
import pytest

from pm_perm.learning_to_rank import baselines as lb
from pm_perm.learning_to_rank.data import RankingSplit


def _split(X, y, sizes):
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    return RankingSplit(np.asarray(X, float), np.asarray(y), ptr, np.arange(len(sizes)))


def _ndcg_brute(score, y, k):
    # definitional NDCG@k, standard discount, distinct scores
    order = np.argsort(-score)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = ((2.0 ** y[order][:k] - 1) * disc[: min(k, y.size)]).sum()
    idcg = ((2.0 ** np.sort(y)[::-1][:k] - 1) * disc[: min(k, y.size)]).sum()
    return dcg / idcg


def _random_split(rng, n_queries=6, n_features=3):
    sizes = rng.integers(3, 7, size=n_queries)
    y = np.concatenate([rng.permutation(np.r_[2, 1, np.zeros(s - 2, int)]) for s in sizes])
    X = rng.permutation(np.arange(sizes.sum() * n_features, dtype=float)).reshape(-1,
                                                                                   n_features)
    return _split(X, y, sizes)


def test_informative_queries_drops_queries_without_a_relevant_document():
    s = _split(np.arange(14, dtype=float).reshape(7, 2), [0, 1, 0, 0, 0, 2, 0], [2, 3, 2])
    kept = lb.informative_queries(s)
    np.testing.assert_array_equal(kept.qids, [0, 2])
    np.testing.assert_array_equal(kept.y, [0, 1, 2, 0])
    np.testing.assert_array_equal(kept.X[:, 0], [0, 2, 10, 12])
    with pytest.raises(ValueError, match="no query has a relevant document"):
        lb.informative_queries(_split(np.zeros((4, 1)), [0, 0, 0, 0], [2, 2]))


def test_adarank_first_round_matches_the_papers_formulas():
    rng = np.random.default_rng(3)
    s = _random_split(rng)
    k = 3
    path, chosen = lb.adarank_path(s, k, max_rounds=2)
    qs = [slice(s.group_ptr[q], s.group_ptr[q + 1]) for q in range(s.n_queries)]
    e = np.array([[_ndcg_brute(s.X[q, j], s.y[q], k) for q in qs]
                  for j in range(s.X.shape[1])])
    p = np.full(s.n_queries, 1 / s.n_queries)
    j = int(np.argmax(e @ p))
    alpha = 0.5 * np.log(p @ (1 + e[j]) / (p @ (1 - e[j])))
    assert chosen[0] == j
    np.testing.assert_allclose(path[0], alpha * np.eye(s.X.shape[1])[j])
    # round 2: queries re-weighted by exp(-E(f_1)), f_1 = alpha x_j ranks as x_j does
    p2 = np.exp(-e[j]) / np.exp(-e[j]).sum()
    j2 = int(np.argmax(e @ p2))
    alpha2 = 0.5 * np.log(p2 @ (1 + e[j2]) / (p2 @ (1 - e[j2])))
    assert chosen[1] == j2
    np.testing.assert_allclose(path[1] - path[0], alpha2 * np.eye(s.X.shape[1])[j2])


def test_adarank_finds_a_perfect_feature_and_validation_keeps_the_smallest_model():
    rng = np.random.default_rng(0)
    sizes = [5, 4, 6, 5]
    y = np.concatenate([rng.integers(0, 3, n) for n in sizes])
    y[[0, 5, 9, 15]] = 2  # every query has a relevant document
    X = np.column_stack([y + 0.1 * rng.random(y.size), rng.random(y.size)])
    s = _split(X, y, sizes)
    w, setting = lb.fit_adarank(s, s, max_rounds=5)
    assert setting["valid_ndcg@5"] == pytest.approx(1.0)
    assert setting["rounds"] == 1 and w[0] > 0 and w[1] == 0


def test_training_pairs_are_every_pair_with_different_labels_inside_a_query():
    rng = np.random.default_rng(1)
    s = _random_split(rng)
    hi, lo = lb.training_pairs(s)
    got = set(zip(hi.tolist(), lo.tolist(), strict=True))
    want = set()
    for q in range(s.n_queries):
        docs = range(s.group_ptr[q], s.group_ptr[q + 1])
        want |= {(a, b) for a, b in itertools.permutations(docs, 2) if s.y[a] > s.y[b]}
    assert got == want


def test_threshold_candidates_split_every_feature():
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.integers(0, 3, 50), rng.random(50), np.ones(50)]).astype(float)
    feat, cut = lb.threshold_candidates(X, 8)
    assert 2 not in feat  # a constant feature has no split
    assert np.unique(cut[feat == 0]).size == 2  # values 0, 1, 2: two cuts
    for j, c in zip(feat, cut, strict=True):
        above = X[:, j] > c
        assert above.any() and not above.all()


def test_rankboost_round_picks_the_largest_r_and_obeys_the_z_bound():
    rng = np.random.default_rng(4)
    s = _random_split(rng, n_queries=5, n_features=4)
    hi, lo = lb.training_pairs(s)
    feat, cut = lb.threshold_candidates(s.X, 5)
    H = (s.X[:, feat] > cut).astype(float)
    d = rng.random(hi.size)
    d /= d.sum()
    c, alpha, d_new = lb.rankboost_round(d, H, hi, lo)
    r = np.array([(d * (H[hi, m] - H[lo, m])).sum() for m in range(H.shape[1])])  # brute force
    assert abs(r[c]) == pytest.approx(np.abs(r).max())
    assert alpha == pytest.approx(0.5 * np.log((1 + r[c]) / (1 - r[c])))
    z = (d * np.exp(alpha * (H[lo, c] - H[hi, c]))).sum()
    assert z <= np.sqrt(1 - r[c] ** 2) + 1e-12
    np.testing.assert_allclose(d_new, d * np.exp(alpha * (H[lo, c] - H[hi, c])) / z)


def test_rankboost_scores_accumulate_the_rounds():
    X = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 3.0]])
    sc = lb.rankboost_scores(X, np.array([0, 1]), np.array([0.5, 2.0]), np.array([1.0, 0.25]))
    np.testing.assert_allclose(sc, [[0, 1, 1], [0, 1, 1.25]])


def test_paired_bootstrap_interval():
    diff = np.full((2, 40), 0.3)
    mean, lo, hi = lb.paired_bootstrap(diff, n_boot=200)
    np.testing.assert_allclose([mean, lo, hi], 0.3)
    rng = np.random.default_rng(5)
    diff = rng.normal(0.1, 1.0, size=2000)
    mean, lo, hi = lb.paired_bootstrap(diff, n_boot=2000)
    half = 1.645 / np.sqrt(2000)  # normal-theory 90% half-width
    assert lo < mean < hi
    assert abs((hi - lo) / 2 - half) < 0.15 * half


def _ridge_split(rng, n_queries, n_features):
    sizes = rng.integers(3, 9, size=n_queries)
    X = rng.normal(size=(sizes.sum(), n_features)) * rng.uniform(0.1, 10, size=n_features)
    X[:, 0] = 1.0  # a constant feature: only the intercept can use it
    y = np.clip(np.round(X[:, 1:3].sum(1) / 5 + rng.normal(size=sizes.sum())), 0, 2)
    return _split(X, y.astype(int), sizes)


@pytest.mark.parametrize("n_features", [5, 60])  # fewer and more features than documents
def test_fit_ridge_equals_scikit_learn_ridge(n_features):
    linear_model = pytest.importorskip("sklearn.linear_model",
                                       reason="scikit-learn's Ridge is the reference here")
    rng = np.random.default_rng(3)
    train = _ridge_split(rng, 8 if n_features > 40 else 30, n_features)
    for alpha in lb.RIDGE_ALPHAS:
        ours = lb.fit_ridge(train, train, alphas=(alpha,))
        ref = linear_model.Ridge(alpha=alpha).fit(train.X, train.y)
        assert ours.alpha == alpha
        np.testing.assert_allclose(ours.coef, ref.coef_, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ours.intercept, ref.intercept_, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ours.predict(train.X), ref.predict(train.X), rtol=1e-8,
                                   atol=1e-10)


def test_fit_ridge_chooses_the_penalty_of_best_validation_ndcg():
    from pm_perm.learning_to_rank.metrics import evaluate_ranking

    rng = np.random.default_rng(4)
    train, valid = _ridge_split(rng, 20, 6), _ridge_split(rng, 20, 6)
    scores = [evaluate_ranking(lb.fit_ridge(train, valid, alphas=(a,)).predict(valid.X),
                               valid.y, valid.group_ptr, ks=(5,))["ndcg@5"]
              for a in lb.RIDGE_ALPHAS]
    chosen = lb.fit_ridge(train, valid)
    assert chosen.alpha == lb.RIDGE_ALPHAS[int(np.argmax(scores))]  # the first of equal ones
    assert lb.fit_ridge(train).alpha == 1.0  # no validation split: the middle penalty
    with pytest.raises(ValueError, match="positive"):
        lb.fit_ridge(train, valid, alphas=(0.0,))
