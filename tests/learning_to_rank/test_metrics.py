import itertools
import math

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from pm_perm.learning_to_rank.metrics import (
    MAX_LABEL,
    average_precision,
    evaluate_ranking,
    ndcg_at_k,
    precision_at_k,
)

# ---------------------------------------------------------------- slow, definitional references


def _ref_query(ranked, k, letor4=False):
    """NDCG@k, P@k, AP of ONE query from its labels in ranked order, straight from definitions."""
    ranked = [int(r) for r in ranked]
    n = len(ranked)

    def disc(r):  # r is the 1-based rank
        return 1.0 / math.log2(max(r, 2)) if letor4 else 1.0 / math.log2(1 + r)

    def dcg(labs):
        return sum((2**lab - 1) * disc(r) for r, lab in enumerate(labs[:k], start=1))

    ideal = dcg(sorted(ranked, reverse=True))
    ndcg = dcg(ranked) / ideal if ideal > 0 else 0.0
    if letor4 and n < k:
        ndcg = 0.0
    p = sum(lab >= 1 for lab in ranked[:k]) / k
    hits, ap = 0, 0.0
    for r, lab in enumerate(ranked, start=1):
        if lab >= 1:
            hits += 1
            ap += hits / r
    ap = ap / hits if hits else 0.0
    return ndcg, p, ap


def _ref_all(scores, labels, ptr, k, letor4=False):
    """Per-query reference values, ties in input order (Python's sort is stable)."""
    out = []
    for a, b in itertools.pairwise(ptr):
        order = sorted(range(a, b), key=lambda i: -scores[i])
        out.append(_ref_query([labels[i] for i in order], k, letor4))
    return np.array(out).T  # (3, Q)


def _random_problem(rng, n_queries, max_docs, min_docs=1, n_levels=3, distinct=True):
    sizes = rng.integers(min_docs, max_docs + 1, size=n_queries)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    labels = rng.integers(0, n_levels, size=ptr[-1])
    scores = rng.normal(size=ptr[-1]) if distinct else rng.integers(0, 3, size=ptr[-1]) * 1.0
    return scores, labels, ptr


# ---------------------------------------------------------------- hand-worked cases

# one query; scores put the labels in ranked order [0, 2, 1]
HAND_SCORES = np.array([1.0, 0.0, 2.0])
HAND_LABELS = np.array([2, 1, 0])
HAND_PTR = np.array([0, 3])


def test_ndcg_hand_worked():
    dcg3 = 0 / 1 + 3 / math.log2(3) + 1 / math.log2(4)
    idcg3 = 3 / 1 + 1 / math.log2(3) + 0
    got = ndcg_at_k(HAND_SCORES, HAND_LABELS, HAND_PTR, 3)
    assert got.shape == (1,)
    assert got[0] == pytest.approx(dcg3 / idcg3, rel=1e-14)  # 0.6590
    assert ndcg_at_k(HAND_SCORES, HAND_LABELS, HAND_PTR, 1)[0] == 0.0
    dcg2, idcg2 = 3 / math.log2(3), 3 + 1 / math.log2(3)
    assert ndcg_at_k(HAND_SCORES, HAND_LABELS, HAND_PTR, 2)[0] == pytest.approx(dcg2 / idcg2)
    # k beyond the query length: scored on all documents
    assert ndcg_at_k(HAND_SCORES, HAND_LABELS, HAND_PTR, 10)[0] == pytest.approx(dcg3 / idcg3)


def test_ndcg_letor4_convention_hand_worked():
    # LETOR 4.0 script: ranks 1 and 2 undiscounted, rank r >= 3 divided by log2(r)
    dcg3 = 0 + 3 + 1 / math.log2(3)
    idcg3 = 3 + 1 + 0
    got = ndcg_at_k(HAND_SCORES, HAND_LABELS, HAND_PTR, 3, convention="letor4")
    assert got[0] == pytest.approx(dcg3 / idcg3, rel=1e-14)  # 0.9077
    # a query shorter than k scores 0 under the script's rule
    assert ndcg_at_k(HAND_SCORES, HAND_LABELS, HAND_PTR, 4, convention="letor4")[0] == 0.0


def test_precision_and_ap_hand_worked():
    # ranked relevance [1, 0, 1, 0, 1] (labels 2, 0, 1, 0, 1)
    labels = np.array([2, 0, 1, 0, 1])
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    ptr = np.array([0, 5])
    p = [precision_at_k(scores, labels, ptr, k)[0] for k in (1, 2, 3, 5, 10)]
    assert p == pytest.approx([1, 1 / 2, 2 / 3, 3 / 5, 3 / 10])  # P@10 divides by 10
    ap = average_precision(scores, labels, ptr)[0]
    assert ap == pytest.approx((1 / 1 + 2 / 3 + 3 / 5) / 3, rel=1e-14)  # 0.7556
    # a higher threshold: only the label-2 document is relevant
    assert average_precision(scores, labels, ptr, relevance_threshold=2)[0] == 1.0
    assert precision_at_k(scores, labels, ptr, 2, relevance_threshold=2)[0] == 0.5


