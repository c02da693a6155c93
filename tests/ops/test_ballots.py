"""expand_counts / repeat_rows: values on every backend, refused counts, gradient, and the
rewrite that makes a summed repeat cost per distinct row."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad

from pm_perm.ops.ballots import ExpandCounts, RepeatRows, expand_counts, repeat_rows
from tests._jax import require_jax

ORDERS = np.array([[0, 1, 2], [1, 0, -1], [2, 1, 0], [0, 0, 2]])
COUNTS = np.array([2, 0, 3, 1])
MODES = ["NUMBA", "FAST_RUN"]  # FAST_RUN is the tests' Python linker (tests/conftest.py)


def _jax():
    require_jax()
    import pm_perm.backends.jax.dispatch  # noqa: F401  (registers pm_perm's JAX Ops)

    return "JAX"


@pytest.mark.numba
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("counts_dtype", ["int64", "float64"])
def test_values_match_numpy_repeat(mode, counts_dtype):
    o, c = pt.lmatrix("o"), pt.vector("c", dtype=counts_dtype)
    x = pt.dvector("x")
    f = pytensor.function([o, x, c], [expand_counts(o, c), repeat_rows(x, c)], mode=mode)
    xs = np.array([0.5, -1.0, 2.0, 3.5])
    e, r = f(ORDERS, xs, COUNTS.astype(counts_dtype))
    np.testing.assert_array_equal(e, np.repeat(ORDERS, COUNTS, axis=0))
    np.testing.assert_array_equal(r, np.repeat(xs, COUNTS))
    assert e.shape == (6, 3) and e.dtype == np.int64  # the row of count 0 vanished
    e, r = f(ORDERS[:0], xs[:0], np.zeros(0, dtype=counts_dtype))  # no rows
    assert e.shape == (0, 3) and r.shape == (0,)


@pytest.mark.numba
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad", [[2, -1, 3, 1], [2, 0.5, 3, 1], [2, np.inf, 3, 1],
                                 [2, np.nan, 3, 1]])
def test_invalid_counts_are_an_error(mode, bad):
    o, c = pt.lmatrix("o"), pt.dvector("c")
    f = pytensor.function([o, c], expand_counts(o, c), mode=mode)
    with pytest.raises(ValueError, match="counts must be finite non-negative integers"):
        f(ORDERS, np.array(bad, dtype=float))
    with pytest.raises(ValueError, match="one entry per row"):
        f(ORDERS, np.ones(3))


def test_jax_with_constant_counts_and_a_clear_error_for_traced_ones():
    mode = _jax()
    x = pt.dvector("x")
    y = repeat_rows(x, pt.constant(COUNTS.astype(float)))
    s = pt.sum(y * pt.arange(6))
    f = pytensor.function([x], [y, pt.grad(s, x)], mode=mode)
    xs = np.array([0.5, -1.0, 2.0, 3.5])
    r, g = f(xs)
    np.testing.assert_array_equal(np.asarray(r), np.repeat(xs, COUNTS))
    np.testing.assert_allclose(np.asarray(g), [0 + 1, 0, 2 + 3 + 4, 5])  # segment sums
    c = pt.dvector("c")
    f = pytensor.function([x, c], repeat_rows(x, c), mode=mode)
    with pytest.raises(ValueError, match="counts known when the graph is compiled"):
        f(xs, COUNTS.astype(float))


def test_gradient_is_the_segment_sum():
    rng = np.random.default_rng(0)
    w = rng.normal(size=int(COUNTS.sum()))
    verify_grad(lambda x: pt.sum(repeat_rows(x, COUNTS) * w), [rng.normal(size=4)], rng=rng)
    verify_grad(lambda x: pt.sum(repeat_rows(x, COUNTS) ** 2), [rng.normal(size=4)], rng=rng)
    verify_grad(lambda x: pt.sum(repeat_rows(x, COUNTS)), [rng.normal(size=4)], rng=rng)
    x2 = rng.normal(size=(4, 3))
    verify_grad(lambda x: pt.sum(pt.sin(repeat_rows(x, COUNTS))), [x2], rng=rng)
    verify_grad(lambda x: pt.sum(repeat_rows(x, COUNTS)), [x2], rng=rng)


def test_summed_repeat_costs_per_distinct_row():
    """sum(repeat_rows(x, c)) and its gradient compile to no per-ballot node: ``sum(c * x)``
    and ``c`` (a row of count 0 with x = -inf contributes 0, not NaN)."""
    x, c = pt.dvector("x"), pt.dvector("c")
    s = pt.sum(repeat_rows(x, c))
    f = pytensor.function([x, c], [s, pt.grad(s, x)])
    ops = {type(n.op) for n in f.maker.fgraph.apply_nodes}
    assert RepeatRows not in ops and ExpandCounts not in ops
    total, g = f(np.array([1.0, -np.inf, 3.0]), np.array([2.0, 0.0, 1e12]))
    assert total == 2.0 + 3e12
    np.testing.assert_array_equal(g, [2.0, 0.0, 1e12])
    # a sum over axis 0 of rows of several entries
    m = pt.dmatrix("m")
    s0 = pt.sum(repeat_rows(m, c), axis=0)
    f = pytensor.function([m, c], s0)
    assert RepeatRows not in {type(n.op) for n in f.maker.fgraph.apply_nodes}
    xs = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(f(xs, np.array([1.0, 2.0, 0.0])), [0 + 2 * 2, 1 + 2 * 3])


def test_expand_counts_is_data_without_gradient():
    from pytensor.gradient import DisconnectedInputError

    x = pt.dmatrix("x")
    with pytest.raises(DisconnectedInputError):
        pytensor.grad(pt.sum(expand_counts(x, COUNTS)), x)
