"""``PLAnchoredRanking``: logp against enumeration, draws by chi-square, counts per ballot, and
the errors (ties before the end of a ballot, bad parameters)."""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from pymc.logprob.utils import ParameterValueError
from pytensor.gradient import verify_grad

from pm_perm._modes import PYTHON_MODE
from pm_perm.distributions import PlackettLuce, PLAnchoredRanking
from pm_perm.kernels.pl_tilted import pl_tilted_loglik
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import (
    every_top_k_order,
    partial_orders_loglik_enum,
    pl_tilted_complete_logp,
)
from pm_perm.testing import chi_square_pvalue

M = 4
ORDERS = np.array([[0, 1, 2, 3], [1, 0, 3, 2], [2, 0, 1, -1], [0, -1, -1, -1],
                   [0, 1, 2, 2], [3, 2, 1, 0]])  # complete, top-k, tied last block
COUNTS = np.array([5, 2, 4, 0, 1, 3])
N = int(COUNTS.sum())


def _params(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1.0, M), rng.normal(0, 1.5, (M, M))


def _enum(u, D, orders):
    perms = all_permutations(len(u))
    return partial_orders_loglik_enum(pl_tilted_complete_logp(u, D, perms), orders, perms)


def test_logp_of_every_top_k_order_matches_enumeration():
    u, D = _params(0)
    orders = every_top_k_order(M)
    pk = np.array([0.1, 0.2, 0.3, 0.15, 0.25])
    got = pm.logp(PLAnchoredRanking.dist(u, D), orders).eval()
    np.testing.assert_allclose(got, _enum(u, D, orders), rtol=1e-10, atol=1e-10)
    got = pm.logp(PLAnchoredRanking.dist(u, D, length_probs=pk), orders).eval()
    k = (orders >= 0).sum(1)
    np.testing.assert_allclose(got, _enum(u, D, orders) + np.log(pk[k]), rtol=1e-10)


def test_zero_deviations_is_plackett_luce_and_weights_multiply_per_row():
    u, _ = _params(1)
    w = np.array([1, 3, 0, 2, 1, 1])
    a = pm.logp(PLAnchoredRanking.dist(u, np.zeros((M, M)), weights=w), ORDERS).eval()
    b = pm.logp(PlackettLuce.dist(u, weights=w), ORDERS).eval()
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_batched_parameters_one_per_row():
    """A (u, D) per row (Blockwise path) equals the kernel row by row; gradient by
    verify_grad."""
    rng = np.random.default_rng(2)
    u, D = rng.normal(size=(3, M)), rng.normal(size=(3, M, M))
    rows = ORDERS[:3]
    got = pm.logp(PLAnchoredRanking.dist(u, D), rows).eval()
    want = [pl_tilted_loglik(u[b], D[b], rows[b:b + 1])[0] for b in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-10)

    def f(uu, DD):
        return pt.sum(pm.logp(PLAnchoredRanking.dist(uu, DD), rows))

    verify_grad(f, [u, D], rng=rng, mode=PYTHON_MODE)


