"""Shared by the tests of the count-label distributions (``test_conditional_bernoulli.py``,
``test_n_choose_k.py``, ``test_ordinal_n_choose_k.py``, ``test_count_labels.py``)."""


from pm_perm._modes import PYTHON_MODE

# Most graphs here are compiled with the Python VM, which calls the same njit kernels and
# compiles in a fraction of the time; the numba backend is exercised by the draws in NUMBA
# mode, the sampling smoke test and the slow NUTS test.
# PyTensor's Python linker with the default rewrites (PYTHON_MODE, the other tests' mode), not
# FAST_COMPILE, whose linker compiles C code for the inner graph of a softmax (slow on an empty
# PyTensor cache).
FAST = PYTHON_MODE

# All goodness-of-fit tests (pm_perm.testing.chi_square_pvalue): fixed seeds, 20,000 draws,
# threshold p > 1e-3, so a correct sampler fails each with probability 0.1% (if the seed were
# random); a draw in a cell of probability 0 gives p = 0.
