"""JAX draws of pm_perm's eight RandomVariables (``pm_perm.backends.jax.random``).

Each RV's JAX sampler runs its exact CPU sampler (``rng_fn``) through ``jax.pure_callback``:
these tests check the values (valid permutations, label vectors with the right counts, rank-form
orders), shapes and dtype of ``pm.draw(..., mode="JAX")`` with batched parameters, that invalid
parameters raise instead of returning values, one goodness-of-fit test against the exact
probabilities, and ``pm.sample_posterior_predictive`` compiled for JAX.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._jax import draw_jax, require_jax, shared_rng_copied

require_jax()

import pymc as pm  # noqa: E402

from pm_perm.distributions import (  # noqa: E402
    ConditionalBernoulli,
    NChooseK,
    OrdinalNChooseK,
    PartialRanking,
    PermutationExpFamily,
    PlackettLuce,
)
from pm_perm.kernels.rank_form import validate_orders  # noqa: E402
from pm_perm.reference.permutations import permutation_probabilities_enum  # noqa: E402
from pm_perm.testing import chi_square_pvalue  # noqa: E402

M = 4
RNG = np.random.default_rng(2026)
W = RNG.normal(size=(2, M, M))  # batch of 2 logits matrices
U = RNG.normal(size=(2, M))  # batch of 2 logit / utility vectors
K = np.array([1, 3])  # one count per batch row


def _draw(rv, draws=3, seed=7):
    return draw_jax(rv, draws=draws, seed=seed)


def _is_permutation(y):
    return np.array_equal(np.sort(y, axis=-1), np.broadcast_to(np.arange(y.shape[-1]), y.shape))


def _check_permutations(y):
    assert _is_permutation(y)


def _check_binary_counts(y, counts):
    assert np.isin(y, (0, 1)).all()
    assert np.array_equal(y.sum(-1), np.broadcast_to(counts, y.shape[:-1]))


def _check_orders(y):
    validate_orders(y.reshape(-1, y.shape[-1]), y.shape[-1])


# name: (the RV with batched parameters (batch 2), the check of its values, the RV with an
# invalid parameter, the message of the sampler's ValueError)
CASES = {
    "exact": (
        lambda: PermutationExpFamily.dist(logits=W),
        _check_permutations,
        lambda: PermutationExpFamily.dist(logits=np.where(np.eye(M), np.nan, W[0])),
        "logits contains NaN",
    ),
    "glynn": (
        lambda: PermutationExpFamily.dist(logits=W, method="glynn"),
        _check_permutations,
        lambda: PermutationExpFamily.dist(logits=np.full((M, M), np.nan), method="glynn"),
        "logits contains NaN",
    ),
    "bethe": (
        lambda: PermutationExpFamily.dist(logits=W, method="bethe"),
        _check_permutations,
        lambda: PermutationExpFamily.dist(logits=np.full((M, M), -np.inf), method="bethe"),
        "admit no permutation",
    ),
    "conditional_bernoulli": (
        lambda: ConditionalBernoulli.dist(logits=U, k=K),
        lambda y: _check_binary_counts(y, K),
        lambda: ConditionalBernoulli.dist(logits=U[0], k=M + 1),
        "k must be in 0..number of finite logits",
    ),
    "n_choose_k": (  # all mass on the count 2
        lambda: NChooseK.dist(logits=U, count_probs=np.eye(M + 1)[2]),
        lambda y: _check_binary_counts(y, 2),
        lambda: NChooseK.dist(logits=U[0], count_probs=np.full(M + 1, np.nan)),
        "count_probs must be non-negative and finite",
    ),
    "ordinal_n_choose_k": (  # 3 items at level 0, 1 at level 1
        lambda: OrdinalNChooseK.dist(logits=U, counts=np.array([3, 1]), n_levels=2),
        lambda y: _check_binary_counts(y, 1),
        lambda: OrdinalNChooseK.dist(logits=np.full(M, np.nan), counts=np.array([3, 1]),
                                     n_levels=2),
        "no NaN or [+]inf",
    ),
    "partial_ranking": (
        lambda: PartialRanking.dist(logits=W),
        _check_orders,
        lambda: PartialRanking.dist(logits=np.full((M, M), np.nan)),
        "logits contains NaN",
    ),
    "plackett_luce": (
        lambda: PlackettLuce.dist(utilities=U),
        _check_orders,
        lambda: PlackettLuce.dist(utilities=np.full(M, np.nan)),
        "utilities contains NaN",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_jax_draws_are_valid_values_of_the_right_shape(name):
    make, check, _, _ = CASES[name]
    rv = make()
    y = _draw(rv)
    assert y.dtype == np.int64
    assert y.shape == (3, 2, M)
    check(y)
    assert not all(np.array_equal(y[0], y[i]) for i in (1, 2))  # each draw is a new one


@pytest.mark.parametrize("name", list(CASES))
def test_jax_draws_refuse_invalid_parameters(name):
    """The host sampler's ValueError surfaces as an exception (jaxlib's XlaRuntimeError, a
    RuntimeError, with the original message), never as values."""
    _, _, make_bad, message = CASES[name]
    with pytest.raises((ValueError, RuntimeError), match=f"ValueError: .*{message}"):
        _draw(make_bad(), draws=1)


def test_jax_draws_are_reproducible_and_sized():
    rv = PermutationExpFamily.dist(logits=W[0], shape=(5, M))
    a, b = _draw(rv, draws=2, seed=3), _draw(rv, draws=2, seed=3)
    assert a.shape == (2, 5, M) and np.array_equal(a, b)
    _check_permutations(a)
    one = _draw(PlackettLuce.dist(utilities=U[0]), draws=1)  # no batch dimension
    assert one.shape == (M,) and one.dtype == np.int64
    _check_orders(one[None])


def test_jax_permutation_draws_match_the_exact_probabilities():
    """Pearson chi-square of 6,000 draws at M = 3 (6 permutations, one forbidden edge) against
    the enumerated probabilities, fixed seed; fails at p < 1e-3, so the false-failure rate of a
    correct sampler is 0.1%."""
    Wg = np.array([[0.5, -0.3, -np.inf], [0.1, 0.9, -0.4], [-0.7, 0.2, 0.3]])
    support, probs = permutation_probabilities_enum(Wg)
    n = 6000
    y = _draw(PermutationExpFamily.dist(logits=Wg, shape=(n, 3)), draws=1, seed=11)
    assert y.shape == (n, 3)
    assert not (y[:, 0] == 2).any()  # the forbidden edge is never drawn
    assert chi_square_pvalue(y, support, probs) > 1e-3


def test_posterior_predictive_under_jax():
    obs = np.array([[0, 1, 2], [0, 2, 1], [1, 0, 2], [0, 1, 2]])
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 1.0, shape=(3, 3))
        PermutationExpFamily("y", logits=theta, observed=obs)
    az = pytest.importorskip("arviz")
    idata = az.from_dict({"posterior": {"theta": RNG.normal(size=(1, 4, 3, 3))}})
    with model, shared_rng_copied():
        pp = pm.sample_posterior_predictive(idata, random_seed=5, progressbar=False,
                                            compile_kwargs={"mode": "JAX"})
    y = pp.posterior_predictive["y"].values
    assert y.shape == (1, 4, 4, 3) and y.dtype == np.int64
    _check_permutations(y)
