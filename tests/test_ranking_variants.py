"""Helpers of benchmarks/ranking_variants.py: Laplace evidence, ARD, split concatenation."""

import importlib.util
from pathlib import Path

import numpy as np

from pm_perm.ranking.data import RankingSplit

_ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "ranking_variants", _ROOT / "benchmarks" / "ranking_variants.py"
)
variants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(variants)


def test_laplace_evidence_is_exact_for_a_gaussian():
    # log p(y, theta) = log Z + log N(theta; m, S): the Laplace approximation is exact, log Z
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 3))
    S = A @ A.T + np.eye(3)
    P, m, log_z = np.linalg.inv(S), rng.normal(size=3), -7.5

    def logp(t):
        d = t - m
        return (log_z - 1.5 * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(S)[1]
                - 0.5 * d @ P @ d)

    H = variants.neg_hessian(lambda t: -P @ (t - m), m)
    np.testing.assert_allclose(H, P, atol=1e-8)
    assert abs(variants.laplace_log_evidence(logp(m), H) - log_z) < 1e-8


def test_concat_keeps_every_query():
    a = RankingSplit(np.zeros((5, 2)), np.array([0, 1, 0, 2, 1]), np.array([0, 2, 5]),
                     np.array([1, 2]))
    b = RankingSplit(np.ones((3, 2)), np.array([1, 0, 0]), np.array([0, 3]), np.array([7]))
    c = variants.concat(a, b)
    np.testing.assert_array_equal(c.group_ptr, [0, 2, 5, 8])
    np.testing.assert_array_equal(c.qids, [1, 2, 7])
    np.testing.assert_array_equal(c.y, [0, 1, 0, 2, 1, 1, 0, 0])
    assert c.X.shape == (8, 2)


def test_ard_shrinks_an_irrelevant_feature():
    rng = np.random.default_rng(1)
    n_q, d = 40, 8
    X = rng.normal(size=(n_q * d, 2))
    score = 2.0 * X[:, 0] + rng.gumbel(size=n_q * d)
    y = np.zeros(n_q * d, dtype=np.int64)
    for q in range(n_q):
        s = score[q * d:(q + 1) * d]
        y[q * d:(q + 1) * d] = (s > np.quantile(s, 0.5)).astype(int) + (s >= s.max())
    split = RankingSplit(X, y, np.arange(0, n_q * d + 1, d), np.arange(n_q))
    theta, sigma = variants.ordinal_ard(split, 1.0, iters=10)
    assert theta[0] > 1.0 and abs(theta[1]) < 0.3
    assert sigma[0] > 1.0 > 3 * sigma[1]