def test_gradient_of_shared_parameters():
    u, D = _params(3)
    rng = np.random.default_rng(3)

    def f(uu, DD):
        return pt.sum(pm.logp(PLAnchoredRanking.dist(uu, DD, weights=COUNTS), ORDERS))

    verify_grad(f, [u, D], rng=rng, mode=PYTHON_MODE)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_complete_draws_chi_square(mode):
    """Chi-square over all 24 complete orders of M = 4 (numba core and NumPy rng_fn paths).

    10,000 draws at a fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    u, D = _params(4)
    draws = pm.draw(PLAnchoredRanking.dist(u, D, size=(10_000,)), random_seed=5, mode=mode)
    perms = all_permutations(M)
    assert chi_square_pvalue(draws, perms, np.exp(_enum(u, D, perms))) > 1e-4


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_top_k_draws_chi_square(mode):
    """Chi-square over all 65 top-k orders of M = 4 with a length distribution; 20,000 draws
    at a fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode)."""
    u, D = _params(6)
    pk = np.array([0.05, 0.3, 0.25, 0.1, 0.3])
    draws = pm.draw(PLAnchoredRanking.dist(u, D, length_probs=pk, size=(20_000,)),
                    random_seed=7, mode=mode)
    rows = every_top_k_order(M)
    k = (rows >= 0).sum(1)
    p = pk[k] * np.exp(_enum(u, D, rows))
    assert len(rows) == 65
    np.testing.assert_allclose(p.sum(), 1.0, atol=1e-12)
    assert chi_square_pvalue(draws, rows, p) > 1e-4


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_pattern_draws_keep_length_and_last_tie(mode):
    pattern = np.array([[0, 1, 2, 2], [1, 0, -1, -1]])
    y = pm.draw(PLAnchoredRanking.dist(*_params(8), pattern=pattern, size=(50, 2)),
                random_seed=9, mode=mode)
    np.testing.assert_array_equal(np.sort(y, axis=-1),
                                  np.broadcast_to(np.sort(pattern, axis=-1), y.shape))


def test_ties_before_the_end_are_refused_naming_the_alternatives():
    u, D = _params(10)
    tied = np.array([[0, 0, 2, 3]])
    with pm.Model(), pytest.raises(ValueError, match="PartialRanking.*PlackettLuce"):
        PLAnchoredRanking("y", u, D, observed=tied)
    with pytest.raises(ParameterValueError, match="PartialRanking"):
        pm.logp(PLAnchoredRanking.dist(u, D), tied).eval()
    # a tie in the last block is exact: the same event as the unranked tail
    a = pm.logp(PLAnchoredRanking.dist(u, D), [[0, 1, 2, 2], [0, 1, -1, -1]]).eval()
    np.testing.assert_allclose(a[0], a[1], rtol=1e-12)


def test_bad_parameters_are_refused():
    u, D = _params(11)
    with pytest.raises(ValueError, match=r"deviations must have shape \(..., 4, 4\)"):
        PLAnchoredRanking.dist(u, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="weights must be non-negative integers"):
        PLAnchoredRanking.dist(u, D, weights=[1.5])
    with pytest.raises(ValueError, match="M \\+ 1 = 5 entries"):
        PLAnchoredRanking.dist(u, D, length_probs=[0.5, 0.5])
    bad = D.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ParameterValueError, match="must be finite"):
        pm.logp(PLAnchoredRanking.dist(u, bad), ORDERS).eval()
    for mode in ("NUMBA", "FAST_COMPILE"):
        with pytest.raises(ValueError, match="must be finite"):
            pm.draw(PLAnchoredRanking.dist(u, bad), mode=mode)
    with pm.Model(), pytest.raises(ValueError, match=r"observed\[0\] = .* not a valid rank-form"):
        PLAnchoredRanking("y", u, D, observed=[[0, 2, 2, -1]])  # not rank form


def _model():
    with pm.Model() as model:
        u = pm.Normal("u", 0.0, 1.0, shape=M)
        D = pm.Normal("D", 0.0, 0.5, shape=(M, M))
        PLAnchoredRanking("y", u, D, COUNTS, observed=ORDERS)  # weights positional (third)
    return model


def _draws(S=20):
    rng = np.random.default_rng(12)
    return xr.DataTree.from_dict({"posterior": xr.Dataset({
        "u": (("chain", "draw", "u_dim_0"), rng.normal(size=(1, S, M))),
        "D": (("chain", "draw", "D_dim_0", "D_dim_1"), 0.5 * rng.normal(size=(1, S, M, M))),
    })})


def test_counts_give_one_pointwise_row_per_ballot():
    model, draws = _model(), _draws()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt = pm.compute_log_likelihood(draws.copy(), model=model, progressbar=False,
                                       compile_kwargs={"mode": PYTHON_MODE})
    ll = dt["log_likelihood"]["y"].values
    assert ll.shape == (1, 20, N)
    post = draws["posterior"]
    for s in (0, 7):
        want = pl_tilted_loglik(post["u"].values[0, s], post["D"].values[0, s], ORDERS)
        np.testing.assert_allclose(ll[0, s], np.repeat(want, COUNTS), rtol=1e-10)
    # the summed logp is counts * log p per distinct order
    point = {"u": post["u"].values[0, 0], "D": post["D"].values[0, 0]}
    f = model.compile_logp(vars=[model["y"]], jacobian=False)
    want = COUNTS @ pl_tilted_loglik(point["u"], point["D"], ORDERS)
    assert f(point) == pytest.approx(want, rel=1e-12)


def test_posterior_predictive_keeps_each_ballots_pattern():
    model, draws = _model(), _draws(3)
    pp = pm.sample_posterior_predictive(draws, model=model, progressbar=False, random_seed=2,
                                        compile_kwargs={"mode": PYTHON_MODE})
    y = pp["posterior_predictive"]["y"].values
    assert y.shape == (1, 3, N, M)
    expanded = np.repeat(ORDERS, COUNTS, axis=0)
    np.testing.assert_array_equal(np.sort(y, axis=-1),
                                  np.broadcast_to(np.sort(expanded, axis=-1), y.shape))


def test_jax_draws_are_valid_top_k_orders():
    """The JAX host-callback draw (``pm_perm.backends.jax.random``) with batched parameters."""
    pytest.importorskip("jax")
    rng = np.random.default_rng(13)
    u, D = rng.normal(size=(2, M)), rng.normal(size=(2, M, M))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the JAX linker copies the shared rng
        y = pm.draw(PLAnchoredRanking.dist(u, D, length_probs=[0, 0, 0.5, 0, 0.5]), draws=5,
                    random_seed=1, mode="JAX")
    assert y.shape == (5, 2, M) and y.dtype == np.int64
    k = (y >= 0).sum(-1)
    assert set(np.unique(k)) <= {2, M}
    for row in y.reshape(-1, M):  # the top k items hold positions 0..k-1
        np.testing.assert_array_equal(np.sort(row[row >= 0]), np.arange((row >= 0).sum()))
