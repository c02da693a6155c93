"""Property-based tests (hypothesis) of the exact permanent kernels.

Each property holds exactly in exact arithmetic; tolerances allow for float64 rounding of
``log perm`` values of size up to ~100.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pm_perm.kernels.permanent import log_permanent, log_permanent_and_marginals
from pm_perm.kernels.permutation_sampler import sample_permutations

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


@st.composite
def logits(draw, min_m=1, max_m=9):
    M = draw(st.integers(min_m, max_m))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.01, 1.0, 5.0, 50.0]))
    forbid = draw(st.sampled_from([0.0, 0.3]))
    rng = np.random.default_rng(seed)
    W = scale * rng.normal(size=(M, M))
    W[rng.random((M, M)) < forbid] = -np.inf
    W[np.arange(M), rng.permutation(M)] = scale * rng.normal(size=M)  # keep perm > 0
    return W, rng


def _close(a, b, ref):
    assert abs(a - b) <= 1e-12 * max(1.0, abs(ref)), (a, b)


@SETTINGS
@given(logits())
def test_row_and_column_shifts(case):
    W, rng = case
    M = W.shape[0]
    a, b = rng.normal(size=M) * 3, rng.normal(size=M) * 3
    base = log_permanent(W)
    _close(log_permanent(W + a[:, None] + b[None, :]), base + a.sum() + b.sum(), base)


@SETTINGS
@given(logits())
def test_row_and_column_permutations(case):
    W, rng = case
    M = W.shape[0]
    r, c = rng.permutation(M), rng.permutation(M)
    base, P = log_permanent_and_marginals(W)
    lp2, P2 = log_permanent_and_marginals(W[r][:, c])
    _close(lp2, base, base)
    np.testing.assert_allclose(P2, P[r][:, c], atol=1e-12)
    _close(log_permanent(W.T), base, base)


@SETTINGS
@given(logits())
def test_marginals_doubly_stochastic_and_zero_on_forbidden(case):
    W, _ = case
    _, P = log_permanent_and_marginals(W)
    np.testing.assert_allclose(P.sum(0), 1.0, atol=1e-12)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    assert np.all(P >= 0) and np.all(P[np.isneginf(W)] == 0)


@SETTINGS
@given(logits(max_m=6))
def test_marginals_are_the_gradient(case):
    W, rng = case
    _, P = log_permanent_and_marginals(W)
    i, j = np.argwhere(np.isfinite(W))[rng.integers(np.isfinite(W).sum())]
    eps = 1e-5
    E = np.zeros_like(W)
    E[i, j] = eps
    fd = (log_permanent(W + E) - log_permanent(W - E)) / (2 * eps)
    assert abs(fd - P[i, j]) < 1e-6


@SETTINGS
@given(logits(max_m=6), logits(max_m=6))
def test_block_diagonal_is_product(c1, c2):
    A, _ = c1
    C, _ = c2
    m, n = A.shape[0], C.shape[0]
    W = np.full((m + n, m + n), -np.inf)
    W[:m, :m], W[m:, m:] = A, C
    ref = log_permanent(A) + log_permanent(C)
    _close(log_permanent(W), ref, ref)


@SETTINGS
@given(logits(max_m=12), st.integers(1, 20))
def test_sampled_values_are_valid_permutations_avoiding_forbidden_edges(case, n):
    W, rng = case
    M = W.shape[0]
    y = sample_permutations(W, size=(n,), rng=rng)
    assert y.shape == (n, M)
    assert np.all(np.sort(y, axis=-1) == np.arange(M))
    assert np.all(np.isfinite(W[np.arange(M), y]))
