"""pm_perm's Blockwise (pm_perm/ops/_blockwise.py): every batched Op, its value and its gradient,
on a batch of size 0 on PyTensor's Python linker, where PyTensor's own Blockwise raised
"NotImplementedError: vectorize with zero size not implemented" (a logp over zero observations,
zero posterior draws). The numba and JAX backends handled empty batches already."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pm_perm.ops.bethe import bethe_log_permanent
from pm_perm.ops.cardinality import log_esp
from pm_perm.ops.matching import max_weight_matching
from pm_perm.ops.partial_orders import partial_order_loglik, partial_order_loglik_sum
from pm_perm.ops.permanent import log_permanent
from pm_perm.ops.plackett_luce import plackett_luce_loglik, plackett_luce_loglik_sum

W, U, R, C = pt.tensor3("W"), pt.matrix("U"), pt.lmatrix("o"), pt.vector("c")
TH, K = pt.matrix("th"), pt.lvector("k")
EMPTY_W, EMPTY_U = np.zeros((0, 3, 3)), np.zeros((0, 3))
ORDERS, COUNTS = np.array([[0, 1, 2], [1, -1, 0]]), np.array([2.0, 1.0])

# name -> (output, inputs, values, differentiable input, shape of the output)
CASES = {
    "log_permanent": (log_permanent(W), [W], [EMPTY_W], W, (0,)),
    "bethe_log_permanent": (bethe_log_permanent(W), [W], [EMPTY_W], W, (0,)),
    "max_weight_matching": (max_weight_matching(W), [W], [EMPTY_W], None, (0, 3)),
    "plackett_luce_loglik": (plackett_luce_loglik(U, R), [U, R], [EMPTY_U, ORDERS], U, (0, 2)),
    "plackett_luce_loglik_sum": (plackett_luce_loglik_sum(U, R, C), [U, R, C],
                                 [EMPTY_U, ORDERS, COUNTS], U, (0,)),
    "partial_order_loglik": (partial_order_loglik(W, R), [W, R], [EMPTY_W, ORDERS], W, (0, 2)),
    "partial_order_loglik_sum": (partial_order_loglik_sum(W, R, C), [W, R, C],
                                 [EMPTY_W, ORDERS, COUNTS], W, (0,)),
    "log_esp": (log_esp(TH, K), [TH, K], [np.zeros((0, 4)), np.zeros(0, np.int64)], TH, (0,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_empty_batch_on_the_python_linker(name):
    out, inputs, values, wrt, shape = CASES[name]
    value = pytensor.function(inputs, out, mode="FAST_COMPILE")(*values)
    assert value.shape == shape and value.dtype == out.dtype
    if wrt is not None:  # the gradient graph's Blockwise nodes come from PyTensor's vectorisation
        grad = pytensor.function(inputs, pt.grad(pt.sum(out), wrt), mode="FAST_COMPILE")(*values)
        assert grad.shape == values[inputs.index(wrt)].shape




def test_batches_that_do_not_broadcast_are_still_refused():
    """An empty batch against a batch of 3 is a shape error, not an empty result."""
    v = pt.lvector("v")
    f = pytensor.function([TH, v], log_esp(TH, v), mode="FAST_COMPILE")
    for rows in (2, 0):
        with pytest.raises(ValueError):
            f(np.zeros((rows, 3)), np.ones(3, dtype=np.int64))
