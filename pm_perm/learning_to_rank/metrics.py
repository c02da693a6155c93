"""Ranking metrics over many queries at once: NDCG@k, Precision@k, average precision, MAP.

All functions work on flat arrays with query boundaries, the layout of
:class:`pm_perm.learning_to_rank.data.RankingSplit`:

* ``scores`` (..., N): one score per document, higher ranks first. Leading axes are batch axes
  (for instance posterior draws); every batch entry is evaluated against the same labels.
* ``labels`` (N,): graded relevance, non-negative integers up to ``MAX_LABEL`` (100).
* ``group_ptr`` (Q + 1,): query ``q`` owns documents ``group_ptr[q]:group_ptr[q + 1]``;
  ``group_ptr[0] == 0``, ``group_ptr[-1] == N``, every query has at least one document.

Per-query functions return shape (..., Q); :func:`evaluate_ranking` returns means over queries.
Cost: one ``np.lexsort`` of the batch, O(B N log N), then O(B N) per metric; no Python loop over
queries, so thousands of queries times thousands of draws take seconds.

Conventions (the same in every function):

Gain and discount
    ``DCG@k = sum_{r <= k} (2^label_r - 1) / log2(1 + r)`` with ``r`` the 1-based rank;
    ``NDCG@k = DCG@k / IDCG@k``, the ideal DCG of the query's labels sorted in decreasing order.
    A query with fewer than ``k`` documents is scored on all of them (as
    ``sklearn.metrics.ndcg_score`` does). ``convention="letor4"`` reproduces LETOR 4.0's
    ``Eval-Score-4.0.pl`` instead: discount ``1 / log2(max(r, 2))`` (ranks 1 and 2 both
    undiscounted) and NDCG@k = 0 for a query with fewer than ``k`` documents. On MQ2008 every
    query has at least 5 documents, so only the discount differs at k <= 5; the second rule is
    why the script's NDCG@10 on MQ2008 is about .23.
Relevance (P@k, AP)
    A document is relevant when ``label >= relevance_threshold`` (default 1, as in LETOR 4.0).
    ``P@k`` divides by ``k`` even when the query has fewer documents (missing ranks count as
    irrelevant, as in the LETOR script and trec_eval). ``AP`` averages the precision at the rank
    of each relevant document over all relevant documents of the query; ``MAP`` is its mean.
Queries with no relevant document (``no_relevant``)
    NDCG and AP are 0/0 there. ``"zero"`` (default) scores them 0 and keeps them in the mean,
    like the LETOR 4.0 script and the published LETOR tables; ``"one"`` scores them 1 (any
    ranking is ideal); ``"skip"`` returns NaN and leaves them out of the means. ``P@k`` of such a
    query is 0 under ``"zero"`` and ``"one"`` (0 is its best possible value) and NaN under
    ``"skip"``.
Ties (``ties``)
    Documents with equal scores are ordered ``"pessimistic"`` (default: lower labels first, so
    a constant scorer gets the worst value and cannot gain from ties), ``"random"`` (uniformly,
    reproducible with ``seed``; its expectation is the tie-averaged value of
    ``sklearn.metrics.ndcg_score``), or ``"stable"`` (input order, as the LETOR script does;
    optimistic for files sorted by label). There is deliberately no optimistic option.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["average_precision", "evaluate_ranking", "ndcg_at_k", "precision_at_k"]

#: Largest relevance grade: NDCG gains 2^label - 1 (and their sums) must stay finite in float64.
MAX_LABEL = 100

_TIES = ("pessimistic", "random", "stable")
_NO_RELEVANT = ("zero", "one", "skip")
_CONVENTIONS = ("standard", "letor4")


class _Ranked:
    """Labels in ranked order for a batch of scores, plus per-query bookkeeping."""

    def __init__(self, scores, labels, group_ptr, ties, seed):
        labels = _as_labels(labels)
        n = labels.shape[0]
        self.group_ptr = _as_group_ptr(group_ptr, n)
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim == 0 or scores.shape[-1] != n:
            raise ValueError(
                f"scores must have shape (..., {n}) to match labels (N = {n}); "
                f"got shape {scores.shape}"
            )
        if not np.all(np.isfinite(scores)):
            raise ValueError("scores contain NaN or infinite values; rankings are undefined")
        if ties not in _TIES:
            raise ValueError(f"ties must be one of {_TIES}, got {ties!r}")
        self.labels = labels
        self.sizes = np.diff(self.group_ptr)
        self.starts = self.group_ptr[:-1]
        query = np.repeat(np.arange(self.sizes.size), self.sizes)
        self.rank = np.arange(n) - self.group_ptr[query] + 1  # 1-based rank within its query
        # Tie-breaking by a first order of the documents, then two stable sorts: by score, then
        # by query (a radix sort on small integers); faster than a three-key np.lexsort.
        if ties == "pessimistic":
            first = np.lexsort((labels, query))  # within each query, lower labels first
        elif ties == "random":
            first = np.random.default_rng(seed).permuted(
                np.broadcast_to(np.arange(n), scores.shape), axis=-1
            )
        else:
            first = np.arange(n)
        first = np.broadcast_to(first, scores.shape)
        by_score = np.take_along_axis(
            first, np.argsort(-np.take_along_axis(scores, first, -1), axis=-1, kind="stable"), -1
        )
        small_query = query.astype(np.min_scalar_type(max(self.sizes.size - 1, 0)))
        order = np.take_along_axis(
            by_score, np.argsort(small_query[by_score], axis=-1, kind="stable"), -1
        )
        self.ranked = labels[order]

    def per_query_sum(self, values):
        return np.add.reduceat(values, self.starts, axis=-1)

    def n_relevant(self, threshold):
        return self.per_query_sum(self.labels >= threshold)


def label_above_cap(value, where: str = "") -> str:
    """The message for a relevance grade above ``MAX_LABEL`` (``where``: its position, e.g.
    ``" (row 3)"``), shared by the metrics, :class:`pm_perm.learning_to_rank.data.RankingSplit` and
    the
    LETOR reader, which prefix what they were given."""
    return (f"relevance label {value}{where} is above the largest grade pm_perm supports, "
            f"MAX_LABEL = {MAX_LABEL} (NDCG gains 2^label - 1 overflow float64); map the grades "
            "to 0..K, keeping their order")


def _as_labels(labels):
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind != "f" or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError("labels must be integer relevance grades (0, 1, 2, ...)")
    if np.any(arr < 0):
        raise ValueError("labels must be non-negative relevance grades (0, 1, 2, ...)")
    if arr.max() > MAX_LABEL:
        raise ValueError(
            "labels: " + label_above_cap(arr.max(), f" (position {int(np.argmax(arr))})"))
    return arr.astype(np.int64)


def _as_group_ptr(group_ptr, n):
    ptr = np.asarray(group_ptr)
    if ptr.ndim != 1 or ptr.size < 2 or ptr.dtype.kind not in "iu":
        raise ValueError(
            "group_ptr must be a 1-D integer array of query boundaries [0, ..., N] with at least "
            "one query (see RankingSplit.group_ptr)"
        )
    ptr = ptr.astype(np.int64)
    if ptr[0] != 0 or ptr[-1] != n:
        raise ValueError(
            f"group_ptr must start at 0 and end at N = {n} (the number of labels); "
            f"got {ptr[0]} ... {ptr[-1]}"
        )
    if np.any(np.diff(ptr) <= 0):
        raise ValueError("group_ptr must be strictly increasing: every query needs a document")
    return ptr


def _check_k(k):
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _fill_no_relevant(values, has_relevant, no_relevant):
    fill = {"zero": 0.0, "one": 1.0, "skip": np.nan}[no_relevant]
    return np.where(has_relevant, values, fill)


def _ideal_dcg(ranked, k, convention):
    """IDCG@k per query, from labels sorted in decreasing order within each query."""
    query = np.repeat(np.arange(ranked.sizes.size), ranked.sizes)
    ideal = ranked.labels[np.lexsort((-ranked.labels, query))]
    return _dcg(ranked, ideal, k, convention)


def _dcg(ranked, ordered_labels, k, convention):
    if convention == "letor4":
        discount = 1.0 / np.log2(np.maximum(ranked.rank, 2))
    else:
        discount = 1.0 / np.log2(1.0 + ranked.rank)
    weight = np.where(ranked.rank <= k, discount, 0.0)
    return ranked.per_query_sum((np.exp2(ordered_labels) - 1.0) * weight)


def _ndcg(ranked, k, no_relevant, convention):
    idcg = _ideal_dcg(ranked, k, convention)
    has_relevant = idcg > 0
    value = _dcg(ranked, ranked.ranked, k, convention) / np.where(has_relevant, idcg, 1.0)
    if convention == "letor4":
        value = np.where(ranked.sizes >= k, value, 0.0)
    return _fill_no_relevant(value, has_relevant, no_relevant)


def _precision(ranked, k, threshold, no_relevant):
    hits = (ranked.ranked >= threshold) & (ranked.rank <= k)
    value = ranked.per_query_sum(hits) / k
    fill = "skip" if no_relevant == "skip" else "zero"
    return _fill_no_relevant(value, ranked.n_relevant(threshold) > 0, fill)


def _average_precision(ranked, threshold, no_relevant):
    relevant = ranked.ranked >= threshold
    cum = np.cumsum(relevant, axis=-1)
    # hits up to and including each rank, within its own query
    before = np.concatenate([np.zeros_like(cum[..., :1]), cum[..., :-1]], axis=-1)
    within = cum - np.repeat(before[..., ranked.starts], ranked.sizes, axis=-1)
    n_rel = ranked.n_relevant(threshold)
    total = ranked.per_query_sum(np.where(relevant, within / ranked.rank, 0.0))
    value = total / np.maximum(n_rel, 1)
    return _fill_no_relevant(value, n_rel > 0, no_relevant)


def _check_threshold(relevance_threshold):
    if not np.isfinite(relevance_threshold) or relevance_threshold <= 0:
        raise ValueError(
            f"relevance_threshold must be a positive number, got {relevance_threshold!r}"
        )


def ndcg_at_k(scores, labels, group_ptr, k, *, no_relevant="zero", ties="pessimistic", seed=None,
              convention="standard"):
    """Per-query NDCG@k with gain ``2^label - 1`` and discount ``1 / log2(1 + rank)``.

    Parameters
    ----------
    scores : array_like of float, shape (..., N)
        Document scores, higher first; leading axes are batch axes (e.g. posterior draws).
    labels : array_like of int, shape (N,)
        Non-negative integer relevance grades, at most ``MAX_LABEL`` = 100 (larger grades
        raise a ``ValueError``: their gains ``2^label - 1`` overflow float64).
    group_ptr : array_like of int, shape (Q + 1,)
        Query boundaries: query ``q`` is documents ``group_ptr[q]:group_ptr[q + 1]``.
    k : int
        Cut-off, ``k >= 1``.
    no_relevant : {"zero", "one", "skip"}, default "zero"
        Value of a query whose labels are all 0 (0, 1 or NaN); see the module docstring.
    ties : {"pessimistic", "random", "stable"}, default "pessimistic"
        Order of documents with equal scores; see the module docstring.
    seed : int or numpy.random.Generator, optional
        Randomness for ``ties="random"``.
    convention : {"standard", "letor4"}, default "standard"
        ``"letor4"`` uses the discount and short-query rule of LETOR 4.0's evaluation script.

    Returns
    -------
    ndarray of float64, shape (..., Q)
        NDCG@k of each query (NaN for skipped queries).

    Notes
    -----
    Cost O(B N log N) for the sort and O(B N) after it, for B batch entries.

    Examples
    --------
    >>> import numpy as np
    >>> from pm_perm.learning_to_rank.metrics import ndcg_at_k
    >>> ndcg_at_k([3.0, 2.0, 1.0, 0.5, 0.2], [0, 1, 2, 1, 0], [0, 3, 5], k=2).round(4)
    array([0.1738, 1.    ])
    """
    k = _check_k(k)
    _check_choice("no_relevant", no_relevant, _NO_RELEVANT)
    _check_choice("convention", convention, _CONVENTIONS)
    return _ndcg(_Ranked(scores, labels, group_ptr, ties, seed), k, no_relevant, convention)


def precision_at_k(scores, labels, group_ptr, k, *, relevance_threshold=1, no_relevant="zero",
                   ties="pessimistic", seed=None):
    """Per-query Precision@k: relevant documents among the top ``k``, divided by ``k``.

    Parameters
    ----------
    scores, labels, group_ptr, k, ties, seed
        As in :func:`ndcg_at_k`.
    relevance_threshold : int, default 1
        A document is relevant when ``label >= relevance_threshold``.
    no_relevant : {"zero", "one", "skip"}, default "zero"
        ``"skip"`` gives NaN for queries without a relevant document; under ``"zero"`` and
        ``"one"`` their P@k is 0, its only possible value.

    Returns
    -------
    ndarray of float64, shape (..., Q)
        P@k of each query. A query with fewer than ``k`` documents is still divided by ``k``.

    Examples
    --------
    >>> from pm_perm.learning_to_rank.metrics import precision_at_k
    >>> precision_at_k([3.0, 2.0, 1.0, 0.5, 0.2], [0, 1, 2, 1, 0], [0, 3, 5], k=2)
    array([0.5, 0.5])
    """
    k = _check_k(k)
    _check_choice("no_relevant", no_relevant, _NO_RELEVANT)
    _check_threshold(relevance_threshold)
    ranked = _Ranked(scores, labels, group_ptr, ties, seed)
    return _precision(ranked, k, relevance_threshold, no_relevant)


def average_precision(scores, labels, group_ptr, *, relevance_threshold=1, no_relevant="zero",
                      ties="pessimistic", seed=None):
    """Per-query average precision; its mean over queries is MAP.

    ``AP = (1 / R) sum over relevant documents d of P@rank(d)``, with ``R`` the number of
    relevant documents of the query (``label >= relevance_threshold``).

    Parameters
    ----------
    scores, labels, group_ptr, ties, seed
        As in :func:`ndcg_at_k`.
    relevance_threshold : int, default 1
        A document is relevant when ``label >= relevance_threshold``.
    no_relevant : {"zero", "one", "skip"}, default "zero"
        Value of a query with ``R = 0`` (0, 1 or NaN).

    Returns
    -------
    ndarray of float64, shape (..., Q)

    Examples
    --------
    >>> from pm_perm.learning_to_rank.metrics import average_precision
    >>> average_precision([3.0, 2.0, 1.0, 0.5, 0.2], [0, 1, 2, 1, 0], [0, 3, 5]).round(4)
    array([0.5833, 1.    ])
    """
    _check_choice("no_relevant", no_relevant, _NO_RELEVANT)
    _check_threshold(relevance_threshold)
    ranked = _Ranked(scores, labels, group_ptr, ties, seed)
    return _average_precision(ranked, relevance_threshold, no_relevant)


def evaluate_ranking(scores, labels, group_ptr, ks=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), *,
                     relevance_threshold=1, no_relevant="zero", ties="pessimistic", seed=None,
                     convention="standard"):
    """Mean NDCG@k and P@k for each ``k`` in ``ks``, and MAP, from a single sort.

    Parameters
    ----------
    scores, labels, group_ptr, ties, seed, convention
        As in :func:`ndcg_at_k`.
    ks : sequence of int, default 1..10
        Cut-offs.
    relevance_threshold : int, default 1
        For P@k and MAP, as in :func:`precision_at_k`.
    no_relevant : {"zero", "one", "skip"}, default "zero"
        As in the per-query functions; with ``"skip"`` the means are over the queries that
        have a relevant document.

    Returns
    -------
    dict of str to float or ndarray
        Keys ``"ndcg@k"`` and ``"p@k"`` for each ``k``, and ``"map"``; each value is a float,
        or an array of the batch shape ``scores.shape[:-1]``.

    Raises
    ------
    ValueError
        With ``no_relevant="skip"`` when no query has a relevant document; labels that are
        not integers in ``0..MAX_LABEL``, and every other bad argument.

    Examples
    --------
    >>> from pm_perm.learning_to_rank.metrics import evaluate_ranking
    >>> m = evaluate_ranking([3.0, 2.0, 1.0, 0.5, 0.2], [0, 1, 2, 1, 0], [0, 3, 5], ks=(1, 3))
    >>> sorted(m)
    ['map', 'ndcg@1', 'ndcg@3', 'p@1', 'p@3']
    >>> round(m["map"], 4)
    0.7917
    """
    if isinstance(ks, int | np.integer) or not isinstance(ks, Sequence | np.ndarray):
        raise ValueError(f"ks must be a sequence of positive integers, got {ks!r}")
    ks = [_check_k(k) for k in ks]
    _check_choice("no_relevant", no_relevant, _NO_RELEVANT)
    _check_choice("convention", convention, _CONVENTIONS)
    _check_threshold(relevance_threshold)
    ranked = _Ranked(scores, labels, group_ptr, ties, seed)
    if no_relevant == "skip":
        if not np.any(ranked.n_relevant(1) > 0):
            raise ValueError(
                "no query has a relevant document, so every query is skipped under "
                "no_relevant='skip'; use no_relevant='zero' or 'one'"
            )
        if not np.any(ranked.n_relevant(relevance_threshold) > 0):
            raise ValueError(
                f"no query has a document with label >= relevance_threshold = "
                f"{relevance_threshold}, so P@k and MAP skip every query; lower the threshold "
                "or use no_relevant='zero'"
            )
    out = {}
    for k in ks:
        out[f"ndcg@{k}"] = _query_mean(_ndcg(ranked, k, no_relevant, convention))
    for k in ks:
        out[f"p@{k}"] = _query_mean(_precision(ranked, k, relevance_threshold, no_relevant))
    out["map"] = _query_mean(_average_precision(ranked, relevance_threshold, no_relevant))
    return out


def _query_mean(values):
    """Mean over the query axis, leaving out NaN (skipped) queries; float for no batch."""
    kept = ~np.isnan(values)
    mean = np.where(kept, values, 0.0).sum(axis=-1) / kept.sum(axis=-1)
    return float(mean) if mean.ndim == 0 else mean
