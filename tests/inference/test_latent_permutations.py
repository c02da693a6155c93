"""Inference routes that cannot move a latent permutation say so (issue 53, finding 4).

The model: a consensus ``rho`` (uniform PermutationExpFamily, zero logits) and observed
permutations with ``W[i, j] = -(alpha / M) |j - rho[i]|``, a Mallows-type model.
``pm.find_MAP`` used to return the start point for ``rho`` silently and ``pm.sample_smc`` to
return its particles' prior draws silently; the supported route, ``pm.sample`` (NUTS + the swap
step), is tested in ``test_step_methods.py``.
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pm_perm
from pm_perm._modes import PYTHON_MODE
from pm_perm.inference import CompiledMAP
from pm_perm.ops.latent import LatentPermutationError, LatentPermutationWarning

M = 4
TRUTH = np.array([2, 0, 3, 1])
OBSERVED = np.array([[2, 0, 3, 1], [2, 1, 3, 0], [1, 0, 3, 2], [2, 0, 3, 1], [3, 0, 2, 1]])


def _mallows(method="exact", observed=OBSERVED):
    with pm.Model() as model:
        rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((M, M)), method=method)
        alpha = pm.Exponential("alpha", 1.0)
        W = -(alpha / M) * pt.abs(pt.arange(M)[None, :] - rho[:, None])
        pm_perm.PermutationExpFamily("y", logits=W, observed=observed)
    return model


def _route_named(text):
    return "pm.sample()" in text and "PermutationSwapMetropolis" in text and "'rho'" in text


def test_find_map_warns_and_names_the_swap_step():
    model = _mallows()
    with pytest.warns(LatentPermutationWarning) as record:
        fit = pm.find_MAP(model=model, jitter=False, progressbar=False,
                          return_inferencedata=True, compile_kwargs={"mode": PYTHON_MODE})
    assert _route_named(str(record[0].message))
    # what the warning is about: rho is the start point (the identity), not the consensus
    rho = fit.posterior["rho"].values[0, 0]
    np.testing.assert_array_equal(rho, model.initial_point()["rho"])
    assert not np.array_equal(rho, TRUTH)


@pytest.mark.parametrize("method", ["exact", "glynn", "bethe"])
def test_every_method_warns_for_a_log_density_without_jacobian(method):
    model = _mallows(method)
    with pytest.warns(LatentPermutationWarning):
        model.logp(jacobian=False)


def test_no_warning_where_the_route_is_right(recwarn):
    model = _mallows()
    model.logp()  # pm.sample's log-density (with Jacobian terms)
    rv = pm_perm.PermutationExpFamily.dist(logits=np.zeros((M, M)))
    pm.logp(rv, pt.lvector("v"))  # a direct logp of a symbolic value
    with pm.Model() as observed_only:  # no latent permutation: find_MAP is right
        alpha = pm.Exponential("alpha", 1.0)
        pm_perm.PermutationExpFamily("y", logits=-alpha * np.abs(np.subtract.outer(
            np.arange(M), np.arange(M))), observed=OBSERVED)
    observed_only.logp(jacobian=False)
    assert not [w for w in recwarn if issubclass(w.category, LatentPermutationWarning)]


def test_sample_smc_raises_and_names_the_swap_step():
    model = _mallows()
    with pytest.raises(LatentPermutationError) as err:
        pm.sample_smc(draws=20, chains=1, cores=1, model=model, progressbar=False,
                      random_seed=0)
    assert _route_named(str(err.value)) and "sample_smc" in str(err.value)


def test_compiled_map_refuses_a_latent_permutation_with_the_same_message():
    with pytest.raises(LatentPermutationError) as err:
        CompiledMAP(_mallows())
    assert _route_named(str(err.value)) and "pm.find_MAP" in str(err.value)
    assert isinstance(err.value, ValueError)
