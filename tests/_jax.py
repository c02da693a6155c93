"""The tests' one way to need JAX: skip when it is missing (naming the install), and compile JAX
draws without PyTensor's shared-RNG warning. pm_perm's JAX implementations register themselves
when PyTensor's JAX backend is first imported (:mod:`pm_perm.backends.jax.lazy`)."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

REASON = "jax is not installed: pip install pm-perm[jax]"


def require_jax():
    """Skip the calling test (at module level: the module) when jax is not installed; else
    return the ``jax`` module."""
    return pytest.importorskip("jax", reason=REASON)


@contextlib.contextmanager
def shared_rng_copied():
    """Silence PyTensor's warning that a shared RNG is copied into a JAX graph (expected when
    a graph with random variables is compiled for JAX)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The RandomType SharedVariables", UserWarning)
        yield


def draw_jax(rv, draws=1, seed=None):
    """``pm.draw(rv, mode="JAX")`` as a NumPy array."""
    import pymc as pm

    with shared_rng_copied():
        return np.asarray(pm.draw(rv, draws=draws, random_seed=seed, mode="JAX"))