def test_map_over_queries_hand_worked():
    # query 0: ranked relevance [0, 1, 1] -> AP = (1/2 + 2/3) / 2; query 1: [1, 0] -> AP = 1
    scores = np.array([3.0, 2.0, 1.0, 0.5, 0.2])
    labels = np.array([0, 1, 2, 1, 0])
    ptr = np.array([0, 3, 5])
    m = evaluate_ranking(scores, labels, ptr, ks=(1, 2))
    assert m["map"] == pytest.approx(((1 / 2 + 2 / 3) / 2 + 1) / 2)
    assert m["p@1"] == pytest.approx(0.5)
    assert m["p@2"] == pytest.approx(0.5)
    assert m["ndcg@1"] == pytest.approx(0.5)
    assert isinstance(m["map"], float)


# ---------------------------------------------------------------- queries with no relevant document


@pytest.mark.parametrize(("no_relevant", "fill"), [("zero", 0.0), ("one", 1.0), ("skip", np.nan)])
def test_no_relevant_conventions(no_relevant, fill):
    scores = np.array([1.0, 2.0, 3.0, 1.0, 2.0])
    labels = np.array([0, 0, 0, 1, 0])  # query 0 has no relevant document
    ptr = np.array([0, 3, 5])
    kw = {"no_relevant": no_relevant}
    nd = ndcg_at_k(scores, labels, ptr, 2, **kw)
    ap = average_precision(scores, labels, ptr, **kw)
    p = precision_at_k(scores, labels, ptr, 2, **kw)
    np.testing.assert_equal(nd[0], fill)
    np.testing.assert_equal(ap[0], fill)
    np.testing.assert_equal(p[0], np.nan if no_relevant == "skip" else 0.0)
    assert nd[1] == pytest.approx(1 / math.log2(3))  # the relevant document is at rank 2
    assert ap[1] == 0.5 and p[1] == 0.5
    m = evaluate_ranking(scores, labels, ptr, ks=(2,), **kw)
    if no_relevant == "skip":  # the mean runs over query 1 only
        assert m["ndcg@2"] == pytest.approx(nd[1]) and m["map"] == 0.5 and m["p@2"] == 0.5
    else:
        assert m["ndcg@2"] == pytest.approx((fill + nd[1]) / 2)
        assert m["map"] == pytest.approx((fill + 0.5) / 2)
        assert m["p@2"] == pytest.approx(0.25)


def test_skip_with_no_relevant_query_at_all_is_an_error():
    with pytest.raises(ValueError, match="no query has a relevant document"):
        evaluate_ranking([1.0, 2.0], [0, 0], [0, 2], no_relevant="skip")
    with pytest.raises(ValueError, match="relevance_threshold"):
        evaluate_ranking([1.0, 2.0], [0, 1], [0, 2], no_relevant="skip", relevance_threshold=2)


# ---------------------------------------------------------------- ties


def test_tie_handling_on_a_constant_scorer():
    labels = np.array([2, 0, 1])
    ptr = np.array([0, 3])
    scores = np.zeros(3)
    worst = _ref_query([0, 1, 2], 3)
    as_given = _ref_query([2, 0, 1], 3)
    for got, ref in zip(
        (
            ndcg_at_k(scores, labels, ptr, 3)[0],
            precision_at_k(scores, labels, ptr, 1)[0],
            average_precision(scores, labels, ptr)[0],
        ),
        (worst[0], 0.0, worst[2]),
        strict=True,
    ):
        assert got == pytest.approx(ref)
    assert ndcg_at_k(scores, labels, ptr, 3, ties="stable")[0] == pytest.approx(as_given[0])


def _all_tie_orders(scores, labels, ptr):
    """Ranked label lists of ONE query for every ordering consistent with the scores."""
    labs = labels[ptr[0] : ptr[1]]
    s = scores[ptr[0] : ptr[1]]
    out = []
    for perm in itertools.permutations(range(len(labs))):
        if all(s[perm[i]] >= s[perm[i + 1]] for i in range(len(perm) - 1)):
            out.append([labs[i] for i in perm])
    return out


