"""Tests of the swap Metropolis kernel against exact enumeration."""


import numpy as np
import pytest
from scipy import stats

from pm_perm.kernels._checks import as_square_logits
from pm_perm.kernels.swap_mcmc import swap_mcmc_chains, swap_mcmc_sample
from pm_perm.reference.permutations import permutation_probabilities_enum


@pytest.mark.parametrize("M", [3, 5])
def test_independent_chains_chi_square(M):
    # 20,000 independent chains from the identity, 60 sweeps each: at M <= 5 and spread 0.7 the
    # chain has mixed far below the chi-square test's resolution, so the end states are treated
    # as i.i.d. draws. Fails at p < 1e-3: false-failure rate 0.1% per size under exact mixing.
    rng = np.random.default_rng(M)
    W = rng.normal(size=(M, M)) * 0.7
    P, p = permutation_probabilities_enum(W)
    n = 20_000
    Y = np.tile(np.arange(M, dtype=np.int64), (n, 1))
    swap_mcmc_chains(np.random.default_rng(1), as_square_logits(W), Y, 60 * M)
    index = {tuple(x): k for k, x in enumerate(P)}
    counts = np.bincount([index[tuple(x)] for x in Y], minlength=len(P))
    _, pval = stats.chisquare(counts, n * p)
    assert pval > 1e-3


def test_single_chain_marginals():
    # One long chain at M = 6: empirical marginals within 0.02 of exact (the chain's effective
    # sample size is several thousand, so the s.e. is < 0.008).
    rng = np.random.default_rng(9)
    M = 6
    W = rng.normal(size=(M, M))
    P, p = permutation_probabilities_enum(W)
    mar = np.zeros((M, M))
    for k in range(M):
        np.add.at(mar, (k, P[:, k]), p)
    s, rate = swap_mcmc_sample(W, 20_000, rng=3, sweeps_per_sample=2)
    assert 0 < rate < 1
    emp = np.zeros((M, M))
    np.add.at(emp, (np.broadcast_to(np.arange(M), s.shape), s), 1.0)
    emp /= len(s)
    assert np.abs(emp - mar).max() < 0.02


def test_forbidden_edges_never_visited_and_errors():
    rng = np.random.default_rng(2)
    W = rng.normal(size=(5, 5))
    W[0, 0] = W[3, 1] = -np.inf
    s, _ = swap_mcmc_sample(W, 2000, rng=0)
    assert not (s[:, 0] == 0).any() and not (s[:, 3] == 1).any()
    assert (np.sort(s, axis=1) == np.arange(5)).all()
    with pytest.raises(ValueError, match="forbidden"):
        swap_mcmc_sample(W, 10, init=np.arange(5))
    with pytest.raises(ValueError, match="permutation"):
        swap_mcmc_sample(W, 10, init=np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="one"):
        swap_mcmc_sample(np.zeros((2, 3, 3)), 10)
    s, _ = swap_mcmc_sample(np.zeros((1, 1)), 3)
    assert (s == 0).all()


def test_bad_init_and_counts_say_what_is_wrong():
    W = np.zeros((3, 3))
    # before: "init must be an integer permutation of shape (3,); got (3,)"
    with pytest.raises(ValueError, match=r"init must be a permutation of the integers 0\.\.2; "
                       r"got dtype float64 \(\[0\.5, 1, 2\]\): pass integers"):
        swap_mcmc_sample(W, 2, rng=0, init=[0.5, 1, 2])
    with pytest.raises(ValueError, match=r"init must be a permutation of 0\.\.2 \(shape \(3,\)\); "
                       r"got shape \(2,\)"):
        swap_mcmc_sample(W, 2, rng=0, init=[0, 1])
    with pytest.raises(ValueError, match=r"init must be a permutation of 0\.\.2 \(each once\); "
                       r"got \[0 0 1\]"):
        swap_mcmc_sample(W, 2, rng=0, init=[0, 0, 1])
    W[1, 1] = -np.inf
    with pytest.raises(ValueError, match=r"init uses forbidden \(-inf\) entries of the logits, "
                       r"in rows \[1\]"):
        swap_mcmc_sample(W, 2, rng=0, init=[0, 1, 2])
    # before: NaN gave "cannot convert float NaN to integer", 2.5 became 2
    for kwargs, name in (({"burn_in_sweeps": np.nan}, "burn_in_sweeps"),
                         ({"sweeps_per_sample": 0}, "sweeps_per_sample"),
                         ({"n_samples": 2.5}, "n_samples")):
        args = {"n_samples": 2, **kwargs}
        with pytest.raises(ValueError, match=f"{name} must be an integer >= "):
            swap_mcmc_sample(W, rng=0, **args)
    assert swap_mcmc_sample(W, 2.0, rng=0, burn_in_sweeps=1e2)[0].shape == (2, 3)


def test_no_permutation_named_like_the_other_kernels():
    X = np.array([[0, -np.inf, -np.inf], [0, -np.inf, -np.inf], [0, 0, 0.0]])
    with pytest.raises(ValueError, match=r"logits admit no permutation \(every one uses a -inf "
                       r"entry\): rows 0, 1 have finite entries only in column 0"):
        swap_mcmc_sample(X, 2, rng=0)
