"""Backends other than PyTensor's default (numba): :mod:`pm_perm.backends.jax`."""
