import numpy as np
import pytest

from pm_perm.kernels.assignment import max_weight_assignment_core
from pm_perm.kernels.matching import max_weight_matching
from pm_perm.reference.permutations import all_permutations


@pytest.mark.parametrize("M", range(1, 8))
def test_assignment_is_enumerated_argmax_with_valid_duals(M):
    rng = np.random.default_rng(M)
    for _ in range(5):
        W = rng.normal(size=(M, M))
        W[rng.random((M, M)) < 0.2] = -np.inf
        W[np.arange(M), rng.permutation(M)] = rng.normal(size=M)
        perms = all_permutations(M)
        scores = W[np.arange(M), perms].sum(-1)
        y, u, v, ok = max_weight_assignment_core(W)
        assert ok
        assert abs(W[np.arange(M), y].sum() - scores.max()) < 1e-12
        assert np.all(W + u[:, None] + v[None, :] <= 1e-12)  # dual feasibility
        assert abs(W[np.arange(M), y].sum() + u.sum() + v.sum()) < 1e-12  # tight on the matching
        ym = max_weight_matching(W)
        assert abs(W[np.arange(M), ym].sum() - scores.max()) < 1e-12


@pytest.mark.parametrize("n, m", [(1, 1), (1, 4), (2, 3), (2, 6), (3, 5), (4, 7)])
def test_rectangular_assignment_is_enumerated_argmax_with_valid_duals(n, m):
    """n <= m rows each matched to its own column (the top-k model's scaling, positions to
    items): the enumerated optimum, feasible duals tight on the matching, and v = 0 on the
    columns left unmatched (the top-k kernel needs this for its "out" weights)."""
    import itertools

    rng = np.random.default_rng(10 * n + m)
    maps = np.array(list(itertools.permutations(range(m), n)))  # injective rows -> columns
    for _ in range(5):
        W = rng.normal(size=(n, m))
        W[rng.random((n, m)) < 0.2] = -np.inf
        W[np.arange(n), rng.permutation(m)[:n]] = rng.normal(size=n)
        y, u, v, ok = max_weight_assignment_core(W)
        assert ok and u.shape == (n,) and v.shape == (m,) and len(set(y.tolist())) == n
        assert abs(W[np.arange(n), y].sum() - W[np.arange(n), maps].sum(-1).max()) < 1e-12
        assert np.all(W + u[:, None] + v[None, :] <= 1e-12)
        assert abs(W[np.arange(n), y].sum() + u.sum() + v[y].sum()) < 1e-12
        assert np.all(v[np.setdiff1d(np.arange(m), y)] == 0.0) and np.all(v <= 0.0)


def test_infeasible():
    W = np.zeros((3, 3))
    W[:2, :2] = -np.inf
    assert not max_weight_assignment_core(W)[3]
    with pytest.raises(ValueError, match="no perfect matching"):
        max_weight_matching(W)


def test_matching_batched_and_large():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(2, 3, 6, 6))
    y = max_weight_matching(W)
    assert y.shape == (2, 3, 6)
    assert np.all(np.sort(y, -1) == np.arange(6))
    W = rng.normal(size=(300, 300))  # no size limit on the mode
    y = max_weight_matching(W)
    y2, _, _, _ = max_weight_assignment_core(W)
    assert abs(W[np.arange(300), y].sum() - W[np.arange(300), y2].sum()) < 1e-9
