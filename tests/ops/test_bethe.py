"""Tests of the Bethe PyTensor Ops: value, gradient, batching, backends."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.bethe import bethe_log_permanent_and_marginals
from pm_perm.ops.bethe import bethe_log_permanent, bethe_marginals


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_value_and_gradient_match_kernel(mode):
    rng = np.random.default_rng(0)
    Wv = rng.normal(size=(2, 6, 6))
    W = pt.tensor3("W")
    lp = bethe_log_permanent(W)
    f = pytensor.function([W], [lp, pt.grad(lp.sum(), W), bethe_marginals(W)], mode=mode)
    v, g, m = f(Wv)
    v_ref, m_ref = bethe_log_permanent_and_marginals(Wv)
    np.testing.assert_allclose(v, v_ref, rtol=1e-12)
    np.testing.assert_allclose(g, m_ref, atol=1e-12)
    np.testing.assert_allclose(m, m_ref, atol=1e-12)


def test_verify_grad():
    rng = np.random.default_rng(1)
    verify_grad(bethe_log_permanent, [rng.normal(size=(5, 5))], rng=rng)


def test_errors_surface():
    W = pt.matrix("W")
    f = pytensor.function([W], bethe_log_permanent(W), mode="FAST_COMPILE")
    with pytest.raises(ValueError, match="all -inf"):
        f(np.array([[0.0, -np.inf], [-np.inf, -np.inf]]))
    with pytest.raises(TypeError, match="floating"):
        bethe_log_permanent(pt.lmatrix("L"))
