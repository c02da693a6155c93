"""The ranking-model families, the name of each one's order parameter, and the check of
posterior probability vectors (private to :mod:`pm_perm.preferences`)."""

from __future__ import annotations

import numpy as np

FAMILIES = ("plackett-luce", "rank-one", "full", "top-k", "pl-anchored")
#: The Plackett-Luce-anchored models (:mod:`pm_perm.preferences.anchored`, full or rank-one
#: tilt): their ``params`` pack the tilt ``D`` (..., M, M) and the utilities ``u`` (..., M) as
#: one array (..., M, M + 1), ``D`` in the first M columns (:func:`anchored_params`).
ANCHORED = "pl-anchored"


def check_family(family):
    """Raise unless ``family`` is one of ``FAMILIES`` (shared by the functions taking one)."""
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")


def n_lengths(family, params):
    """Number of ballot lengths (``length_probs`` entries) of a family's parameters ``params``
    (..., M) or (..., M, M): ``M + 1``; the top-k model's logits (..., M, K + 1): ``K + 1``."""
    if family == ANCHORED:
        return params.shape[-2] + 1
    return params.shape[-1] if family == "top-k" else params.shape[-1] + 1


def param_name(family):
    """The order model's parameter: utilities ``"u"`` (Plackett-Luce), the tilt ``"D"``
    (PL-anchored; with ``"u"``) or logits ``"W"``."""
    return {"plackett-luce": "u", ANCHORED: "D"}.get(family, "W")


def anchored_params(u, D):
    """Pack a PL-anchored model's ``u`` (..., M) and ``D`` (..., M, M) as (..., M, M + 1)."""
    u, D = np.asarray(u, dtype=np.float64), np.asarray(D, dtype=np.float64)
    return np.concatenate([D, u[..., None]], axis=-1)


def anchored_parts(params):
    """``(u, D)`` of packed PL-anchored parameters (..., M, M + 1) (:func:`anchored_params`)."""
    return params[..., -1], params[..., :-1]


def check_probability_vectors(label, probs, atol=1e-6):
    """Each row of ``probs`` (S, n) must be a probability vector: finite, non-negative, summing
    to 1 within ``atol``."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.all(np.isfinite(probs) & (probs >= 0), axis=-1)
                & (np.abs(probs.sum(axis=-1) - 1) <= atol))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = f" (draw {i})" if probs.shape[0] > 1 else ""
        raise ValueError(f"{label}{where} is {np.array2string(probs[i], precision=4)}: it must "
                         f"be non-negative and sum to 1")
