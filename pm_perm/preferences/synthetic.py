"""Synthetic ranking data from any of the ranking models (tests, SBC, benchmarks).

Ballots follow the value convention of :class:`~pm_perm.preferences.data.RankingData` (rank form:
``y[i]`` is the position of item ``i``, ``-1`` = not ranked). A ballot is drawn in two steps:
a complete ranking from the model (exact draws), then its length ``k`` from a ballot-length
distribution, keeping the top ``k`` items (ties are not drawn).

Models: an item x position logit matrix ``W`` (the permutation exponential family
``p(pi) ∝ exp(sum_i W[i, pi(i)])``; :func:`rank_one_logits` builds the rank-one case), or
Plackett-Luce utilities ``u``; either with a leading component axis and mixture weights.
"""

from __future__ import annotations

import numpy as np

from pm_perm.kernels.permutation_sampler import sample_permutations
from pm_perm.kernels.plackett_luce import sample_plackett_luce

__all__ = ["add_ties", "default_positions", "distinct_top_k_ballots", "draw_ballots",
           "rank_one_logits", "simulate_rankings", "top_k_ballots"]


def default_positions(M):
    """The fixed decreasing position scores ``c_j = (M - 1 - j) / (M - 1)`` (1 for M = 1)."""
    if M == 1:
        return np.ones(1)
    return (M - 1 - np.arange(M)) / (M - 1)


def rank_one_logits(u, c=None):
    """``W[..., i, j] = u[..., i] * c[j]`` (``c`` default :func:`default_positions`)."""
    u = np.asarray(u, dtype=np.float64)
    c = default_positions(u.shape[-1]) if c is None else np.asarray(c, dtype=np.float64)
    return u[..., :, None] * c


def _check_probs(p, n, what):
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (n,) or not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        raise ValueError(f"{what} must be {n} non-negative finite numbers with a positive sum, "
                         f"got {p!r}")
    return p / p.sum()


def draw_ballots(n, *, logits=None, utilities=None, mixture_weights=None, length_probs=None,
                 rng=None, return_components=False):
    """``n`` ballots in rank form, one row per ballot (not aggregated).

    Parameters
    ----------
    n : int
        Number of ballots.
    logits : array_like of float, shape (M, M) or (K, M, M), optional
        Item x position logits of one model or of ``K`` mixture components; or the top-k
        model's logits (M, k + 1) or (K, M, k + 1), ``k < M - 1`` (:class:`~pm_perm.TopKRanking`:
        the last column "not in the top k"), whose complete rankings are an exact top-k draw
        followed by the other items in a uniformly random order (they are exchangeable).
    utilities : array_like of float, shape (M,) or (K, M), optional
        Plackett-Luce utilities instead of ``logits`` (exactly one of the two).
    mixture_weights : array_like of float, shape (K,), optional
        Component probabilities (needed when ``K`` components are given; normalised).
    length_probs : array_like of float, shape (M + 1,), optional
        ``length_probs[k]`` = probability that a ballot ranks ``k`` items (default: complete
        ballots). Normalised. Top-k logits also take ``k + 1`` entries (lengths 0..k).
    rng : numpy.random.Generator or int, optional
    return_components : bool
        Also return the component of each ballot.

    Returns
    -------
    orders : ndarray of int64, shape (n, M)
    components : ndarray of int64, shape (n,)
        Only with ``return_components``.
    """
    rng = np.random.default_rng(rng)
    if (logits is None) == (utilities is None):
        raise ValueError("give exactly one of logits= (item x position) or utilities= "
                         "(Plackett-Luce)")
    params = np.asarray(logits if logits is not None else utilities, dtype=np.float64)
    core = 2 if logits is not None else 1
    if params.ndim not in (core, core + 1) or not np.all(np.isfinite(params)):
        raise ValueError(f"{'logits' if core == 2 else 'utilities'} must be finite with shape "
                         f"{'(M, M) or (K, M, M)' if core == 2 else '(M,) or (K, M)'}, got "
                         f"shape {params.shape}")
    if params.ndim == core:
        params = params[None]
    K, M = params.shape[0], params.shape[-1]
    top = None  # the top-k model's K (logits (M, K + 1), not square)
    if core == 2 and params.shape[-2] != M:
        if not 2 <= M <= params.shape[-2] + 1:
            raise ValueError(f"logits must be square (M, M) (items x positions), or (M, k + 1) "
                             f"with 1 <= k <= M (the top-k model), got {params.shape[1:]}")
        top, M = M - 1, params.shape[-2]
    if mixture_weights is None and K > 1:
        raise ValueError(f"{K} components given: pass mixture_weights= (K probabilities)")
    weights = np.ones(1) if mixture_weights is None else _check_probs(mixture_weights, K,
                                                                       "mixture_weights")
    comp = rng.choice(K, size=n, p=weights)
    orders = np.empty((n, M), dtype=np.int64)
    for k in range(K):
        rows = np.flatnonzero(comp == k)
        if rows.size == 0:
            continue
        if top is not None:
            orders[rows] = _complete_top_k(params[k], rows.size, rng)
        elif core == 2:
            orders[rows] = sample_permutations(params[k], size=(rows.size,), rng=rng)
        else:
            orders[rows] = sample_plackett_luce(params[k], size=(rows.size,), rng=rng)
    if length_probs is not None:
        n_len = M + 1 if top is None or np.size(length_probs) == M + 1 else top + 1
        lengths = rng.choice(n_len, size=n, p=_check_probs(length_probs, n_len, "length_probs"))
        orders[orders >= lengths[:, None]] = -1
    return (orders, comp) if return_components else orders


