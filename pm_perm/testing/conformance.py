"""Goodness of fit of a distribution's draws against its exact probabilities.

For a distribution with a small support (all M! permutations of M <= 6, all top-k orders, all
binary vectors of D <= 12, ...): enumerate the support, take its exact probabilities (from the
distribution's own logp, or from an oracle of :mod:`pm_perm.reference`), draw ``N`` values, and
run Pearson's chi-square test with the cells of expected count below ``min_expected`` pooled
into one. A correct sampler fails ``p > alpha`` with probability ``alpha`` (at a fixed seed a
test either always passes or always fails; state ``alpha`` as the false-failure rate).

A draw outside the support, or in a cell of probability 0, is an error no sample size excuses:
the p-value is then 0.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["chi_square_pvalue", "check_draws_match_logp", "count_draws"]


def count_draws(draws, support):
    """How many of ``draws`` equal each row of ``support``, and how many equal none.

    Parameters
    ----------
    draws : array_like
        (n, *event_shape) values (integers).
    support : array_like
        (S, *event_shape) distinct values.

    Returns
    -------
    counts : ndarray
        (S,) int64, the number of draws equal to each support row.
    outside : int
        The number of draws equal to no support row.

    Examples
    --------
    >>> count_draws([[0, 1], [1, 0], [0, 1]], [[0, 1], [1, 0]])
    (array([2, 1]), 0)
    """
    support = np.asarray(support)
    S = support.shape[0]
    draws = np.asarray(draws).reshape((-1, *support.shape[1:]))
    if not (np.issubdtype(draws.dtype, np.integer) and np.issubdtype(support.dtype, np.integer)):
        raise TypeError("draws and support must be integer arrays")
    rows = np.ascontiguousarray(support.reshape(S, -1), dtype=np.int64)
    index = {r.tobytes(): i for i, r in enumerate(rows)}
    if len(index) != S:
        raise ValueError("the rows of support must be distinct")
    counts = np.zeros(S, dtype=np.int64)
    outside = 0
    for d in np.ascontiguousarray(draws.reshape(draws.shape[0], -1), dtype=np.int64):
        i = index.get(d.tobytes())
        if i is None:
            outside += 1
        else:
            counts[i] += 1
    return counts, outside


def chi_square_pvalue(draws, support, probs, *, min_expected=5.0, atol=1e-9):
    """Pearson chi-square p-value of ``draws`` against the probabilities of ``support``.

    Cells of expected count ``n * probs`` below ``min_expected`` are pooled into one cell (kept
    if its expected count is positive); the degrees of freedom are the number of cells less one.

    Parameters
    ----------
    draws : array_like
        (n, *event_shape) integer draws.
    support : array_like
        (S, *event_shape) the distinct values of the support (or of the part of it with
        positive probability).
    probs : array_like
        (S,) their probabilities, summing to 1 within ``atol``.
    min_expected : float, default 5
        Cells with a smaller expected count are pooled (0: no pooling).
    atol : float, default 1e-9
        Tolerance of ``sum(probs) == 1``.

    Returns
    -------
    float
        The p-value; 0.0 if a draw is outside ``support`` or in a cell of probability 0; 1.0
        when fewer than two cells remain (nothing to test).

    Raises
    ------
    ValueError
        If ``probs`` is not a probability vector over the support rows.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.choice(3, size=(3000, 1), p=[0.2, 0.3, 0.5])
    >>> bool(chi_square_pvalue(draws, [[0], [1], [2]], [0.2, 0.3, 0.5]) > 1e-3)
    True
    >>> chi_square_pvalue(draws, [[0], [1], [2]], [0.5, 0.5, 0.0])  # draws where p = 0
    0.0
    """
    probs = np.asarray(probs, dtype=np.float64)
    support = np.asarray(support)
    if probs.shape != (support.shape[0],):
        raise ValueError(f"probs has shape {probs.shape}; the support has {support.shape[0]} rows")
    if not (np.all(np.isfinite(probs)) and np.all(probs >= 0)):
        raise ValueError("probs must be finite and non-negative")
    if abs(probs.sum() - 1.0) > atol:
        raise ValueError(f"probs sum to {probs.sum()!r}, not 1: enumerate the whole support")
    counts, outside = count_draws(draws, support)
    n = counts.sum() + outside
    if outside or counts[probs == 0].any():
        return 0.0
    expected = n * probs
    small = expected < min_expected
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    if keep.sum() < 2:
        return 1.0
    return float(stats.chisquare(obs[keep], exp[keep]).pvalue)


def check_draws_match_logp(dist, support, n_draws=20_000, seed=0, *, mode=None,
                           renormalize=False, min_expected=5.0):
    """p-value of a chi-square test of ``pm.draw(dist)`` against ``exp(pm.logp(dist, support))``.

    Parameters
    ----------
    dist : TensorVariable
        An unbatched distribution, e.g. ``PermutationExpFamily.dist(W)`` (no free inputs).
    support : array_like
        (S, *event_shape) every value the distribution can take (e.g.
        :func:`pm_perm.reference.permutations.all_permutations`,
        :func:`pm_perm.reference.rankings.every_top_k_order`,
        :func:`pm_perm.reference.subsets.binary_vectors`).
    n_draws : int, default 20000
        Number of draws.
    seed : int, default 0
        ``random_seed`` of ``pm.draw``.
    mode : str, optional
        PyTensor mode of the draws (``"NUMBA"``, ``"FAST_COMPILE"`` for the Python ``rng_fn``,
        ...); the logp is evaluated on the Python linker.
    renormalize : bool, default False
        Divide the probabilities by their sum (for a logp documented to lose mass, e.g. to
        infeasible configurations). Without it, probabilities that do not sum to 1 are an error
        (``ValueError``): the support is incomplete or the logp is wrong.
    min_expected : float, default 5
        Cells with a smaller expected count are pooled (:func:`chi_square_pvalue`).

    Returns
    -------
    float
        The p-value (:func:`chi_square_pvalue`); a correct sampler and logp give ``p < alpha``
        with probability ``alpha``.

    Examples
    --------
    >>> from pm_perm import PermutationExpFamily
    >>> from pm_perm.reference.permutations import all_permutations
    >>> W = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, -1.0]])
    >>> p = check_draws_match_logp(PermutationExpFamily.dist(W), all_permutations(3),
    ...                            n_draws=4000, seed=1)
    >>> bool(p > 1e-3)
    True
    """
    import pymc as pm

    support = np.asarray(support)
    probs = np.exp(pm.logp(dist, support).eval(mode="FAST_COMPILE"))
    if probs.shape != (support.shape[0],):
        raise ValueError(f"logp of the support has shape {probs.shape}: pass an unbatched "
                         f"distribution and (S, *event_shape) support rows")
    if renormalize:
        probs = probs / probs.sum()
    draws = pm.draw(dist, draws=n_draws, random_seed=seed, mode=mode)
    return chi_square_pvalue(draws, support, probs, min_expected=min_expected)
