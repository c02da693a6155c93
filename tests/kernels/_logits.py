"""Random logits for the permanent and sampler tests (shared by their test files)."""

import numpy as np


def random_logits(rng, M, batch=(), scale=2.0, forbid=0.2):
    """Gaussian logits with a fraction of -inf entries, each matrix keeping a feasible matching."""
    W = rng.normal(scale=scale, size=batch + (M, M))
    mask = rng.random(W.shape) < forbid
    W[mask] = -np.inf
    flat = W.reshape(-1, M, M)
    for w in flat:  # keep a random permutation allowed so perm > 0
        sigma = rng.permutation(M)
        w[np.arange(M), sigma] = rng.normal(scale=scale, size=M)
    return flat.reshape(W.shape)
