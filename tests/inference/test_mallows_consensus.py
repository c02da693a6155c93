"""Tests of MallowsConsensusGibbs (pm_perm.inference.mallows_consensus) and its kernel
(pm_perm.kernels.mallows_gibbs): the compiled (alpha, rho) step of a Mallows model with a latent
consensus.

Exactness against enumeration of all n! consensus rankings (n = 5): the step's log target equals
the model's log-density up to a constant (every distance and prior it accepts); rho given alpha
and alpha given rho by chi-square and Kolmogorov-Smirnov tests of the kernel's draws; the joint
posterior by ``pm.sample`` against enumeration on an alpha grid (z-tests). Each statistical test
runs at a fixed seed; its false-failure rate (the chance that a correct sampler fails it at a
random seed) is stated in its docstring.
"""

import itertools
import math

import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from scipy import stats

import pm_perm
from pm_perm.inference.mallows_consensus import (
    MallowsConsensusGibbs,
    mallows_consensus_spec,
)
from pm_perm.inference.step_methods import PermutationLeapShift
from pm_perm.kernels.mallows import log_distance_counts, log_normaliser
from pm_perm.kernels.mallows_gibbs import (
    _alpha_target,
    bitgen_fields,
    consensus_cost,
    consensus_sweeps,
    summed_distance,
)

N_ITEMS = 5
PERMS = np.array(list(itertools.permutations(range(N_ITEMS))))
R5 = np.array([[0, 1, 2, 3, 4], [1, 0, 2, 4, 3], [0, 2, 1, 3, 4], [2, 1, 0, 3, 4]])
LOGITS = np.random.default_rng(3).normal(0.0, 0.5, (N_ITEMS, N_ITEMS))


def _distance(R, rho, distance):
    """Definitional distances between rank vectors (brute force)."""
    if distance == "footrule":
        return np.abs(R - rho).sum()
    if distance == "spearman":
        return ((R - rho) ** 2).sum()
    if distance == "hamming":
        return (R != rho).sum()
    n = len(rho)
    return sum((R[i] - R[j]) * (rho[i] - rho[j]) < 0 for i in range(n) for j in range(i + 1, n))


def _summed(rho, distance, R=R5):
    return sum(_distance(r, rho, distance) for r in R)


def _model(distance="footrule", prior="exponential", logits=None, R=R5):
    n = R.shape[1]
    with pm.Model() as model:
        rho = pm_perm.PermutationExpFamily(
            "rho", logits=np.zeros((n, n)) if logits is None else logits)
        alpha = {"exponential": lambda: pm.Exponential("alpha", 0.1),
                 "gamma": lambda: pm.Gamma("alpha", 2.0, 0.5),
                 "halfnormal": lambda: pm.HalfNormal("alpha", 5.0),
                 "uniform": lambda: pm.Uniform("alpha", 0.0, 20.0)}[prior]()
        pm_perm.Mallows("R", rho=rho, alpha=alpha, distance=distance, observed=R)
    return model


@pytest.mark.parametrize("distance", ["footrule", "spearman", "hamming", "kendall"])
def test_summed_distance_matches_definition(distance):
    """S(rho) from the cost matrix equals the definitional sum for every rho of 5 items."""
    C = consensus_cost(R5, distance)
    kind = 1 if distance == "kendall" else 0
    for rho in PERMS:
        assert summed_distance(rho, kind, C) == _summed(rho, distance)


@pytest.mark.parametrize("distance,prior", [("footrule", "exponential"), ("spearman", "gamma"),
                                            ("hamming", "halfnormal"), ("kendall", "gamma")])
def test_log_target_is_the_model_logp(distance, prior):
    """The step's log target (kernel's alpha target + rho's logits) minus the model's logp is the
    same constant at every (log alpha, rho): the recognised prior, distance table and data are
    the model's."""
    model = _model(distance, prior, LOGITS)
    spec = mallows_consensus_spec(model)
    d, lc = log_distance_counts(distance, N_ITEMS)
    C = consensus_cost(spec.rankings, distance)
    logp = model.compile_logp()
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(12):
        rho, u = rng.permutation(N_ITEMS), rng.normal(1.0, 1.0)
        S = summed_distance(rho, 1 if distance == "kendall" else 0, C)
        ours = _alpha_target(u, S, N_ITEMS, 4.0, d, lc, spec.prior) \
            + LOGITS[np.arange(N_ITEMS), rho].sum()
        diffs.append(ours - logp({"rho": rho, "alpha_log__": u}))
    assert np.ptp(diffs) < 1e-9, diffs


def _rho_conditional(distance, alpha, logits):
    lp = np.array([-(alpha / N_ITEMS) * _summed(r, distance) + logits[np.arange(N_ITEMS), r].sum()
                   for r in PERMS])
    p = np.exp(lp - lp.max())
    return p / p.sum()