def _complete_top_k(L, n, rng):
    """``n`` complete rankings of the top-k model with logits ``L`` (M, K + 1): an exact top-K
    draw, the other items after it in a uniformly random order (positions ``K..M-1`` are
    exchangeable: every order of them has the same probability)."""
    from pm_perm.kernels.top_k_sampler import sample_top_k

    y = sample_top_k(L, size=(n,), rng=rng)
    key = np.where(y >= 0, y, L.shape[1] - 1 + rng.random(y.shape))
    return np.argsort(np.argsort(key, axis=1), axis=1)


def simulate_rankings(n, *, logits=None, utilities=None, mixture_weights=None,
                      length_probs=None, item_names=None, rng=None):
    """Synthetic :class:`~pm_perm.preferences.data.RankingData` of ``n`` ballots (aggregated).

    Same model arguments as :func:`draw_ballots`. ``item_names`` default ``"item0"``, ...
    The data kind is the narrowest that holds the ballots (``"soc"`` when all are complete,
    else ``"soi"``); aggregation by :meth:`RankingData.from_orders`.

    Examples
    --------
    >>> import numpy as np
    >>> data = simulate_rankings(1000, utilities=np.array([1.0, 0.0, -1.0]),
    ...                          length_probs=[0, 0.5, 0, 0.5], rng=0)
    >>> int(data.n_rankings), data.n_items
    (1000, 3)
    """
    from pm_perm.preferences.data import RankingData

    orders = draw_ballots(n, logits=logits, utilities=utilities, mixture_weights=mixture_weights,
                          length_probs=length_probs, rng=rng)
    M = orders.shape[1]
    names = tuple(f"item{i}" for i in range(M)) if item_names is None else tuple(item_names)
    if len(names) != M:
        raise ValueError(f"item_names has {len(names)} names for {M} items")
    return RankingData.from_orders(orders, item_names=names)


