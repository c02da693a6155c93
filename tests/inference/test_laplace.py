"""pm_perm.inference.laplace: the Laplace approximation's curvature and evidence."""

import numpy as np

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
