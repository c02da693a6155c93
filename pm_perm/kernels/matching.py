"""The mode of the permutation model: a max-weight perfect matching.

``argmax_y sum_i W[i, y[i]]`` is the mode of ``p(y) ∝ exp(sum_i W[i, y[i]])`` whatever the
normaliser, so it needs no permanent: the Hungarian algorithm solves it in O(M^3) for any M.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from pm_perm.kernels._checks import as_square_logits

__all__ = ["max_weight_matching"]


def max_weight_matching(W):
    """Max-weight perfect matching of each (M, M) matrix in ``W``, batched.

    Parameters
    ----------
    W : array_like of float, shape (..., M, M)
        Edge weights (logits); ``-inf`` marks a forbidden edge.

    Returns
    -------
    ndarray of int64, shape (..., M)
        ``y[..., i]`` is the column matched to row ``i``: the mode of ``PermutationExpFamily``.
        Ties are broken by ``scipy.optimize.linear_sum_assignment``'s order.

    Raises
    ------
    ValueError
        If some matrix has no perfect matching that avoids its ``-inf`` entries.

    Notes
    -----
    ``scipy.optimize.linear_sum_assignment`` (shortest augmenting path, Crouse 2016), O(M^3)
    per matrix; no size limit beyond memory.
    """
    arr = as_square_logits(W)
    M = arr.shape[-1]
    flat = arr.reshape(-1, M, M)
    out = np.empty((flat.shape[0], M), dtype=np.int64)
    for b, w in enumerate(flat):
        try:
            rows, cols = linear_sum_assignment(w, maximize=True)
        except ValueError as err:  # scipy: "cost matrix is infeasible"
            where = f"[{', '.join(map(str, np.unravel_index(b, arr.shape[:-2])))}]" * (arr.ndim > 2)
            raise ValueError(
                f"logits{where} has no perfect matching avoiding its -inf (forbidden) entries"
            ) from err
        out[b, rows] = cols
    return out.reshape(arr.shape[:-1])