def add_ties(data, share, *, min_length=3, pair="random", rng=None):
    """Tie one adjacent pair of positions in a random ``share`` of the longer ballots.

    Each ballot ranking at least ``min_length`` items is, independently with probability
    ``share``, given one tie: a pair of adjacent ranked positions ``(p, p+1)`` (chosen by
    ``pair``) becomes a tie block at ``p`` (rank form: both items hold ``p``). Used to give
    real strict data (e.g. APA 1998) the tie pattern of surveys, for checks of tied-data
    likelihoods and predictive checks. Ballots are expanded, tied and re-aggregated; cost
    O(n_ballots M).

    Parameters
    ----------
    data : RankingData
        Strict ballots (no ties yet).
    share : float
        Probability in ``[0, 1]`` that an eligible ballot gets a tie.
    min_length : int
        Ballots ranking fewer items are left alone (``>= 2``).
    pair : {"random", "first", "last"} or int
        Which adjacent pair is tied: uniformly chosen, the first two or the last two ranked
        items, or positions ``pair`` and ``pair + 1`` (0-based; ``1``: the 2nd and 3rd, needs
        ``min_length >= pair + 2``).
    rng : int or numpy.random.Generator, optional

    Returns
    -------
    RankingData
        Same items; kind ``"toc"``/``"toi"`` when a tie was added.

    Examples
    --------
    >>> import numpy as np
    >>> data = simulate_rankings(2000, utilities=np.zeros(4), rng=0)
    >>> tied = add_ties(data, 0.5, rng=1)
    >>> int(tied.n_rankings), tied.has_ties
    (2000, True)
    """
    from pm_perm.preferences.data import RankingData

    if not 0.0 <= float(share) <= 1.0:
        raise ValueError(f"share must be a probability in [0, 1], got {share!r}")
    if isinstance(min_length, bool) or int(min_length) != min_length or min_length < 2:
        raise ValueError(f"min_length must be an integer >= 2 (a tie needs two items), got "
                         f"{min_length!r}")
    if isinstance(pair, (int, np.integer)) and not isinstance(pair, bool):
        if not 0 <= pair <= min_length - 2:
            raise ValueError(f"pair = {pair} ties positions {pair} and {pair + 1}, which a "
                             f"ballot of min_length = {min_length} items may not have: give "
                             f"0 <= pair <= min_length - 2")
    elif pair not in ("random", "first", "last"):
        raise ValueError(f"pair must be 'random', 'first', 'last' or a position (int), got "
                         f"{pair!r}")
    if data.has_ties:
        raise ValueError("add_ties expects strict ballots; the data already has ties")
    rng = np.random.default_rng(rng)
    rows = np.repeat(np.asarray(data.orders), np.asarray(data.counts), axis=0)
    k = (rows >= 0).sum(axis=1)
    pick = (k >= min_length) & (rng.random(rows.shape[0]) < share)
    for r in np.flatnonzero(pick):
        p = {"first": 0, "last": k[r] - 2, "random": None}[pair] if isinstance(pair, str) else pair
        p = rng.integers(k[r] - 1) if p is None else p  # tie positions p and p + 1
        rows[r, rows[r] == p + 1] = p
    return RankingData.from_orders(rows, item_names=data.item_names)


def _top_k_keys(utilities, k, n, rng):
    """``n`` Gumbel top-``k`` ballots of ``utilities`` (M,), each as one int64 key: the items
    first to last, ``item + 1`` as digits in base ``M + 1`` (shorter ballots end in zeros)."""
    M = utilities.shape[0]
    scores = utilities + rng.gumbel(size=(n, M))
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < M else np.tile(np.arange(M),
                                                                                 (n, 1))
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1),
                             axis=1)
    keys = np.zeros(n, dtype=np.int64)
    for j in range(k):
        keys = keys * (M + 1) + top[:, j] + 1
    return keys


def _keys_to_orders(keys, M, k):
    """Rank form (n, M) of the keys of :func:`_top_k_keys` (``-1`` = not ranked)."""
    orders = np.full((keys.shape[0], M), -1, dtype=np.int64)
    rows = np.arange(keys.shape[0])
    keys = keys.copy()
    for j in range(k - 1, -1, -1):
        digit = keys % (M + 1)
        keys //= M + 1
        ranked = digit > 0
        orders[rows[ranked], digit[ranked] - 1] = j
    return orders


def _check_top_k(n_items, k):
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= n_items:
        raise ValueError(f"k must be an integer in [1, n_items={n_items}] (ballot length); got "
                         f"{k!r}")
    if (n_items + 1) ** k >= 2**62:
        raise ValueError(f"(n_items + 1)^k = {n_items + 1}^{k} does not fit the int64 keys of "
                         "the generator; use a smaller k")
    return int(k)


