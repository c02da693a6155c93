"""Tests of the latent-permutation step method (PermutationSwapMetropolis).

A minimal permutation RV (exact normaliser by enumeration, M <= 6) stands in for
PermutationExpFamily so that this file does not depend on the distribution module.
"""

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pytensor.tensor.random.op import RandomVariable

from pm_perm.inference.step_methods import (
    PermutationLeapShift,
    PermutationSwapMetropolis,
    is_permutation_rv,
)
from pm_perm.reference.permutations import permutation_probabilities_enum

pytestmark = pytest.mark.numba  # sampling: compiled code wins (tests/conftest.py)


class _TinyPermRV(RandomVariable):
    name = "tiny_perm"
    signature = "(m,m)->(m)"
    dtype = "int64"
    support_is_permutation = True

    @classmethod
    def rng_fn(cls, rng, logits, size):
        return rng.permutation(logits.shape[-1])


class _TinyPerm(pm.Discrete):
    rv_type = _TinyPermRV
    rv_op = _TinyPermRV()

    @classmethod
    def dist(cls, logits, **kwargs):
        return super().dist([pt.as_tensor_variable(logits)], **kwargs)

    def support_point(rv, size, logits):
        return pt.arange(logits.shape[-1], dtype="int64")

    def logp(value, logits):
        M = 5 if logits.type.shape[-1] is None else logits.type.shape[-1]
        P = np.array(list(itertools.permutations(range(M))))
        rows = np.arange(M)
        log_z = pt.logsumexp(logits[rows, P].sum(-1))
        return logits[rows, value].sum() - log_z


def test_auto_assignment_and_competence():
    W = np.random.default_rng(0).normal(size=(5, 5))
    with pm.Model() as model:
        y = _TinyPerm("y", logits=pt.constant(W))
        pm.Normal("z", 0, 1)
    _, selected = assign_step_methods(model)
    # pm.sample picks the leap-and-shift step (swaps and leaps; its tests: test_leap_shift.py)
    assert PermutationSwapMetropolis not in selected
    assert [v.name for v in selected[PermutationLeapShift]] == ["y"]
    assert PermutationSwapMetropolis.competence(y) == PermutationLeapShift.competence(y)
    assert is_permutation_rv(y)
    assert not is_permutation_rv(model["z"])


def test_samples_match_exact_probabilities_m5():
    # 30,000 steps of one sweep (5 swaps) each from the step method alone. With spread 0.7 the
    # integrated autocorrelation time of each marginal indicator is a few steps, so the s.e. of
    # each marginal is < 0.006; we require every marginal within 0.03 and the total-variation
    # distance of the permutation histogram (120 cells) below 0.05.
    rng = np.random.default_rng(5)
    M = 5
    W = rng.normal(size=(M, M)) * 0.7
    with pm.Model():
        _TinyPerm("y", logits=pt.constant(W))
        step = PermutationSwapMetropolis([pm.modelcontext(None)["y"]], rng=np.random.default_rng(1))
        point = pm.modelcontext(None).initial_point()
    n = 30_000
    draws = np.empty((n, M), dtype=np.int64)
    rates = []
    for t in range(n):
        point, stats = step.step(point)
        draws[t] = point["y"]
        rates.append(stats[0]["accept_rate"])
    assert 0.05 < np.mean(rates) < 1
    P, p = permutation_probabilities_enum(W)
    index = {tuple(x): k for k, x in enumerate(P)}
    freq = np.bincount([index[tuple(x)] for x in draws], minlength=len(P)) / n
    assert 0.5 * np.abs(freq - p).sum() < 0.05
    mar = np.zeros((M, M))
    for k in range(M):
        np.add.at(mar, (k, P[:, k]), p)
    emp = np.zeros((M, M))
    np.add.at(emp, (np.broadcast_to(np.arange(M), draws.shape), draws), 1.0 / n)
    assert np.abs(emp - mar).max() < 0.03


