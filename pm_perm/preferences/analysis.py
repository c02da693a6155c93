"""What a fitted ranking model says: positions, pairwise preferences, consensus, blocs, PPCs.

Every function takes the posterior as returned by
:func:`pm_perm.preferences.fitting.posterior_params` (``params``: W (S, K, M, M) or Plackett-Luce
u (S, K, M), or the top-k model's logits (S, K, M, k + 1), or a PL-anchored model's ``D`` and
``u`` packed as (S, 1, M, M + 1); ``weights`` (S, K), each row a
probability vector; ``length_probs`` (S, M + 1), top-k (S, k + 1); S = 1 for a MAP point)
and the model ``family``; a ``post`` built by hand whose shapes or weights are not these raises
``ValueError``. Rank form as in :class:`~pm_perm.preferences.data.RankingData`.

Exact where cheap: item-position marginals of a W model are the permutation marginals of each
draw's W (subset DP, O(M 2^M) per matrix), averaged over draws and mixture weights; those of a
PL-anchored model ``d log Z / d D`` of its subset DP, its consensus the exact mode (the same DP
with max). Quantities
with no closed form here (pairwise preferences, Plackett-Luce positions) are Monte Carlo
averages over exact draws of complete rankings from each posterior draw.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from pm_perm.kernels.patterns import coarsen_to_patterns
from pm_perm.preferences import _anchored_draws
from pm_perm.preferences._families import ANCHORED
from pm_perm.preferences.synthetic import draw_ballots

__all__ = [
    "ballot_statistics",
    "component_position_marginals",
    "consensus_posterior",
    "pairwise_probabilities",
    "position_marginals",
    "posterior_predictive",
    "ppc_summary",
    "replicated_statistics",
    "sample_rankings",
    "top_k_probabilities",
]


def _check_post(post, family):
    """Raise unless ``family`` is a valid name, ``post["params"]`` has its shape and
    ``post["weights"]`` one probability vector of mixture weights per draw (as
    :func:`~pm_perm.preferences.fitting.posterior_params` checks them)."""
    from pm_perm.preferences._families import check_family, check_probability_vectors

    check_family(family)
    shape = np.shape(post["params"])
    if family == "plackett-luce" and len(shape) != 3:
        raise ValueError(f"post['params'] must be utilities u (S, K, M) for family "
                         f"'plackett-luce'; got shape {shape} (is family right?)")
    if family == "top-k" and (len(shape) != 4 or not 2 <= shape[-1] <= shape[-2] + 1):
        raise ValueError(f"post['params'] must be top-k logits (S, C, M, K + 1), 1 <= K <= M, "
                         f"for family 'top-k'; got shape {shape} (is family right?)")
    if family == ANCHORED and (len(shape) != 4 or shape[1] != 1 or shape[-1] != shape[-2] + 1):
        raise ValueError(f"post['params'] must be the PL-anchored model's D and u packed as "
                         f"(S, 1, M, M + 1) for family {ANCHORED!r}; got shape {shape} (is "
                         "family right?)")
    if family in ("rank-one", "full") and (len(shape) != 4 or shape[-1] != shape[-2]):
        raise ValueError(f"post['params'] must be logits W (S, K, M, M) for family {family!r}; "
                         f"got shape {shape} (is family right?)")
    w_shape = np.shape(post["weights"])
    if w_shape != shape[:2]:
        raise ValueError(f"post['weights'] must have shape (S, K) = {shape[:2]} (one mixture "
                         f"weight per component of post['params']); got {w_shape}")
    check_probability_vectors("post['weights']", np.asarray(post["weights"], dtype=np.float64))


def _model_kwargs(family, params, weights):
    key = "utilities" if family == "plackett-luce" else "logits"
    return {key: params, "mixture_weights": weights}


def sample_rankings(post, family, n_per_draw, *, rng=None, length_probs=False, patterns=None):
    """Posterior predictive complete rankings (or ballots): ``n_per_draw`` per draw, stacked.

    With ``patterns`` (n_per_draw, M) ballot ``b`` of each draw is a complete ranking coarsened
    to ``patterns[b]`` (its length and tie blocks, :mod:`pm_perm.kernels.patterns`); else with
    ``length_probs=True`` each ballot is truncated to a length drawn from that draw's
    ``length_probs`` (a replicated ballot); otherwise rankings are complete. Returns (S n, M).
    """
    _check_post(post, family)
    rng = np.random.default_rng(rng)
    out = []
    for s in range(post["params"].shape[0]):
        lp = post["length_probs"][s] if length_probs and patterns is None else None
        if lp is not None and family == "top-k":  # lengths 0..K of M items: pad to M + 1
            lp = np.pad(lp, (0, post["params"].shape[-2] + 1 - lp.shape[-1]))
        if family == ANCHORED:
            y = _anchored_draws.draw(post["params"][s, 0], n_per_draw, lp, rng)
            out.append(y if patterns is None else coarsen_to_patterns(y, patterns))
            continue
        y = draw_ballots(n_per_draw, **_model_kwargs(family, post["params"][s],
                                                      post["weights"][s]),
                         length_probs=lp, rng=rng)
        out.append(y if patterns is None else coarsen_to_patterns(y, patterns))
    return np.concatenate(out)


def _draw_component_marginals(post, family, n_per_draw, rng):
    """Per-draw, per-component item x position marginals (S, K, M, M); top-k (S, C, M, K + 1)
    (the last column: not in the top K)."""
    _check_post(post, family)
    params = post["params"]
    if family == "top-k":
        from pm_perm.kernels.top_k import top_k_marginals

        return top_k_marginals(params)[1]
    if family == ANCHORED:
        return _anchored_draws.marginals(params)
    if family != "plackett-luce":
        from pm_perm.kernels.permanent import permutation_marginals

        return permutation_marginals(params)
    rng = np.random.default_rng(rng)
    S, K, M = params.shape
    P = np.zeros((S, K, M, M))
    for s in range(S):
        for k in range(K):
            y = draw_ballots(n_per_draw, utilities=params[s, k], rng=rng)
            P[s, k] = np.eye(M)[y].mean(axis=0)
    return P


def component_position_marginals(post, family, *, n_per_draw=2000, rng=None):
    """Bloc profiles: ``P[k, i, j] = p(item i at position j | component k)``, (K, M, M); for
    family ``"top-k"`` (C, M, K + 1), as :func:`position_marginals`.

    Averaged over draws (use relabelled draws, :func:`~pm_perm.preferences.fitting.fit_nuts`).
    Exact for W models; Plackett-Luce by ``n_per_draw`` exact draws per draw and component.
    """
    return _draw_component_marginals(post, family, n_per_draw, rng).mean(axis=0)


def position_marginals(post, family, *, n_per_draw=2000, rng=None):
    """``P[i, j]`` = posterior predictive probability that item i is at position j, (M, M).

    Each draw's mixture of its component profiles by its mixture weights, averaged over draws
    (for one component: the average of each draw's permutation marginals). Doubly stochastic.
    Same cost and accuracy as :func:`component_position_marginals`.

    Family ``"top-k"``: (M, K + 1), columns the positions ``0..K-1`` and "not in the top K"
    (:func:`pm_perm.kernels.top_k.top_k_marginals`, exact): each row sums to 1, the first K
    columns to 1 and the last to ``M - K``.
    """
    P = _draw_component_marginals(post, family, n_per_draw, rng)
    return np.einsum("sk,skij->ij", post["weights"], P) / P.shape[0]


def top_k_probabilities(marginals, k):
    """``P(item i among the first k)`` from a position-marginal matrix (M, M): its first k columns
    summed. Exact when ``marginals`` is.

    Raises
    ------
    ValueError
        ``marginals`` is not a square matrix, or ``k`` is not an integer in 1..M.
    """
    P = np.asarray(marginals)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"marginals must be an (M, M) position-marginal matrix; got shape "
                         f"{P.shape}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= P.shape[1]:
        raise ValueError(f"k must be an integer from 1 to M = {P.shape[1]} (the number of "
                         f"leading positions); got {k!r}")
    return P[:, :k].sum(axis=1)


def pairwise_probabilities(post, family, *, n_per_draw=1000, rng=None):
    """``Q[i, j]`` = posterior predictive P(item i ranked above item j) in a complete ranking.

    Monte Carlo over ``n_per_draw`` exact draws per posterior draw (standard error at most
    ``0.5 / sqrt(S n_per_draw)``). ``Q + Q.T = 1`` off the diagonal; the diagonal is 0.
    """
    y = sample_rankings(post, family, n_per_draw, rng=rng)
    return (y[:, :, None] < y[:, None, :]).mean(axis=0)


def _complete_logp(family, params_k, y):
    """log p(complete rankings y (n, M) rank form) under one component; top-k: log p of their
    top-K lists (the other items are exchangeable)."""
    if family == "top-k":
        from pm_perm.kernels.top_k import top_k_loglik

        K = params_k.shape[-1] - 1
        return top_k_loglik(params_k, np.where(y < K, y, -1))
    if family == "plackett-luce":
        order = np.argsort(y, axis=1)  # items first to last
        u = params_k[order]
        tails = np.logaddexp.accumulate(u[:, ::-1], axis=1)[:, ::-1]
        return (u - tails).sum(axis=1)
    from pm_perm.kernels.permanent import log_permanent

    M = params_k.shape[0]
    return params_k[np.arange(M), y].sum(axis=1) - log_permanent(params_k)


def _mode(family, params, weights):
    """Most probable complete ranking of one draw (rank form).

    One component: the max-weight matching of W
    (:func:`pm_perm.kernels.matching.max_weight_matching`, the exact mode), or utilities sorted
    (Plackett-Luce). A mixture's mode is searched among its components' modes (the best under
    the mixture): exact when the blocs are well separated, otherwise a lower bound on the mode's
    probability. Top-k: the max-weight matching of the logits with the "not in the top K"
    column repeated for positions ``K..M-1``; its first K positions are the most probable
    top-K list (the order of the others is arbitrary: every one is equally probable).
    """
    if family == ANCHORED:  # one component
        return _anchored_draws.mode(params[0])
    if family == "plackett-luce":
        cands = np.argsort(np.argsort(-params, axis=1), axis=1)
    else:
        from pm_perm.kernels.matching import max_weight_matching

        square = params
        if family == "top-k":
            M, K = params.shape[-2], params.shape[-1] - 1
            square = np.concatenate([params[..., :K], np.repeat(params[..., K:], M - K, -1)], -1)
        cands = max_weight_matching(square)
    if params.shape[0] == 1:
        return cands[0]
    logp = np.logaddexp.reduce([np.log(weights[k]) + _complete_logp(family, params[k], cands)
                                for k in range(params.shape[0])], axis=0)
    return cands[int(np.argmax(logp))]


def consensus_posterior(post, family, *, top=5):
    """Posterior of the consensus ranking (the most probable complete ranking of each draw).

    Family ``"top-k"``: the most probable top-K list of each draw (K items; the others are
    exchangeable, so no complete ranking is more probable than another with the same top K).

    Returns
    -------
    list of (tuple of int, float)
        The ``top`` most frequent consensus orders as item indices from first to last, with
        their posterior probability (share of draws), most probable first.
    """
    _check_post(post, family)
    S = post["params"].shape[0]
    keep = post["params"].shape[-1] - 1 if family == "top-k" else None
    modes = Counter(tuple(int(i) for i in np.argsort(_mode(family, post["params"][s],
                                                          post["weights"][s]))[:keep])
                    for s in range(S))
    return [(order, n / S) for order, n in modes.most_common(top)]


# --- posterior predictive checks ---------------------------------------------------------------

def ballot_statistics(orders, counts=None):
    """Summary statistics of ballots (rank form), as shares of the ballots.

    Returns
    -------
    dict
        ``first`` (M,): share of ballots with each item first (a tie for first shares the
        ballot equally); ``lengths`` (M + 1,): share of ballots ranking k items;
        ``pairwise`` (M, M): share of ballots ranking i above j (i ranked, and j ranked lower
        or not ranked; tied items are neither); ``tied`` (a 0-d array): share of ballots with
        at least one tie (two ranked items at one position; unranked items are not a tie).
    """
    y = np.asarray(orders)
    c = np.ones(y.shape[0]) if counts is None else np.asarray(counts, dtype=np.float64)
    N, M = c.sum(), y.shape[1]
    first = (y == 0).astype(np.float64)
    first /= np.maximum(first.sum(axis=1, keepdims=True), 1.0)
    ranked = y >= 0
    lengths = np.bincount(ranked.sum(axis=1), weights=c, minlength=M + 1)
    yy = np.where(ranked, y, M)  # unranked behave as "after everything ranked"
    above = ranked[:, :, None] & (yy[:, :, None] < yy[:, None, :])
    s = np.sort(y, axis=1)
    tied = ((s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)).any(axis=1)
    return {"first": c @ first / N, "lengths": lengths / N,
            "pairwise": np.tensordot(c, above, axes=1) / N, "tied": np.asarray(c @ tied / N)}


def replicated_statistics(ballots):
    """:func:`ballot_statistics` of each replicated data set, stacked.

    Parameters
    ----------
    ballots : array_like of int, shape (..., n, M)
        Replicated data sets of ``n`` ballots each (rank form, one row per ballot), e.g.
        :func:`pm_perm.preferences.posterior.predictive_ballots` or the ``"ballots"`` draws of
        ``pm.sample_posterior_predictive`` (chain, draw, n, M).

    Returns
    -------
    dict of arrays
        ``first`` (R, M), ``lengths`` (R, M + 1), ``pairwise`` (R, M, M), ``tied`` (R,); R =
        the product of the leading dimensions.

    Raises
    ------
    ValueError
        ``ballots`` is not (..., n, M) with at least one data set of at least one ballot, or a
        row is not a valid rank-form order.
    """
    from pm_perm.kernels.rank_form import validate_orders

    y = np.asarray(ballots)
    if y.ndim < 2 or y.shape[-2] == 0 or y.size == 0:
        raise ValueError(f"ballots must have shape (..., n, M) with at least one data set of "
                         f"n >= 1 ballots; got {y.shape}")
    shape = (-1,) + y.shape[-2:]
    y = validate_orders(y.reshape(-1, y.shape[-1]), None,
                        name="ballots (flattened to rows)").reshape(shape)
    reps = [ballot_statistics(r) for r in y]
    return {k: np.stack([r[k] for r in reps]) for k in reps[0]}


def posterior_predictive(post, family, n_rankings, *, n_reps=100, rng=None, patterns=None):
    """Replicated data sets (same number of ballots) and their :func:`ballot_statistics`.

    Each replication uses one posterior draw (cycling through a random permutation of the
    draws): orders from its model, each ballot coarsened to its row of ``patterns``
    (n_rankings, M) (the observed ballots: each replicated ballot keeps an observed ballot's
    length and ties, :mod:`pm_perm.kernels.patterns`), or without ``patterns`` with lengths
    from the draw's ``length_probs`` and no ties. This is the
    predictive of a MAP point (S = 1) or of posterior arrays; from a PyMC posterior, the
    ballots of :func:`pm_perm.preferences.posterior.predictive_ballots` (through
    ``pm.sample_posterior_predictive`` for one component) give the same statistics via
    :func:`replicated_statistics`.

    Returns
    -------
    dict of arrays
        ``first`` (n_reps, M), ``lengths`` (n_reps, M + 1), ``pairwise`` (n_reps, M, M),
        ``tied`` (n_reps,).

    Raises
    ------
    ValueError
        ``family`` is not a valid name or ``post`` does not match it; ``n_reps`` is not a
        positive integer; ``patterns`` are not ``n_rankings`` rank-form rows of M items.
    """
    _check_post(post, family)
    if isinstance(n_reps, bool) or not isinstance(n_reps, int | np.integer) or n_reps < 1:
        raise ValueError(f"n_reps must be a positive integer (replicated data sets), got "
                         f"{n_reps!r}")
    if patterns is not None:
        from pm_perm.kernels.rank_form import validate_orders

        shape = np.shape(post["params"])
        M = shape[-1] if family == "plackett-luce" else shape[-2]
        patterns = validate_orders(patterns, M, name="patterns")
        if patterns.shape[0] != n_rankings:
            raise ValueError(f"patterns must have one row per replicated ballot ({n_rankings}); "
                             f"got {patterns.shape[0]}")
    rng = np.random.default_rng(rng)
    S = post["params"].shape[0]
    which = rng.permutation(np.resize(rng.permutation(S), n_reps))
    reps = []
    for s in which:
        one = {k: v[s:s + 1] for k, v in post.items()}
        reps.append(ballot_statistics(sample_rankings(one, family, n_rankings, rng=rng,
                                                      length_probs=True, patterns=patterns)))
    return {k: np.stack([r[k] for r in reps]) for k in reps[0]}


def ppc_summary(data, post=None, family=None, *, n_reps=100, interval=0.9, rng=None,
                replicated=None, keep_pattern=True):
    """Observed statistics against the replicated ones (posterior predictive checks).

    Replications: ``replicated``, either posterior predictive ballots (..., n, M) (e.g.
    :func:`pm_perm.preferences.posterior.predictive_ballots`) or their
    :func:`replicated_statistics`; otherwise ``n_reps`` data sets of ``data.n_rankings`` ballots
    drawn from ``post`` / ``family`` (:func:`posterior_predictive`), each ballot keeping an
    observed ballot's pattern (length and ties) with ``keep_pattern`` (default; the lengths
    and the tie share then equal the observed ones, and the checks are of the orders given
    them), else with lengths from ``length_probs`` and no ties. Replicated data sets should
    have as many ballots as the data, or the bands are too wide (or narrow).

    Returns
    -------
    dict
        For each statistic (``first``, ``lengths``, ``pairwise``, ``tied``: see
        :func:`ballot_statistics`): ``observed``, replicated
        ``mean``, ``lower``/``upper`` (central ``interval``) and ``p_value`` (two-sided
        posterior predictive p-value per entry: 2 min(P(rep >= obs), P(rep <= obs)), capped at 1).

    Raises
    ------
    ValueError
        Neither ``post``/``family`` nor ``replicated`` given; ``interval`` not in (0, 1);
        ``n_reps`` not a positive integer; replicated ballots not in rank form or not of the
        data's M items; a statistics dict missing ``first``, ``lengths``, ``pairwise`` or
        ``tied`` or with the wrong shapes.
    """
    if not 0.0 < interval < 1.0:
        raise ValueError(f"interval must be in (0, 1) (the central share of the replicated "
                         f"statistics), got {interval!r}")
    obs = ballot_statistics(data.orders, data.counts)
    if replicated is None:
        if post is None or family is None:
            raise ValueError("give post= and family= (draw replications) or replicated= "
                             "(posterior predictive ballots or their statistics)")
        if keep_pattern not in (True, False):
            raise ValueError(f"keep_pattern must be True or False; got {keep_pattern!r}")
        patterns = (np.repeat(np.asarray(data.orders), np.asarray(data.counts, dtype=np.int64),
                              axis=0) if keep_pattern else None)
        rep = posterior_predictive(post, family, data.n_rankings, n_reps=n_reps, rng=rng,
                                   patterns=patterns)
    elif isinstance(replicated, dict):
        rep = replicated
    else:
        y = np.asarray(replicated)
        if y.ndim < 2 or y.shape[-1] != data.n_items:
            raise ValueError(f"replicated ballots must have shape (..., n, {data.n_items}) (the "
                             f"data's {data.n_items} items); got {y.shape}")
        rep = replicated_statistics(y)
    for k, o in obs.items():
        if k not in rep:
            raise ValueError(f"replicated statistics lack {k!r}; give a dict with 'first', "
                             "'lengths', 'pairwise' and 'tied' (replicated_statistics) or the "
                             "ballots")
        shape = np.shape(rep[k])
        if shape[1:] != o.shape or shape[0] == 0:
            dims = "".join(f", {d}" for d in o.shape)
            raise ValueError(f"replicated[{k!r}] must have shape (R{dims}) with R >= 1 (the "
                             f"data have {data.n_items} items); got {shape}")
    q = [(1 - interval) / 2, (1 + interval) / 2]
    out = {}
    for k, o in obs.items():
        r = np.asarray(rep[k])
        p = 2 * np.minimum((r >= o).mean(axis=0), (r <= o).mean(axis=0))
        lo, hi = np.quantile(r, q, axis=0)
        out[k] = {"observed": o, "mean": r.mean(axis=0), "lower": lo, "upper": hi,
                  "p_value": np.minimum(p, 1.0)}
    return out
