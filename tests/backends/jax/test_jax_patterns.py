"""JAX draws with a ``pattern`` (PlackettLuce, PartialRanking): the host-callback samplers keep
each row's pattern, match the exact probabilities and refuse an invalid pattern."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests._jax import draw_jax, require_jax, shared_rng_copied

require_jax()

import pymc as pm  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

from pm_perm.distributions import PartialRanking, PlackettLuce  # noqa: E402
from pm_perm.testing import chi_square_pvalue  # noqa: E402

U = np.array([0.8, -0.2, 0.0, -1.0])
W = np.random.default_rng(53).normal(size=(4, 4))
PATTERNS = np.array([[0, 0, 2, -1], [1, 0, -1, -1], [0, 1, 1, 1]])


def _draw(rv, draws, seed):
    return draw_jax(rv, draws=draws, seed=seed)


@pytest.mark.parametrize("dist", ["plackett-luce", "partial-ranking"])
def test_jax_pattern_draws(dist):
    """Each draw keeps its row's pattern; the first row's draws match exp(logp) over every row
    of its pattern (chi-square, fixed seed, fails at p < 1e-3: false-failure rate 0.1%)."""
    if dist == "plackett-luce":
        rv, exact = PlackettLuce.dist(utilities=U, pattern=PATTERNS), PlackettLuce.dist(U)
    else:
        rv, exact = PartialRanking.dist(logits=W, pattern=PATTERNS), PartialRanking.dist(W)
    y = _draw(rv, draws=3000, seed=5)
    assert y.shape == (3000, 3, 4) and y.dtype == np.int64
    assert np.array_equal(np.sort(y, -1), np.broadcast_to(np.sort(PATTERNS, -1), y.shape))
    support = np.array(sorted(set(itertools.permutations(PATTERNS[0].tolist()))))
    probs = np.exp(pm.logp(exact, support).eval())
    assert chi_square_pvalue(y[:, 0], support, probs) > 1e-3


def test_jax_draws_refuse_an_invalid_pattern():
    p = pt.lvector("p")
    with shared_rng_copied():
        f = pm.compile([p], PlackettLuce.dist(utilities=U, pattern=p), mode="JAX")
    assert np.array_equal(np.sort(f(np.array([0, 0, 2, -1]))), [-1, 0, 0, 2])
    with pytest.raises(RuntimeError, match="not a valid rank-form order"):  # XlaRuntimeError
        f(np.array([0, 2, 2, -1]))