@pytest.mark.parametrize("seed", range(5))
def test_pessimistic_is_the_minimum_over_tie_orders(seed):
    rng = np.random.default_rng(seed)
    scores, labels, ptr = _random_problem(rng, 8, 6, min_docs=2, distinct=False)
    for q, (a, b) in enumerate(itertools.pairwise(ptr)):
        orders = _all_tie_orders(scores, labels, [a, b])
        for k in (1, 3):
            refs = np.array([_ref_query(o, k) for o in orders])
            assert ndcg_at_k(scores, labels, ptr, k)[q] == pytest.approx(refs[:, 0].min())
            assert precision_at_k(scores, labels, ptr, k)[q] == pytest.approx(refs[:, 1].min())
        assert average_precision(scores, labels, ptr)[q] == pytest.approx(refs[:, 2].min())


def test_random_ties_are_seeded_and_average_to_sklearn_tie_averaged_ndcg():
    labels = np.array([2, 0, 1, 0, 1])
    scores = np.array([1.0, 1.0, 1.0, 0.0, 0.0])
    ptr = np.array([0, 5])
    draws = np.broadcast_to(scores, (20000, 5))
    a = ndcg_at_k(draws, labels, ptr, 3, ties="random", seed=7)
    b = ndcg_at_k(draws, labels, ptr, 3, ties="random", seed=7)
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) > 1
    expected = ndcg_score([np.exp2(labels) - 1], [scores], k=3, ignore_ties=False)
    # per-draw values lie in [0, 1]: standard error <= 0.5 / sqrt(20000) = 0.0035, so a 0.02
    # tolerance is > 5 standard errors (false-failure rate < 1e-6; and the seed is fixed)
    assert a.mean() == pytest.approx(expected, abs=0.02)
    # exact: the average of the stable rule over all input orders is sklearn's tie average
    vals = [
        ndcg_at_k(scores[[*p, 3, 4]], labels[[*p, 3, 4]], ptr, 3, ties="stable")[0]
        for p in itertools.permutations(range(3))  # ranks 4-5 do not count at k = 3
    ]
    assert np.mean(vals) == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------- against references