def test_latent_permutation_recovered_by_pm_sample():
    # Observations x[i] = mu[perm[i]] + noise; the latent permutation under a uniform prior is
    # recovered (posterior mode = truth) by pm.sample with the automatically assigned step.
    rng = np.random.default_rng(3)
    M = 5
    mu = np.array([-4.0, -2.0, 0.0, 2.0, 4.0])
    truth = rng.permutation(M)
    x = mu[truth] + rng.normal(scale=0.3, size=M)
    with pm.Model():
        y = _TinyPerm("y", logits=pt.zeros((M, M)))
        pm.Normal("x", mu=pt.as_tensor_variable(mu)[y], sigma=0.3, observed=x)
        idata = pm.sample(
            draws=300, tune=100, chains=1, random_seed=2, progressbar=False,
            compute_convergence_checks=False,
        )
    post = idata.posterior["y"].values.reshape(-1, M)
    rows, counts = np.unique(post, axis=0, return_counts=True)
    assert (rows[np.argmax(counts)] == truth).all()
    assert "accept_rate" in idata.sample_stats


def test_rejects_float_vars():
    with pm.Model():
        pm.Normal("z", 0, 1)
        with pytest.raises(ValueError, match="integer"):
            PermutationSwapMetropolis([pm.modelcontext(None)["z"]])


def test_rejects_variables_that_are_not_permutations():
    with pm.Model():
        k = pm.Poisson("k", 3.0, shape=3)
        s = pm.Poisson("s", 3.0)
        for v in (k, s):
            with pytest.raises(ValueError, match=f"only to permutation-valued .*; {v.name} is not"):
                PermutationSwapMetropolis([v])


@pytest.mark.parametrize("n_swaps", [2.5, 0, -1, "3", np.nan])
def test_rejects_bad_n_swaps(n_swaps):
    with pm.Model():
        y = _TinyPerm("y", logits=pt.zeros((3, 3)))
        with pytest.raises(ValueError, match=r"n_swaps must be an integer >= 1"):
            PermutationSwapMetropolis([y], n_swaps=n_swaps)
        assert PermutationSwapMetropolis([y], n_swaps=np.int64(2)).n_swaps == 2


def test_rejects_start_that_is_not_a_permutation():
    msg = r"value of y is \[0, 0, 1\], which is not a permutation of 0..2"
    with pm.Model():
        y = _TinyPerm("y", logits=pt.zeros((3, 3)))
        with pytest.raises(ValueError, match=msg):
            PermutationSwapMetropolis([y], initial_point={"y": np.array([0, 0, 1])})
        step = PermutationSwapMetropolis([y])
        with pytest.raises(ValueError, match=msg):
            step.step({"y": np.array([0, 0, 1])})
        with pytest.raises(ValueError, match=r"value of y is \[0, 1, 3\]"):
            step.step({"y": np.array([0, 1, 3])})
        # pm.sample stops (it used to return the invalid value as every draw)
        with pytest.raises(ValueError, match=msg):
            pm.sample(draws=2, tune=0, chains=1, initvals={"y": np.array([0, 0, 1])},
                      progressbar=False, random_seed=0, compute_convergence_checks=False)
    with pm.Model():
        z = _TinyPerm("z", logits=pt.zeros((3, 3)), shape=(2, 3))
        with pytest.raises(ValueError, match=r"value of z\[1\] is \[2, 2, 0\]"):
            PermutationSwapMetropolis([z]).step({"z": np.array([[0, 1, 2], [2, 2, 0]])})


def test_rejects_start_of_zero_density():
    W = np.zeros((3, 3))
    W[0, 0] = -np.inf
    with pm.Model():
        y = _TinyPerm("y", logits=pt.constant(W))
        step = PermutationSwapMetropolis([y])
        with pytest.raises(ValueError, match="log-density is -inf at the start point of y"):
            step.step({"y": np.array([0, 1, 2])})
        point, _ = step.step({"y": np.array([1, 0, 2])})
        assert sorted(point["y"].tolist()) == [0, 1, 2]
