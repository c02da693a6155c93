"""Shared by the tests of the count-label distributions (``test_conditional_bernoulli.py``,
``test_n_choose_k.py``, ``test_ordinal_n_choose_k.py``, ``test_count_labels.py``)."""

import numpy as np
from scipy import stats

from pm_perm._modes import PYTHON_MODE

# Most graphs here are compiled with the Python VM, which calls the same njit kernels and
# compiles in a fraction of the time; the numba backend is exercised by the draws in NUMBA
# mode, the sampling smoke test and the slow NUTS test.
# PyTensor's Python linker with the default rewrites (PYTHON_MODE, the other tests' mode), not
# FAST_COMPILE, whose linker compiles C code for the inner graph of a softmax (slow on an empty
# PyTensor cache).
FAST = PYTHON_MODE


def chisq_pvalue(draws, Y, probs):
    """Chi-square p-value of ``draws`` (rows of ``Y``) against the probabilities ``probs`` of
    the rows of ``Y``; draws in cells of probability 0 fail at once.

    All goodness-of-fit tests: fixed seeds, 20,000 draws (expected cell counts >= 5), threshold
    p > 1e-3, so a correct sampler fails each with probability 0.1% (if the seed were random).
    """
    codes = {tuple(y): i for i, y in enumerate(Y)}
    counts = np.zeros(len(Y))
    for y in draws:
        counts[codes[tuple(y)]] += 1
    exp = probs * len(draws)
    assert np.all(counts[exp == 0] == 0)
    return stats.chisquare(counts[exp > 0], exp[exp > 0]).pvalue
