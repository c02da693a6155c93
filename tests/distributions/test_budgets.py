"""Long-running methods fail in seconds with a message naming the alternative (issue 19,
class 6): the exact Huber-Law draws of PermutationExpFamily(method="bethe") have a work budget
``max_work`` (trials x M^2)."""

import time

import numpy as np
import pymc as pm
import pytest

from pm_perm import PermutationExpFamily
from pm_perm.distributions.permutation import (
    HUBER_LAW_MAX_TRIALS,
    HUBER_LAW_MAX_WORK,
    huber_law_trial_budget,
)


def test_trial_budget():
    assert huber_law_trial_budget(200) == HUBER_LAW_MAX_WORK // 40_000 == 2_500
    assert huber_law_trial_budget(4) == HUBER_LAW_MAX_TRIALS  # capped
    assert huber_law_trial_budget(10_000, max_work=5) == 1


@pytest.mark.parametrize("path", ["numba", "rng_fn"])
@pytest.mark.parametrize("M, spread, max_work", [(200, 1.0, HUBER_LAW_MAX_WORK),
                                                 (40, 3.0, 10_000_000), (60, 4.0, 36_000)])
def test_bethe_draws_fail_fast_naming_swap_mcmc(path, M, spread, max_work):
    W = np.random.default_rng(0).normal(size=(M, M)) * spread
    pm.draw(PermutationExpFamily.dist(np.zeros((3, 3)), method="bethe", max_work=max_work),
            random_seed=0)  # compile first: the budget is about run time
    rv = PermutationExpFamily.dist(W, method="bethe", max_work=max_work)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="swap MCMC.*max_work"):
        if path == "numba":
            pm.draw(rv, random_seed=1)
        else:
            rv.owner.op.rng_fn(np.random.default_rng(1), W, None)
    # the default budget is about 1-5 s of work on one core; 60 s leaves room for a busy machine
    assert time.perf_counter() - t0 < 60


def test_bethe_draws_within_budget_still_work():
    W = np.eye(5) * 2.0
    y = pm.draw(PermutationExpFamily.dist(W, method="bethe"), draws=20, random_seed=2)
    assert y.shape == (20, 5) and np.all(np.sort(y, axis=1) == np.arange(5))
    with pytest.raises(ValueError, match="max_work"):
        PermutationExpFamily.dist(W, method="bethe", max_work=0)