@pytest.mark.parametrize("distance", ["footrule", "spearman", "hamming", "kendall"])
def test_rho_given_alpha_is_exact(distance):
    """Draws of rho with alpha fixed (60 leap-and-shift proposals between draws, leap size 2,
    non-zero logits) against the exact conditional over all 120 rankings: chi-square over the
    rankings (expected counts pooled to >= 5), p > 0.001 (false-failure rate 0.1% per distance
    at a random seed; the draws are nearly independent)."""
    alpha = {"footrule": 3.0, "spearman": 1.0, "hamming": 4.0, "kendall": 3.0}[distance]
    C = consensus_cost(R5, distance)
    d, lc = log_distance_counts(distance, N_ITEMS)
    rng = np.random.default_rng(11)
    bitgen = bitgen_fields(rng)
    rho = np.arange(N_ITEMS, dtype=np.int64)
    index = {tuple(p): k for k, p in enumerate(PERMS)}
    counts = np.zeros(len(PERMS))
    draws = 6000
    for _ in range(draws):
        consensus_sweeps(bitgen, rho, math.log(alpha), 1, 60, 2, int(distance == "kendall"), C,
                         LOGITS, d, lc, 4.0, np.zeros(3), 1.0, False, True)
        counts[index[tuple(rho)]] += 1
    expected = draws * _rho_conditional(distance, alpha, LOGITS)
    order = np.argsort(expected)
    obs_pooled, exp_pooled, o, e = [], [], 0.0, 0.0
    for k in order:
        o, e = o + counts[k], e + expected[k]
        if e >= 5:
            obs_pooled.append(o)
            exp_pooled.append(e)
            o = e = 0.0
    obs_pooled[-1] += o
    exp_pooled[-1] += e
    p = stats.chisquare(obs_pooled, exp_pooled).pvalue
    assert p > 1e-3, p


def test_alpha_given_rho_is_exact():
    """Draws of alpha with rho fixed (5 slice updates between draws) against the exact
    conditional density (prior Exponential(0.1), footrule, its normaliser by
    ``log_normaliser``) on a fine grid: Kolmogorov-Smirnov, p > 0.001 (false-failure rate
    0.1%)."""
    C = consensus_cost(R5, "footrule")
    d, lc = log_distance_counts("footrule", N_ITEMS)
    rho = np.array([0, 1, 2, 3, 4])
    S = _summed(rho, "footrule")
    prior = np.array([0.0, 0.1, 0.0])
    rng = np.random.default_rng(5)
    bitgen = bitgen_fields(rng)
    u, draws = 0.0, []
    for _ in range(3000):
        u, _acc, _status = consensus_sweeps(bitgen, rho, u, 5, 1, 1, 0, C, np.zeros((5, 5)), d,
                                            lc, 4.0, prior, 1.0, True, False)
        draws.append(math.exp(u))
    grid = np.linspace(1e-6, 60.0, 200_001)
    log_dens = -0.1 * grid - grid / N_ITEMS * S - 4 * log_normaliser("footrule", N_ITEMS, grid)
    cdf = np.cumsum(np.exp(log_dens - log_dens.max()))
    cdf /= cdf[-1]
    p = stats.kstest(draws, lambda x: np.interp(x, grid, cdf)).pvalue
    assert p > 1e-3, p


def _exact_joint(distance, R, rate, logits):
    """Posterior of (rho, alpha) over all rankings and an alpha grid: P(rho), alpha mean, sd."""
    n = R.shape[1]
    grid = np.linspace(1e-6, 40.0, 8001)
    perms = np.array(list(itertools.permutations(range(n))))
    S = np.array([_summed(r, distance, R) for r in perms])
    W = logits[np.arange(n), perms].sum(axis=1)
    lz = log_normaliser(distance, n, grid)
    lp = (-rate * grid - len(R) * lz)[None, :] - np.outer(S, grid) / n + W[:, None]
    p = np.exp(lp - lp.max())
    p /= p.sum()
    pa = p.sum(axis=0)
    mean = (pa * grid).sum()
    return perms, p.sum(axis=1), mean, math.sqrt((pa * (grid - mean) ** 2).sum())


@pytest.mark.parametrize("distance", ["footrule", "kendall"])
def test_pm_sample_posterior_matches_enumeration(distance):
    """``pm.sample`` (assigning MallowsConsensusGibbs to both variables) against the exact
    posterior by enumeration (5 items, 4 assessors, non-zero logits on rho): P(rho = its exact
    mode) and alpha's mean and sd, MC errors from the effective sample size; |z| < 4 for each
    (false-failure rate about 2e-4 for the three at a random seed)."""
    import arviz as az

    model = _model(distance, "exponential", LOGITS)
    perms, p_rho, mean, sd = _exact_joint(distance, R5, 0.1, LOGITS)
    mode = perms[np.argmax(p_rho)]
    with model:
        idata = pm.sample(draws=3000, tune=300, chains=2, cores=1, random_seed=7,
                          progressbar=False, compute_convergence_checks=False)
    assert "accept_rate" in idata.sample_stats
    assert "diverging" not in idata.sample_stats  # no NUTS
    rho = idata.posterior["rho"].values
    is_mode = (rho == mode).all(axis=-1).astype(float)
    z_mode = (is_mode.mean() - p_rho.max()) / (is_mode.std() / math.sqrt(az.ess(is_mode)))
    alpha = idata.posterior["alpha"].values
    z_mean = (alpha.mean() - mean) / float(az.mcse(alpha, method="mean"))
    z_sd = (alpha.std() - sd) / float(az.mcse(alpha, method="sd"))
    assert max(abs(z_mode), abs(z_mean), abs(z_sd)) < 4, (z_mode, z_mean, z_sd)


