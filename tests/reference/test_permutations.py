import math

import numpy as np
import pytest

from pm_perm.reference.permutations import (
    all_permutations,
    log_permanent_dp_longdouble,
    log_permanent_enum,
    log_permanent_ryser,
    permutation_logp_enum,
    permutation_marginals_enum,
)


def test_all_permutations():
    assert all_permutations(4).shape == (24, 4)
    assert len({tuple(p) for p in all_permutations(5)}) == 120
    with pytest.raises(ValueError):
        all_permutations(9)


@pytest.mark.parametrize("M", range(1, 8))
def test_references_agree(M):
    rng = np.random.default_rng(M)
    W = rng.normal(size=(M, M))
    ref = log_permanent_enum(W)
    assert abs(log_permanent_ryser(W) - ref) < 1e-10
    assert abs(log_permanent_dp_longdouble(W) - ref) < 1e-12
    P = permutation_marginals_enum(W)
    np.testing.assert_allclose(P.sum(0), 1)
    y = all_permutations(M)
    assert abs(np.exp(permutation_logp_enum(W, y)).sum() - 1) < 1e-12
    assert abs(log_permanent_enum(np.zeros((M, M))) - math.lgamma(M + 1)) < 1e-12
