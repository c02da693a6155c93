"""pm_perm.inference.laplace: the Laplace approximation's curvature and evidence."""

import numpy as np
import pytest

from pm_perm.inference import laplace_log_evidence, negative_hessian


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

    H = negative_hessian(lambda t: -P @ (t - m), m)
    np.testing.assert_allclose(H, P, atol=1e-8)
    assert abs(laplace_log_evidence(logp(m), H) - log_z) < 1e-8


def test_forward_differences_take_n_plus_one_gradients_and_match():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 4))
    P, m = A @ A.T + np.eye(4), rng.normal(size=4)
    calls = []

    def grad(t):  # a non-quadratic log p: -1/2 d'Pd - sum(d^4) / 12
        calls.append(1)
        d = t - m
        return -P @ d - d**3 / 3

    x = m + 0.5
    d = x - m
    exact = P + np.diag(d**2)
    H = negative_hessian(grad, x, scheme="forward")
    assert len(calls) == 4 + 1
    np.testing.assert_allclose(H, exact, atol=1e-5)
    calls.clear()
    negative_hessian(grad, x, scheme="forward", grad_at_x=grad(x))
    assert len(calls) == 1 + 4


def test_unknown_difference_scheme_is_named():
    with pytest.raises(ValueError, match="scheme must be 'central' or 'forward'"):
        negative_hessian(lambda t: -t, np.zeros(2), scheme="backward")
