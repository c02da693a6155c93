"""Top-k and tied ballots under any Mallows distance by data augmentation.

:class:`pm_perm.MallowsPartial` gives the EXACT marginal likelihood of partial ballots for the
footrule, Spearman, Hamming and Kendall distances; Cayley and Ulam have none here. The recipe for
them (and a check of the others): one latent complete ranking ``R[j]`` per ballot, Mallows given
``(rho, alpha)``, constrained to agree with ballot ``j``. Summing ``R[j]`` out of the joint
density leaves exactly the ballot's likelihood (the sum of the Mallows probabilities of its
consistent completions), so the marginal posterior of ``rho`` and ``alpha`` is the exact one;
the price is a latent permutation per ballot, sampled by ``pm.sample``'s permutation steps.

Value convention: that of :class:`~pm_perm.PartialRanking` (rank form, ``-1`` = unranked, tied
items share their block's smallest position).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pm_perm.distributions.mallows import Mallows
from pm_perm.kernels.mallows import check_distance
from pm_perm.kernels.rank_form import validate_orders

__all__ = ["augmented_mallows", "ballot_rank_bounds", "ballot_completion"]


def ballot_rank_bounds(ballots):
    """The ranks each item may take in a complete ranking consistent with its ballot.

    A ballot is a sequence of blocks, each a set of items filling a run of positions in any
    order (a tie block of ``s`` items at position ``b`` fills ``b .. b + s - 1``; the ``n - k``
    unranked items of a top-k ballot fill ``k .. n - 1``). A complete ranking (a permutation)
    is consistent with the ballot if and only if ``lo <= R <= hi`` item by item.

    Parameters
    ----------
    ballots : array_like of int, shape (N, n)
        Valid rank-form ballots.

    Returns
    -------
    lo, hi : ndarray of int64, shape (N, n)

    Raises
    ------
    ValueError
        Naming the first row that is not a valid rank-form ballot.

    Examples
    --------
    >>> lo, hi = ballot_rank_bounds([[0, 1, -1, -1], [0, 0, 2, 2]])
    >>> lo.tolist(), hi.tolist()
    ([[0, 1, 2, 2], [0, 0, 2, 2]], [[0, 1, 3, 3], [1, 1, 3, 3]])
    """
    y = validate_orders(ballots, None, "ballots")
    n = y.shape[1]
    ranked = y >= 0
    k = ranked.sum(axis=1, keepdims=True)
    size = (y[:, :, None] == y[:, None, :]).sum(axis=2)  # block size of each item
    lo = np.where(ranked, y, k)
    hi = np.where(ranked, y + size - 1, n - 1)
    return lo.astype(np.int64), hi.astype(np.int64)


def ballot_completion(ballots):
    """Each ballot completed in a fixed order: the items of a block (tie or unranked) take its
    positions by increasing item index; (N, n) int64, rank form, consistent with its ballot.

    Examples
    --------
    >>> ballot_completion([[0, 1, -1, -1], [2, 2, 0, 0]]).tolist()
    [[0, 1, 2, 3], [2, 3, 0, 1]]
    """
    lo, _ = ballot_rank_bounds(ballots)
    order = np.argsort(lo, axis=1, kind="stable")
    out = np.empty_like(lo)
    np.put_along_axis(out, order, np.arange(lo.shape[1]), axis=1)
    return out


def augmented_mallows(name, rho, alpha, distance, ballots):
    """Latent complete rankings, one per ballot, Mallows given ``(rho, alpha)`` and agreeing with
    their ballots: the data-augmentation likelihood of top-k and tied ballots, for every distance.

    Call inside a ``pm.Model``. It adds the free variable ``name`` (N, n), a
    ``Mallows(rho, alpha, distance)`` started at :func:`ballot_completion`, and the Potential
    ``f"{name}_agrees"``: 0 where every row lies in its ballot's consistent set
    (:func:`ballot_rank_bounds`), ``-inf`` elsewhere. ``pm.sample`` gives the latent rankings
    its permutation step (:class:`~pm_perm.inference.step_methods.PermutationLeapShift`), whose
    proposals that leave the set are rejected; its swaps within a block keep the chain
    irreducible on the set (a product of the permutations of each block).

    Parameters
    ----------
    name : str
        Name of the latent rankings.
    rho : tensor_like of int, shape (n,)
        The consensus (rank form): data or a latent permutation, ``n`` known when the model is
        built.
    alpha : tensor_like of float
        Dispersion, ``alpha >= 0`` (scalar).
    distance : {"footrule", "spearman", "hamming", "kendall", "cayley", "ulam"}
        As for :class:`pm_perm.Mallows`.
    ballots : array_like of int, shape (N, n)
        Rank-form ballots (top-k with ``-1``, ties as equal "min" ranks, complete rankings).

    Returns
    -------
    TensorVariable of int64, shape (N, n)
        The latent complete rankings.

    Raises
    ------
    ValueError
        For an unknown distance, a ballot that is not valid rank form (naming the row), or
        ballots whose width is not rho's ``n``.

    Notes
    -----
    Exact: ``sum_{R consistent with y} p(R | rho, alpha)`` is the ballot's likelihood, so the
    marginal posterior of ``(rho, alpha)`` is the exact one (tested against enumeration). The
    cost is mixing, not bias: N more latent permutations, one model-logp evaluation per
    proposal, and proposals leaving a ballot's set wasted; prefer
    :class:`pm_perm.MallowsPartial` (exact likelihood, no latent rankings) for footrule,
    spearman, hamming and kendall. A complete ballot pins its row (every proposal rejected).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> from pm_perm.preferences.mallows_augmented import augmented_mallows
    >>> with pm.Model() as model:
    ...     rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((4, 4)))
    ...     alpha = pm.Exponential("alpha", 0.5)
    ...     R = augmented_mallows("R", rho, alpha, "cayley", [[0, 1, -1, -1], [0, 0, 2, 2]])
    >>> model.initial_point()["R"].tolist()
    [[0, 1, 2, 3], [0, 1, 2, 3]]
    """
    check_distance(distance)
    rho = pt.as_tensor_variable(rho)
    n = rho.type.shape[-1] if rho.type.ndim else None
    lo, hi = ballot_rank_bounds(ballots)
    if n is None:
        raise ValueError("augmented_mallows: the number of items n (the last dimension of rho) "
                         "must be known when the model is built: pass rho as a NumPy array or a "
                         "random variable of fixed shape")
    if lo.shape[1] != n:
        raise ValueError(f"augmented_mallows: ballots have {lo.shape[1]} items per row but rho "
                         f"has n = {n}; give one rank-form column per item of rho")
    R = Mallows(name, rho=rho, alpha=alpha, distance=distance, shape=lo.shape,
                initval=ballot_completion(ballots))
    agrees = pt.all(pt.ge(R, lo) & pt.le(R, hi))
    pm.Potential(f"{name}_agrees", pt.switch(agrees, 0.0, -np.inf))
    return R
