"""The linear-extension Ops (pm_perm.ops.linear_extensions): values against enumeration, the
numba implementation against Python's, gradients by verify_grad, errors in compiled graphs."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.kernels.linear_extensions import EXP_FAMILY, PLACKETT_LUCE
from pm_perm.ops.linear_extensions import linear_extension_loglik
from pm_perm.reference.pairwise import linear_extensions_logp_enum, random_partial_order
from pm_perm.reference.permutations import log_permanent_enum

RNG = np.random.default_rng(11)
PREFS = np.stack([random_partial_order(RNG, 5, k, pad=5 - k) for k in (1, 3, 5)])


@pytest.mark.parametrize("family", [PLACKETT_LUCE, EXP_FAMILY])
def test_numba_equals_python_equals_enumeration(family):
    x = pt.vector("x") if family == PLACKETT_LUCE else pt.matrix("x")
    ll = linear_extension_loglik(x, PREFS, family)
    g = pytensor.grad((ll * np.array([1.0, 2.0, 0.5])).sum(), x)
    value = RNG.normal(size=5 if family == PLACKETT_LUCE else (5, 5))
    outs = [pytensor.function([x], [ll, g], mode=mode)(value) for mode in ("NUMBA", "FAST_COMPILE")]
    np.testing.assert_allclose(outs[0][0], outs[1][0], atol=1e-12)
    np.testing.assert_allclose(outs[0][1], outs[1][1], atol=1e-12)
    shift = 0.0 if family == PLACKETT_LUCE else log_permanent_enum(value)
    name = "plackett-luce" if family == PLACKETT_LUCE else "exp"
    want = [linear_extensions_logp_enum(value, p, name) for p in PREFS]
    np.testing.assert_allclose(outs[0][0] - shift, want, atol=1e-10)


@pytest.mark.parametrize("family", [PLACKETT_LUCE, EXP_FAMILY])
def test_verify_grad(family):
    value = RNG.normal(size=5 if family == PLACKETT_LUCE else (5, 5))
    verify_grad(lambda x: linear_extension_loglik(x, PREFS, family), [value],
                rng=np.random.default_rng(0))


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
@pytest.mark.parametrize(("prefs", "match"), [
    ([[[0, 1], [-1, -1]], [[1, 2], [2, 1]]], "assessor 1: cyclic preferences"),
    ([[[0, 9]]], r"item id 9 out of range 0\.\.4"),
    ([[[3, 3]]], "item 3 is preferred to itself"),
])
def test_errors_in_compiled_graphs(mode, prefs, match):
    u = pt.vector("u")
    f = pytensor.function([u], linear_extension_loglik(u, np.array(prefs)), mode=mode)
    with pytest.raises(ValueError, match=match):
        f(np.zeros(5))


def test_budget_in_compiled_graph():
    W = pt.matrix("W")
    f = pytensor.function([W], linear_extension_loglik(W, np.array([[[0, 1]]]), EXP_FAMILY,
                                                       max_cells=100), mode="NUMBA")
    with pytest.raises(ValueError, match="budget of 100 cells.*BradleyTerry"):
        f(np.zeros((8, 8)))


def test_wrong_parameter_ndim():
    with pytest.raises(TypeError, match=r"logits \(M, M\) expected"):
        linear_extension_loglik(pt.vector(), PREFS, EXP_FAMILY)
    with pytest.raises(TypeError, match=r"utilities \(M,\) expected"):
        linear_extension_loglik(pt.matrix(), PREFS, PLACKETT_LUCE)
