"""PermutationExpFamily: logp vs enumeration, draws vs exact probabilities, shapes, errors, PyMC."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.distributions.distribution import support_point
from pymc.logprob.utils import ParameterValueError
from scipy import stats

from pm_perm import PermutationExpFamily, edge_logits
from pm_perm.reference.permutations import (
    all_permutations,
    log_permanent_enum,
    permutation_logp_enum,
)
from pm_perm.reference.subsets import ordinal_labelings


def _logits(rng, M, batch=(), forbid=0.2):
    W = rng.normal(scale=1.5, size=batch + (M, M))
    W[rng.random(W.shape) < forbid] = -np.inf
    for w in W.reshape(-1, M, M):
        w[np.arange(M), rng.permutation(M)] = rng.normal(size=M)
    return W


@pytest.mark.parametrize("M", range(1, 8))
def test_logp_matches_enumeration_and_normalises(M):
    rng = np.random.default_rng(M)
    W = _logits(rng, M)
    W[0, : M - 1] = -np.inf  # a row with a single allowed column ...
    W[np.arange(M), (np.arange(M) - 1) % M] = 0.3  # ... and a permutation that uses it
    y = PermutationExpFamily.dist(logits=W)
    perms = all_permutations(M)
    lp = pm.logp(y, perms).eval() if M > 1 else pm.logp(y, perms[0]).eval()[None]
    ref = permutation_logp_enum(W, perms)
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(np.isfinite(lp), finite)
    np.testing.assert_allclose(lp[finite], ref[finite], rtol=0, atol=1e-12)
    assert abs(np.exp(lp).sum() - 1.0) < 1e-12


@pytest.mark.parametrize("M", range(1, 8))
def test_support_point_is_enumerated_mode(M):
    rng = np.random.default_rng(10 + M)
    W = _logits(rng, M, batch=(2,))
    mode = support_point(PermutationExpFamily.dist(logits=W)).eval()
    perms = all_permutations(M)
    for b in range(2):
        scores = W[b][np.arange(M), perms].sum(-1)
        assert abs(W[b][np.arange(M), mode[b]].sum() - scores.max()) < 1e-12
    sized = support_point(PermutationExpFamily.dist(logits=W[0], size=(3,))).eval()
    assert sized.shape == (3, M)


def test_not_a_permutation_gets_minus_inf():
    W = np.random.default_rng(0).normal(size=(4, 4))
    y = PermutationExpFamily.dist(logits=W)
    bad = np.array([[0, 0, 1, 2], [0, 1, 2, 4], [-1, 0, 1, 2], [3, 2, 1, 0]])
    lp = pm.logp(y, bad).eval()
    assert np.all(lp[:3] == -np.inf) and np.isfinite(lp[3])


def test_support_check_matches_enumeration():
    """logp is finite exactly on the permutations among every vector of {-1, ..., M}^M, for
    M = 1..4, and on none of them shifted by 0.5, 1e-9 or NaN (the check counts matches on
    the one-hot table; it replaced a sort, and must refuse what the sort refused)."""
    W, v = pt.matrix("W"), pt.matrix("v")
    logp = pm.logp(PermutationExpFamily.dist(logits=W), v).eval
    for M in range(1, 5):
        values = (ordinal_labelings(M, M + 2) - 1).astype(float)  # {-1, ..., M}^M
        is_perm = np.array([sorted(row) == list(range(M)) for row in values])
        assert is_perm.sum() == np.prod(np.arange(1, M + 1))
        W0 = np.random.default_rng(M).normal(size=(M, M))
        lp = logp({W: W0, v: values})
        np.testing.assert_array_equal(np.isfinite(lp), is_perm)
        for shift in (0.5, 1e-9, np.nan):
            shifted = values[is_perm].copy()
            shifted[:, -1] += shift
            assert np.all(logp({W: W0, v: shifted}) == -np.inf), (M, shift)


def test_uniform_logits_give_minus_log_factorial():
    lp = pm.logp(PermutationExpFamily.dist(logits=np.zeros((6, 6))), np.arange(6)).eval()
    assert abs(lp + np.log(720.0)) < 1e-12


def test_batch_and_size_shapes():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(3, 5, 5))
    y = PermutationExpFamily.dist(logits=W)
    assert pm.draw(y, random_seed=1).shape == (3, 5)
    assert pm.draw(y, draws=4, random_seed=1).shape == (4, 3, 5)
    y2 = PermutationExpFamily.dist(logits=W, size=(2, 3))
    d = pm.draw(y2, random_seed=1)
    assert d.shape == (2, 3, 5) and pm.logp(y2, d).eval().shape == (2, 3)
    y3 = PermutationExpFamily.dist(logits=W[0], shape=(4, 5))
    assert pm.draw(y3, random_seed=2).shape == (4, 5)
    np.testing.assert_allclose(
        pm.logp(y, d[0]).eval(), permutation_logp_enum(W, d[0]), atol=1e-12
    )


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_draws_chi_square_at_m4(mode):
    """Chi-square over all 24 permutations (numba core and NumPy rng_fn paths).

    10,000 draws at a fixed seed; fails if p < 1e-4 (false-failure rate 1e-4 per mode).
    """
    rng = np.random.default_rng(4)
    W = _logits(rng, 4, forbid=0.1)
    y = PermutationExpFamily.dist(logits=W, size=(10_000,))
    draws = pm.draw(y, random_seed=5, mode=mode)
    perms = all_permutations(4)
    p = np.exp(W[np.arange(4), perms].sum(-1) - log_permanent_enum(W))
    codes = (draws * np.array([64, 16, 4, 1])).sum(-1)
    pcodes = (perms * np.array([64, 16, 4, 1])).sum(-1)
    counts = np.array([(codes == c).sum() for c in pcodes])
    assert counts.sum() == 10_000
    keep = p > 0
    assert counts[~keep].sum() == 0
    chi2 = ((counts[keep] - 1e4 * p[keep]) ** 2 / (1e4 * p[keep])).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_bad_logits():
    with pytest.raises(ValueError, match="square"):
        PermutationExpFamily.dist(logits=np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"\(\.\.\., M, M\)"):
        PermutationExpFamily.dist(logits=np.zeros(3))
    with pytest.raises(ValueError, match="method"):
        PermutationExpFamily.dist(logits=np.zeros((3, 3)), method="magic")
    y = PermutationExpFamily.dist(logits=np.array([[0.0, np.nan], [0.0, 0.0]]))
    with pytest.raises(ParameterValueError, match="NaN"):
        pm.logp(y, np.array([0, 1])).eval()
    W = np.zeros((3, 3))
    W[:2, :2] = -np.inf
    with pytest.raises(ParameterValueError, match="admit no permutation"):
        pm.logp(PermutationExpFamily.dist(logits=W), np.array([2, 0, 1])).eval()
    with pytest.raises(ValueError, match="no permutation"):
        pm.draw(PermutationExpFamily.dist(logits=W), random_seed=1)


def test_beyond_exact_limit():
    with pytest.raises(ValueError, match="EXACT_MAX_M"):
        PermutationExpFamily.dist(logits=np.zeros((30, 30)))
    W = pt.matrix("W")
    y = PermutationExpFamily.dist(logits=W)
    with pytest.raises(ValueError, match="exact limit"):
        pm.logp(y, pt.arange(W.shape[0])).eval({W: np.zeros((28, 28))})


@pytest.mark.parametrize(
    "observed, match",
    [
        (np.array([[0.0, 1.5, 2.0]]), "integers"),
        (np.array([[0, 1]]), "length 2"),
        (np.array([[0, 1, 2], [0, 0, 2]]), r"observed\[1\].*not a permutation"),
        (np.array([[0, 1, np.nan]]), "NaN"),
        (np.array(["a", "b", "c"]), "integers"),
    ],
)
def test_malformed_observed_fails_at_build(observed, match):
    with pm.Model():
        with pytest.raises(ValueError, match=match):
            PermutationExpFamily("y", logits=np.zeros((3, 3)), observed=observed)


def test_data_container_is_checked_by_its_value_at_build():
    with pm.Model():
        bad = pm.Data("bad", np.array([[0, 1, 2], [1, 1, 0]]))
        with pytest.raises(ValueError, match=r"observed\[1\].*not a permutation"):
            PermutationExpFamily("y", logits=np.zeros((3, 3)), observed=bad)
    with pm.Model() as m:
        good = pm.Data("good", np.array([[2, 0, 1]]))
        PermutationExpFamily("y", logits=np.zeros((3, 3)), observed=good)
        assert np.isclose(m.compile_logp()({}), -np.log(6))
        # values set later are not checked at build: outside the support, logp is -inf
        pm.set_data({"good": np.array([[0, 0, 1]])})
        assert m.compile_logp()({}) == -np.inf


def test_integral_floats_are_accepted():
    with pm.Model() as m:
        PermutationExpFamily("y", logits=np.zeros((3, 3)), observed=np.array([[2.0, 0.0, 1.0]]))
    assert np.isclose(m.compile_logp()({}), -np.log(6))


def test_edge_logits_and_forbidden():
    x = np.random.default_rng(2).normal(size=(2, 3, 3, 4))
    th = np.array([1.0, 0.0, -1.0, 2.0])
    np.testing.assert_allclose(edge_logits(x, th).eval(), x @ th)
    forb = np.zeros((3, 3), dtype=bool)
    forb[0, 1] = True
    W = edge_logits(x, th, forbidden=forb).eval()
    assert np.all(W[:, 0, 1] == -np.inf)


def _matching_data(seed, N=60, M=5, d=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, M, M, d))
    theta = np.array([1.0, -1.0, 0.5])
    y = pm.draw(PermutationExpFamily.dist(logits=x @ theta), random_seed=seed)
    return x, theta, y


def test_find_map_gradient_and_predictive():
    x, theta, y = _matching_data(0)
    with pm.Model() as model:
        th = pm.Normal("theta", 0, 2, shape=3)
        PermutationExpFamily("y", logits=edge_logits(x, th), observed=y)
        # the model's gradient is the analytic one (onehot - marginals) and matches FD
        dlogp = model.compile_dlogp()
        logp = model.compile_logp()
        pt0 = {"theta": np.array([0.3, -0.2, 0.1])}
        g = dlogp(pt0)
        eps = 1e-6
        for k in range(3):
            e = np.zeros(3)
            e[k] = eps
            fd = (logp({"theta": pt0["theta"] + e}) - logp({"theta": pt0["theta"] - e})) / (2 * eps)
            assert abs(fd - g[k]) < 1e-5
        fit = pm.find_MAP(progressbar=False, return_inferencedata=True, jitter=False)
        est = fit.posterior["theta"].values.ravel()
        assert np.all(np.abs(est - theta) < 0.5)
        prior = pm.sample_prior_predictive(draws=20, random_seed=1)
        yp = prior.prior_predictive["y"].values
        assert yp.shape == (1, 20, 60, 5)
        assert np.all(np.sort(yp, -1) == np.arange(5))


@pytest.mark.numba  # sampling: compiled code wins
def test_nuts_pymc_slice_and_posterior_predictive():
    x, theta, y = _matching_data(1)
    with pm.Model():
        th = pm.Normal("theta", 0, 2, shape=3)
        PermutationExpFamily("y", logits=edge_logits(x, th), observed=y)
        idata = pm.sample(
            200, tune=200, chains=2, cores=1, nuts_sampler="pymc", progressbar=False,
            random_seed=2, compute_convergence_checks=False,
        )
        post = idata.posterior["theta"]
        assert np.all(np.abs(post.mean(("chain", "draw")).values - theta)
                      < 4 * post.std(("chain", "draw")).values + 0.05)
        sl = pm.sample(
            150, tune=100, chains=1, step=pm.Slice(), progressbar=False, random_seed=3,
            compute_convergence_checks=False,
        )
        assert np.all(np.abs(sl.posterior["theta"].mean(("chain", "draw")).values - theta) < 0.6)
        pp = pm.sample_posterior_predictive(idata, progressbar=False, random_seed=4)
        yp = pp.posterior_predictive["y"].values
        assert yp.shape == (2, 200, 60, 5)
        assert np.all(np.sort(yp, -1) == np.arange(5))


def test_nutpie_default_sampler():
    pytest.importorskip("nutpie")
    x, theta, y = _matching_data(2, N=40)
    with pm.Model():
        th = pm.Normal("theta", 0, 2, shape=3)
        PermutationExpFamily("y", logits=edge_logits(x, th), observed=y)
        idata = pm.sample(200, tune=200, chains=2, progressbar=False, random_seed=5)
    assert idata.sample_stats["diverging"].sum() == 0
    post = idata.posterior["theta"]
    assert np.all(np.abs(post.mean(("chain", "draw")).values - theta)
                  < 4 * post.std(("chain", "draw")).values + 0.05)


def test_top_level_api():
    from pm_perm.kernels.matching import max_weight_matching
    from pm_perm.kernels.permanent import EXACT_MAX_M

    assert EXACT_MAX_M == 26
    assert max_weight_matching(np.eye(3)).tolist() == [0, 1, 2]


def test_bethe_refuses_logits_with_no_permutation_like_exact(capfd):
    # X: rows 0 and 1 reach column 0 only, no row or column all -inf; R: an all -inf row.
    # Before, method="bethe" gave -inf from pm.logp with ZeroDivisionError tracebacks on
    # stderr (X) or a plain ValueError (R), and its draws advised swap MCMC.
    X = np.array([[0, -np.inf, -np.inf], [0, -np.inf, -np.inf], [0, 0, 0.0]])
    R = np.zeros((3, 3))
    R[0] = -np.inf
    for W in (X, R):
        for method in ("exact", "bethe"):
            rv = PermutationExpFamily.dist(logits=W, method=method)
            with pytest.raises(ParameterValueError, match=r"^the logits admit no permutation "
                               r"\(every one uses a -inf entry\)"):
                pm.logp(rv, np.array([2, 0, 1])).eval()
        for mode in ("NUMBA", "FAST_COMPILE"):
            with pytest.raises(ValueError, match=r"logits admit no permutation \(every one uses "
                               r"a -inf entry\)"):
                pm.draw(PermutationExpFamily.dist(logits=W, method="bethe"), random_seed=0,
                        mode=mode)
    assert "ZeroDivisionError" not in capfd.readouterr().err
    # in a model the failed check is -inf for both methods (a plain ValueError crashed bethe)
    for W in (X, R):
        for method in ("exact", "bethe"):
            with pm.Model() as model:
                Wd = pm.Data("Wd", W)
                PermutationExpFamily("y", logits=Wd, method=method, observed=[2, 0, 1])
            assert model.compile_logp()({}) == -np.inf


@pytest.mark.parametrize("method", ["exact", "glynn", "bethe"])
def test_m_zero_refused_at_dist(method):
    # before: the draw said "M >= 1" but logp returned -0. after a constant-folding traceback
    for shape in ((0, 0), (2, 0, 0)):
        with pytest.raises(ValueError, match=r"^PermutationExpFamily: logits must have shape "
                           r"\(\.\.\., M, M\) with M >= 1 \(at least one item\); got shape"):
            PermutationExpFamily.dist(logits=np.zeros(shape), method=method)
