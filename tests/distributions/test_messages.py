"""Clear messages (issue 19, class 9): symbolic-shape M beyond the exact limit, observed batch
shapes that do not match the parameters'."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pm_perm import ConditionalBernoulli, NChooseK, OrdinalNChooseK, PermutationExpFamily
from pm_perm.ops.permanent import log_permanent


@pytest.mark.parametrize("M", [27, 30])
def test_symbolic_m_beyond_the_limit_names_m_and_alternatives(M):
    W = pt.matrix("W")
    with pytest.raises(ValueError, match=rf"M = {M} is beyond the exact limit .*method='bethe'"
                                         r".*swap MCMC"):
        log_permanent(W).eval({W: np.zeros((M, M))})


@pytest.mark.parametrize("make", [
    lambda: PermutationExpFamily("y", logits=np.zeros((2, 3, 3)),
                                 observed=np.tile(np.arange(3), (5, 1))),
    lambda: ConditionalBernoulli("y", logits=np.zeros((2, 4)), k=2,
                                 observed=np.tile([1, 1, 0, 0], (5, 1))),
    lambda: ConditionalBernoulli("y", logits=np.zeros(4), k=np.full(3, 2),
                                 observed=np.tile([1, 1, 0, 0], (5, 1))),
    lambda: NChooseK("y", logits=np.zeros(4), count_probs=np.full((3, 5), 0.2),
                     observed=np.tile([1, 1, 0, 0], (5, 1))),
    lambda: OrdinalNChooseK("y", logits=np.zeros((2, 4)), counts=[2, 1, 1],
                            observed=np.tile([0, 1, 2, 0], (5, 1))),
])
def test_observed_batch_mismatch_says_expected_and_got(make):
    with pm.Model(), pytest.raises(ValueError, match=r"observed has shape \(5, \d\).*batch shape"
                                                     r" \(5,\).*broadcasts to \(5,\)"):
        make()


def test_matching_batch_shapes_still_build():
    with pm.Model():
        PermutationExpFamily("a", logits=np.zeros((5, 3, 3)), observed=np.tile(np.arange(3),
                                                                                (5, 1)))
        PermutationExpFamily("b", logits=np.zeros((1, 3, 3)), observed=np.tile(np.arange(3),
                                                                                (5, 1)))
        ConditionalBernoulli("c", logits=np.zeros(4), k=2, observed=np.tile([1, 1, 0, 0], (5, 1)))