def top_k_ballots(n_ballots, n_items, k, *, lengths=None, rng=None, chunk=250_000):
    """``n_ballots`` Plackett-Luce top-``k`` ballots over ``n_items`` items, aggregated into
    distinct orders with counts, without ever holding one row per ballot.

    Utilities ``u ~ N(0, 1)`` (one draw per call); each ballot ranks the ``k`` items of largest
    ``u_i + g_i`` (``g`` standard Gumbel: exactly a Plackett-Luce top-``k`` draw), first to
    last; with ``lengths`` it is cut after ``lengths``-distributed many items. Ballots are drawn
    in chunks of ``chunk`` and aggregated as int64 keys, so memory is O(distinct orders x M)
    plus O(chunk x M): the national-election case (10^7 ballots over 50 candidates,
    ``benchmarks/bench_many_ballots.py``) takes seconds per million ballots.

    Parameters
    ----------
    n_ballots : int
    n_items : int
    k : int
        The longest ballot (``1 <= k <= n_items``, ``(n_items + 1)^k < 2^62``).
    lengths : array_like of float, shape (k + 1,), optional
        ``lengths[j]`` = probability that a ballot ranks ``j`` items (normalised; default: all
        ballots rank ``k``).
    rng : int or numpy.random.Generator, optional
    chunk : int
        Ballots drawn at a time.

    Returns
    -------
    data : RankingData
        Distinct orders in increasing key order (by first item, then second, ...), kind
        ``"soi"`` (``"soc"`` when ``k = n_items`` and every ballot is complete).
    utilities : ndarray, shape (n_items,)
        The utilities the ballots were drawn from.

    Examples
    --------
    >>> data, u = top_k_ballots(1000, 6, 3, rng=0)
    >>> int(data.n_rankings), data.max_ranked
    (1000, 3)
    """
    from pm_perm.preferences.data import RankingData

    rng = np.random.default_rng(rng)
    k = _check_top_k(n_items, k)
    if isinstance(n_ballots, bool) or int(n_ballots) != n_ballots or n_ballots < 1:
        raise ValueError(f"n_ballots must be a positive integer; got {n_ballots!r}")
    probs = None if lengths is None else _check_probs(lengths, k + 1, "lengths")
    u = rng.standard_normal(n_items)
    parts = []
    for a in range(0, int(n_ballots), int(chunk)):
        b = min(int(n_ballots), a + int(chunk))
        new = _top_k_keys(u, k, b - a, rng)
        if probs is not None:
            cut = k - rng.choice(k + 1, size=b - a, p=probs)  # digits to drop from the end
            new = new // (n_items + 1) ** cut * (n_items + 1) ** cut
        parts.append(np.unique(new, return_counts=True))
    keys, inv = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
    counts = np.zeros(keys.size, dtype=np.int64)
    np.add.at(counts, inv, np.concatenate([p[1] for p in parts]))
    if keys[0] == 0:  # empty ballots (length 0) rank nothing: not data
        keys, counts = keys[1:], counts[1:]
    orders = _keys_to_orders(keys, n_items, k)  # distinct keys: distinct orders
    kind = "soc" if k == n_items and (orders >= 0).all() else "soi"
    return RankingData(orders, counts, tuple(f"item{i}" for i in range(n_items)), kind), u


def distinct_top_k_ballots(n_distinct, n_items, k, *, rng=None):
    """Plackett-Luce top-``k`` ballots (``u ~ N(0, 1)``, Gumbel top-``k``, as
    :func:`top_k_ballots`) drawn one after another until ``n_distinct`` distinct orders have
    appeared: the data are every ballot up to the first appearance of the ``n_distinct``-th
    distinct order, aggregated (distinct orders in order of first appearance, with counts).

    The 20-item case of ``benchmarks/bench_many_ballots.py`` (313,430 distinct top-5 ballots,
    the size of issue 50's report). Raises ``ValueError`` if ``n_distinct`` exceeds the number
    of possible orders.

    Returns
    -------
    data : RankingData
    utilities : ndarray, shape (n_items,)

    Examples
    --------
    >>> data, u = distinct_top_k_ballots(200, 8, 3, rng=0)
    >>> data.n_distinct, data.max_ranked
    (200, 3)
    """
    from math import perm

    from pm_perm.preferences.data import RankingData

    rng = np.random.default_rng(rng)
    k = _check_top_k(n_items, k)
    if isinstance(n_distinct, bool) or int(n_distinct) != n_distinct or n_distinct < 1 \
            or n_distinct > perm(n_items, k):
        raise ValueError(f"n_distinct must be an integer in [1, {perm(n_items, k)}] (the "
                         f"number of top-{k} orders of {n_items} items); got {n_distinct!r}")
    u = rng.standard_normal(n_items)
    keys = np.zeros(0, dtype=np.int64)
    batch = 2 * int(n_distinct)
    while True:
        keys = np.concatenate([keys, _top_k_keys(u, k, batch, rng)])
        uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        if uniq.size >= n_distinct:
            break
        batch *= 2
    by_first = np.argsort(first)
    last = first[by_first[n_distinct - 1]]  # the ballot where the n_distinct-th order appears
    counts = np.bincount(inv[:last + 1], minlength=uniq.size)[by_first[:n_distinct]]
    data = RankingData(_keys_to_orders(uniq[by_first[:n_distinct]], n_items, k), counts,
                       tuple(f"item{i}" for i in range(n_items)), "soc" if k == n_items else "soi")
    return data, u