@pytest.mark.parametrize("seed", range(3))
def test_matches_definitional_reference(seed):
    rng = np.random.default_rng(seed)
    scores, labels, ptr = _random_problem(rng, 60, 12)
    for k in (1, 3, 5, 10):
        ref = _ref_all(scores, labels, ptr, k)
        np.testing.assert_allclose(ndcg_at_k(scores, labels, ptr, k), ref[0], rtol=1e-12)
        np.testing.assert_allclose(precision_at_k(scores, labels, ptr, k), ref[1], rtol=1e-12)
    np.testing.assert_allclose(average_precision(scores, labels, ptr), ref[2], rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_letor4_convention_matches_the_evaluation_script_rules(seed):
    # the reference is the LETOR 4.0 script's logic: stable sort by score, its discount, and
    # NDCG@k = 0 for queries shorter than k; ties are frequent here
    rng = np.random.default_rng(seed)
    scores, labels, ptr = _random_problem(rng, 60, 12, distinct=False)
    for k in (1, 3, 5, 10):
        ref = _ref_all(scores, labels, ptr, k, letor4=True)
        got = ndcg_at_k(scores, labels, ptr, k, ties="stable", convention="letor4")
        np.testing.assert_allclose(got, ref[0], rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_sklearn_ndcg_score(seed):
    # sklearn uses the label itself as gain: pass 2^label - 1; it scores all-zero queries 0 and
    # scores queries shorter than k on all their documents, as our defaults do
    rng = np.random.default_rng(seed)
    scores, labels, ptr = _random_problem(rng, 40, 15, min_docs=2, n_levels=5)
    for k in (1, 3, 5, 10):
        ours = ndcg_at_k(scores, labels, ptr, k)
        theirs = [
            ndcg_score([np.exp2(labels[a:b]) - 1], [scores[a:b]], k=k)
            for a, b in itertools.pairwise(ptr)
        ]
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


def test_batch_axes_match_a_loop():
    rng = np.random.default_rng(3)
    _, labels, ptr = _random_problem(rng, 30, 10)
    draws = rng.normal(size=(2, 3, labels.size))
    nd = ndcg_at_k(draws, labels, ptr, 5)
    ap = average_precision(draws, labels, ptr)
    p = precision_at_k(draws, labels, ptr, 5)
    assert nd.shape == ap.shape == p.shape == (2, 3, 30)
    m = evaluate_ranking(draws, labels, ptr, ks=(5,))
    assert m["ndcg@5"].shape == (2, 3)
    for i, j in itertools.product(range(2), range(3)):
        np.testing.assert_array_equal(nd[i, j], ndcg_at_k(draws[i, j], labels, ptr, 5))
        np.testing.assert_array_equal(ap[i, j], average_precision(draws[i, j], labels, ptr))
        np.testing.assert_array_equal(p[i, j], precision_at_k(draws[i, j], labels, ptr, 5))
        assert m["ndcg@5"][i, j] == pytest.approx(nd[i, j].mean())
        assert m["map"][i, j] == pytest.approx(ap[i, j].mean())


def test_evaluate_matches_per_query_functions():
    rng = np.random.default_rng(4)
    scores, labels, ptr = _random_problem(rng, 50, 10)
    m = evaluate_ranking(scores, labels, ptr, no_relevant="skip", convention="letor4")
    assert len(m) == 21
    for k in range(1, 11):
        nd = ndcg_at_k(scores, labels, ptr, k, no_relevant="skip", convention="letor4")
        assert m[f"ndcg@{k}"] == pytest.approx(np.nanmean(nd))
        p = precision_at_k(scores, labels, ptr, k, no_relevant="skip")
        assert m[f"p@{k}"] == pytest.approx(np.nanmean(p))
    ap = average_precision(scores, labels, ptr, no_relevant="skip")
    assert m["map"] == pytest.approx(np.nanmean(ap))


def test_single_document_queries_and_float_labels():
    # single-document queries are legal for metrics; integral float labels are accepted
    got = ndcg_at_k([0.3, 1.0, 2.0], np.array([1.0, 0.0, 2.0]), [0, 1, 3], 5)
    np.testing.assert_allclose(got, [1.0, 1.0])


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scores": [1.0, 2.0]}, r"scores must have shape \(\.\.\., 3\)"),
        ({"scores": [1.0, np.nan, 2.0]}, "NaN or infinite"),
        ({"labels": [0, -1, 2]}, "non-negative"),
        ({"labels": [0, 1.5, 2]}, "integer relevance grades"),
        ({"labels": [[0, 1, 2]]}, "1-D"),
        ({"group_ptr": [1, 3]}, "start at 0 and end at N = 3"),
        ({"group_ptr": [0, 2]}, "start at 0 and end at N = 3"),
        ({"group_ptr": [0, 2, 2, 3]}, "strictly increasing"),
        ({"group_ptr": [0.0, 3.0]}, "integer array"),
        ({"k": 0}, "positive integer"),
        ({"k": True}, "positive integer"),
        ({"k": 2.0}, "positive integer"),
        ({"ties": "optimistic"}, "ties must be one of"),
        ({"no_relevant": "nan"}, "no_relevant must be one of"),
        ({"convention": "letor3"}, "convention must be one of"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs, match):
    args = {"scores": [1.0, 2.0, 3.0], "labels": [0, 1, 2], "group_ptr": [0, 3], "k": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ndcg_at_k(args.pop("scores"), args.pop("labels"), args.pop("group_ptr"), **args)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="relevance_threshold"):
        precision_at_k([1.0, 2.0], [0, 1], [0, 2], 1, relevance_threshold=0)
    with pytest.raises(ValueError, match="relevance_threshold"):
        average_precision([1.0, 2.0], [0, 1], [0, 2], relevance_threshold=np.nan)
    with pytest.raises(ValueError, match="ks must be a sequence"):
        evaluate_ranking([1.0, 2.0], [0, 1], [0, 2], ks=5)
    with pytest.raises(ValueError, match="positive integer"):
        evaluate_ranking([1.0, 2.0], [0, 1], [0, 2], ks=(1, 0))


@pytest.mark.parametrize(
    "labels",
    [
        [1100, 1099, 0],  # 2^label overflows float64: NDCG was inf / inf = NaN
        [MAX_LABEL + 1, 0, 0],
        np.array([2**63 + 5, 0, 0], dtype=np.uint64),  # wrapped to a negative int64 before
        [2000.0, 0.0, 0.0],
    ],
)
def test_labels_above_max_label_are_refused(labels):
    for metric in (
        lambda: ndcg_at_k([3.0, 2.0, 1.0], labels, [0, 3], k=2),
        lambda: evaluate_ranking([3.0, 2.0, 1.0], labels, [0, 3], ks=(1,)),
        lambda: average_precision([3.0, 2.0, 1.0], labels, [0, 3]),
    ):
        with pytest.raises(ValueError, match=r"labels: relevance label .* MAX_LABEL = 100"):
            metric()


def test_largest_label_gives_finite_ndcg():
    labels = np.full(1000, MAX_LABEL)
    labels[::2] = MAX_LABEL - 1
    ndcg = ndcg_at_k(np.arange(1000.0), labels, [0, 500, 1000], k=1000)
    assert np.all(np.isfinite(ndcg)) and np.all((ndcg > 0) & (ndcg <= 1))
    assert ndcg_at_k([1.0, 0.0], [MAX_LABEL, 0], [0, 2], k=1)[0] == 1.0
