"""JAX backend for pairwise preferences: the linear-extension Ops (host callback) equal the
Python path in value and gradient, bad preferences raise, and the draws of PartialOrder and
BradleyTerry run (``pm_perm.backends.jax.linear_extensions``, ``pm_perm.backends.jax.random``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax", reason="jax is not installed: pip install pm-perm[jax]")

import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

from pm_perm import BradleyTerry, PartialOrder  # noqa: E402

# JAX drops PyMC's parameter checks and copies the RNG: both warned about at compile time
pytestmark = pytest.mark.filterwarnings("ignore:Skipping Check:UserWarning",
                                        "ignore:The RandomType SharedVariables:UserWarning")

PREFS = np.array([[[0, 1], [1, 2]], [[2, 0], [-1, -1]]])


def test_value_and_gradient_equal_the_python_path(family="utilities"):
    """Plackett-Luce utilities (the logits family runs the same callback with another prop; its
    JAX graph adds the permanent's FFI call, 10 s more of compilation)."""
    x = pt.vector("x") if family == "utilities" else pt.matrix("x")
    lp = pm.logp(PartialOrder.dist(**{family: x}, pairs=PREFS), PREFS).sum()
    outs = [pytensor.function([x], [lp, pytensor.grad(lp, x)], mode=mode)
            for mode in ("JAX", "FAST_COMPILE")]
    value = np.random.default_rng(0).normal(size=3 if family == "utilities" else (3, 3))
    (a, ga), (b, gb) = (f(value) for f in outs)
    assert float(a) == pytest.approx(float(b), abs=1e-12)
    np.testing.assert_allclose(np.asarray(ga), gb, atol=1e-12)


def test_cycle_raises():
    u = pt.vector("u")
    bad = np.array([[[0, 1], [1, 0]]])
    f = pytensor.function([u], pm.logp(PartialOrder.dist(utilities=u, pairs=[[0, 1]]), bad),
                          mode="JAX")
    with pytest.raises(Exception, match="cyclic preferences"):
        f(np.zeros(2))


def test_draws():
    u = np.array([0.3, -0.1, 0.5])
    d = pm.draw(PartialOrder.dist(utilities=u, pairs=PREFS), random_seed=1, mode="JAX")
    b = pm.draw(BradleyTerry.dist(u, pairs=[0, 1]), draws=50, random_seed=1, mode="JAX")
    np.testing.assert_array_equal(np.sort(d, axis=-1), np.sort(PREFS, axis=-1))
    assert set(map(tuple, b)) <= {(0, 1), (1, 0)}
