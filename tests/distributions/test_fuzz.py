"""Fuzzed parameters and values into every distribution: the result is a valid log-probability,
``-inf`` (value outside the support), or a documented error; never a crash or a silent NaN."""

import numpy as np
import pymc as pm
import pytest
from pymc.logprob.utils import ParameterValueError

from pm_perm import ConditionalBernoulli, NChooseK, OrdinalNChooseK, PermutationExpFamily

DOCUMENTED = (ValueError, TypeError, ParameterValueError)


def _params(rng):
    D = int(rng.integers(1, 6))
    scale = rng.choice([1e-8, 1.0, 60.0, 1e305])
    logits = scale * rng.normal(size=(int(rng.integers(1, 3)), D))
    special = rng.choice([None, np.nan, np.inf, -np.inf])
    if special is not None:
        logits.flat[rng.integers(logits.size)] = special
    return D, logits


def _check(dist, value):
    try:
        lp = pm.logp(dist, value).eval()
    except DOCUMENTED as err:
        assert str(err)
        return
    assert not np.isnan(lp).any(), lp
    assert np.all(lp <= 1e-9)  # log-probabilities of discrete values


@pytest.mark.parametrize("seed", range(8))
def test_fuzz_all_distributions(seed):
    rng = np.random.default_rng(seed)
    D, logits = _params(rng)
    W = np.broadcast_to(logits[..., None], logits.shape + (D,)).copy()  # (b, D, D)
    values = [rng.integers(-1, D + 1, size=(W.shape[0], D)), np.tile(np.arange(D), (W.shape[0], 1))]
    for v in values:
        _check(PermutationExpFamily.dist(logits=W), v)
    k = int(rng.integers(0, D + 1))
    binary = [rng.integers(0, 2, size=logits.shape), rng.integers(-1, 3, size=logits.shape)]
    pk = rng.dirichlet(np.ones(D + 1)) if rng.random() < 0.7 else rng.random(D + 1)
    for v in binary:
        _check(ConditionalBernoulli.dist(logits, k), v)
        _check(NChooseK.dist(logits, pk), v)
    counts = np.bincount(rng.integers(0, 3, size=D), minlength=3)
    ordinal = [rng.integers(0, 3, size=logits.shape), rng.integers(-1, 4, size=logits.shape)]
    for v in ordinal:
        _check(OrdinalNChooseK.dist(logits, counts=counts), v)
