"""linear_scores: the scores of both rankers, and clear errors for misuse."""

import numpy as np
import pytest

from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.features import HingeBasis
from pm_perm.learning_to_rank.ordinal import OrdinalRanker
from pm_perm.learning_to_rank.rankmatch import RankMatch


def _split(seed=0, n_queries=8, n_docs=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_queries * n_docs, 2))
    y = (X @ [2.0, -1.0] > 0.5).astype(int) + (X @ [2.0, -1.0] > 2.0)
    return RankingSplit(X, y, np.arange(0, X.shape[0] + 1, n_docs), np.arange(n_queries))


@pytest.mark.parametrize("cls", [OrdinalRanker, RankMatch])
def test_scores_and_errors(cls):
    split = _split()
    ranker = cls(prior_sigmas=(3.0,))
    with pytest.raises(ValueError, match=f"{cls.__name__} is not fitted"):
        ranker.decision_function(split.X)
    ranker.fit_map(split)
    np.testing.assert_allclose(ranker.decision_function(split.X), split.X @ ranker.theta_)
    with pytest.raises(ValueError, match="draws=True needs posterior draws"):
        ranker.decision_function(split.X, draws=True)
    with pytest.raises(ValueError, match=r"\(n_docs, 2\).*got shape \(48, 3\).*HingeBasis"):
        ranker.decision_function(np.zeros((48, 3)))
    with pytest.raises(ValueError, match="2-D"):
        ranker.decision_function(np.zeros(2))
    ranker.theta_draws_ = np.ones((5, 2))  # as fit_nuts leaves them
    assert ranker.decision_function(split.X, draws=True).shape == (5, 48)
    ranker.fit_map(split)  # a new MAP fit drops stale draws
    assert ranker.theta_draws_ is None


def test_hinge_trained_ranker_names_the_fix_for_raw_features():
    split = _split(1)
    basis = HingeBasis(3).fit(split)
    ranker = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(basis.transform_split(split))
    with pytest.raises(ValueError, match="pass basis.transform"):
        ranker.decision_function(split.X)
    assert ranker.decision_function(basis.transform(split.X)).shape == (48,)


def test_fit_nuts_whitens_at_the_map_of_its_own_split(monkeypatch):
    """The whitening's centre is fit_map's MAP on the same split and scale, never the posterior
    mean of an earlier fit_nuts, nor the MAP of another split (no sampling here: the sampler
    is stopped once the whitened model is built)."""
    import pm_perm.learning_to_rank._scoring as scoring

    class Stop(Exception):
        pass

    centres = []
    real = scoring.laplace_whitening

    def record(model, loc):
        centres.append(np.array(loc))
        return real(model, loc)

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(scoring, "laplace_whitening", record)
    monkeypatch.setattr(scoring, "checked_sample", stop)
    a, b = _split(0), _split(1)
    ranker = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(a)
    map_a = ranker._theta_std.copy()
    ranker._theta_std = map_a + 1.0  # as a fit_nuts leaves it: the posterior mean
    with pytest.raises(Stop):
        ranker.fit_nuts(a)
    np.testing.assert_array_equal(centres[-1], map_a)
    with pytest.raises(Stop):
        ranker.fit_nuts(b)
    map_b = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(b)._theta_std
    np.testing.assert_allclose(centres[-1], map_b, rtol=1e-5, atol=1e-6)
    assert np.abs(map_b - map_a).max() > 0.05  # the two splits' MAPs differ


@pytest.mark.parametrize("cls", [OrdinalRanker, RankMatch])
@pytest.mark.parametrize("width", [1, 3])
def test_validation_split_of_another_width_is_refused(cls, width):
    train = _split()
    valid = RankingSplit(np.ones((train.n_docs, width)), train.y, train.group_ptr, train.qids)
    with pytest.raises(ValueError, match=rf"valid.X must be a 2-D \(n_docs, 2\) array with the "
                                         rf"training split's feature columns, got shape "
                                         rf"\(48, {width}\)"):
        cls(prior_sigmas=(0.1, 1.0)).fit_map(train, valid=valid)
    with pytest.raises(ValueError,
                       match="valid must be a pm_perm.learning_to_rank.data.RankingSplit"):
        cls(prior_sigmas=(0.1, 1.0)).fit_map(train, valid=(valid.X, valid.y))


@pytest.mark.parametrize("cls", [OrdinalRanker, RankMatch])
def test_non_finite_features_are_refused(cls):
    split = _split()
    ranker = cls(prior_sigmas=(3.0,)).fit_map(split)
    for bad in (np.nan, np.inf, -np.inf):
        X = split.X[:4].copy()
        X[2, 1] = bad
        with pytest.raises(ValueError, match=r"X has NaN or infinite features \(first in row 2\)"):
            ranker.decision_function(X)