def _assigned(model):
    with model:
        _, selected = assign_step_methods(model)
    return {cls: sorted(v.name for v in vars) for cls, vars in selected.items()}


def test_pm_sample_assigns_it_to_rho_and_alpha():
    assert _assigned(_model()) == {MallowsConsensusGibbs: ["alpha_log__", "rho"]}


def test_pm_data_rankings_get_it_and_the_step_reads_the_current_data():
    """Observed rankings in a ``pm.Data`` container (cast to int64 by Mallows, as in an SBC or
    any ``pm.set_data`` workflow) get the step too, and a step built after ``pm.set_data``
    scores the new rankings."""
    from pm_perm.inference.mallows_consensus import mallows_consensus_spec

    n = R5.shape[1]
    with pm.Model() as model:
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((n, n)))
        alpha = pm.Exponential("alpha", 0.1)
        pm_perm.Mallows("R", rho=rho, alpha=alpha, distance="footrule",
                        observed=pm.Data("R_obs", R5.astype(np.float64)))
    assert _assigned(model) == {MallowsConsensusGibbs: ["alpha_log__", "rho"]}
    np.testing.assert_array_equal(mallows_consensus_spec(model).rankings, R5)
    with model:
        pm.set_data({"R_obs": R5[::-1].astype(np.float64)})
    np.testing.assert_array_equal(mallows_consensus_spec(model).rankings, R5[::-1])


def test_other_forms_fall_back_to_the_generic_steps():
    """rho used by a Potential, a Uniform prior, the cayley distance: NUTS and
    PermutationLeapShift, as before; the explicit constructor names what does not fit."""
    with _model() as used_elsewhere:
        pm.Potential("extra", -used_elsewhere["rho"][0])
    for model, why in ((used_elsewhere, "extra depends on rho"),
                       (_model(prior="uniform"), "Exponential, Gamma or HalfNormal"),
                       (_model("cayley"), "distance is not one of")):
        assigned = _assigned(model)
        assert MallowsConsensusGibbs not in assigned
        assert assigned[PermutationLeapShift] == ["rho"]
        with model, pytest.raises(ValueError, match=why):
            MallowsConsensusGibbs([model["rho"]])


def test_outside_the_model_context_it_is_not_assigned():
    """The competence needs the model of the ``with`` block; without it the generic steps."""
    model = _model()
    _, selected = assign_step_methods(model)
    assert MallowsConsensusGibbs not in selected


def test_rho_alone_keeps_alpha():
    """Given rho only, alpha is read from the point and kept."""
    model = _model()
    with model:
        step = MallowsConsensusGibbs([model["rho"]], rng=1)
    point = {"rho": np.arange(5), "alpha_log__": np.array(1.5)}
    new, stats_ = step.step(point)
    assert new["alpha_log__"] == 1.5 and sorted(new["rho"]) == list(range(5))
    assert 0 <= stats_[0]["accept_rate"] <= 1


def test_pickled_step_draws_from_its_own_generator():
    """A pickled step (pm.sample sends steps to its worker processes with cloudpickle) does not
    carry the bit generator pointers of the original; its draws equal the original's from the
    same state."""
    import cloudpickle

    model = _model()
    with model:
        step = MallowsConsensusGibbs([model["rho"], model["alpha"]], rng=4)
    point = {"rho": np.arange(5), "alpha_log__": np.array(1.0)}
    step.step(point)  # builds its pointers
    copy = cloudpickle.loads(cloudpickle.dumps(step))
    assert copy._bitgen is None
    a, b = step.step(point)[0], copy.step(point)[0]
    assert np.array_equal(a["rho"], b["rho"]) and a["alpha_log__"] == b["alpha_log__"]


def test_bad_input():
    model = _model()
    with model:
        with pytest.raises(ValueError, match="n_sweeps"):
            MallowsConsensusGibbs([model["rho"]], n_sweeps=0)
        with pytest.raises(ValueError, match="slice_width must be a positive number"):
            MallowsConsensusGibbs([model["rho"]], slice_width=-1.0)
        with pytest.raises(ValueError, match="not a permutation of 0..4"):
            MallowsConsensusGibbs([model["rho"]], initial_point={"rho": np.zeros(5, int)})
        step = MallowsConsensusGibbs([model["rho"], model["alpha"]])
        with pytest.raises(ValueError, match="not a permutation of 0..4"):
            step.step({"rho": np.array([0, 0, 1, 2, 3]), "alpha_log__": np.array(1.0)})
        pm.Normal("x")
        with pytest.raises(ValueError, match="x is neither"):
            MallowsConsensusGibbs([model["x"]])
