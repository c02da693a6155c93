"""MAP fits of the count-prior classifiers: objectives, and a tiny falsifiable end-to-end fit."""

import numpy as np
import pymc as pm
import pytensor
import pytest
from scipy.special import log_softmax

from pm_perm._modes import PYTHON_MODE  # the Python linker: no C compiler on a new cache
from pm_perm.classification.metrics import bernoulli_nll, nchoosek_nll
from pm_perm.classification.models import (
    classifier_map,
    logistic_model,
    multiobject_nchoosek_model,
    topk_gain_model,
)
from pm_perm.distributions.n_choose_k import NChooseK


def test_top1_gain_model_is_softmax_regression():
    rng = np.random.default_rng(0)
    X, t = rng.normal(size=(8, 3)), rng.integers(0, 4, size=8)
    model = topk_gain_model(X, t, 4, K=1, sigma=1.0)
    W, b = rng.normal(size=(3, 4)), rng.normal(size=4)
    expr = model.replace_rvs_by_values([model.potentials[0]])[0]
    gain = pytensor.function(model.value_vars, expr)(W, b)
    ref = log_softmax(X @ W + b, axis=1)[np.arange(8), t].sum()
    np.testing.assert_allclose(gain, ref, rtol=1e-10)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="K must be in 1..n_classes"):
        topk_gain_model(np.zeros((2, 3)), np.array([0, 1]), 4, K=5)
    with pytest.raises(ValueError, match="Y must be a binary"):
        logistic_model(np.zeros((2, 3)), np.full((2, 4), 2))
    with pytest.raises(ValueError, match="X must be a"):
        logistic_model(np.zeros(3), np.zeros((3, 2), dtype=int))


def test_topk_gain_model_refuses_targets_outside_the_classes():
    X = np.random.default_rng(0).normal(size=(4, 2))
    for target, bad in (([0, 1, 7, -1], "row 2 has 7"), ([0, -1, 2, 1], "row 1 has -1")):
        with pytest.raises(ValueError, match=f"class indices in 0..n_classes-1 = 0..2; {bad}"):
            topk_gain_model(X, np.array(target), n_classes=3, K=1)
    topk_gain_model(X, np.array([0, 1, 2, 1]), n_classes=3, K=1)


def test_nchoosek_beats_logistic_regression_on_count_structured_labels():
    """Labels with 1 or 2 items on out of 6: the count prior must win in held-out NLL.

    Falsifiable: both models get the same linear logits; only the count prior differs. The
    margin (> 0.3 nats per row) is several standard errors (about 0.05 at n = 400).
    """
    rng = np.random.default_rng(1)
    n, F, D = 800, 3, 6
    X = rng.normal(size=(n, F))
    W_true = rng.normal(size=(F, D))
    count = np.array([0, 0.5, 0.5, 0, 0, 0, 0])
    Y = pm.draw(NChooseK.dist(X @ W_true, count), random_seed=2)
    tr, te = slice(0, 400), slice(400, None)
    lr = classifier_map(logistic_model(X[tr], Y[tr], sigma=3.0),
                        mode=PYTHON_MODE).fit(maxiter=300)
    nck = classifier_map(multiobject_nchoosek_model(X[tr], Y[tr], sigma=3.0),
                         mode=PYTHON_MODE).fit(maxiter=300)
    assert lr["_info"]["converged"] and nck["_info"]["converged"]
    nll_lr = bernoulli_nll(X[te] @ lr["W"] + lr["b"], Y[te]).mean()
    nll_nck = nchoosek_nll(X[te] @ nck["W"] + nck["b"], X[te] @ nck["V"] + nck["c"], Y[te])
    assert nll_nck.mean() < nll_lr - 0.3


def test_map_fitter_reaches_a_stationary_point_and_warm_starts():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 2))
    Y = (rng.random((50, 3)) < 0.4).astype(np.int64)
    fitter = classifier_map(logistic_model(X, Y, sigma=1.0), mode=PYTHON_MODE)
    first = fitter.fit()
    again = fitter.fit()
    assert again["_info"]["iterations"] <= 2
    np.testing.assert_allclose(again["W"], first["W"], atol=1e-4)
    smaller = fitter.fit(sigma=0.1)
    assert np.abs(smaller["W"]).sum() < np.abs(first["W"]).sum()
