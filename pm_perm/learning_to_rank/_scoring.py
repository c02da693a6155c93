"""What both feature rankers share: linear scores ``X @ theta``, feature scaling, and fitting.

:class:`LinearRanker` is the base of :class:`~pm_perm.learning_to_rank.rankmatch.RankMatch` and
:class:`~pm_perm.learning_to_rank.ordinal.OrdinalRanker`: the MAP path over prior scales, NUTS
with Laplace whitening, and the scores. A subclass only builds its model.
"""

from __future__ import annotations

import time

import numpy as np
import pymc as pm

from pm_perm.inference import check_lbfgs_memory, checked_sample, laplace_whitening, map_path
from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.metrics import evaluate_ranking

__all__ = ["FeatureScaling", "LinearRanker", "linear_scores"]


def linear_scores(ranker, X, draws=False):
    """Scores ``X @ theta`` of a fitted ranker (rank by decreasing score).

    Parameters
    ----------
    ranker : RankMatch or OrdinalRanker
        Fitted by ``fit_map`` (``theta_``) or ``fit_nuts`` (also ``theta_draws_``).
    X : array_like of float, shape (n_docs, n_features)
        Features in the same columns as the training split (for a ranker trained on a
        :class:`~pm_perm.learning_to_rank.features.HingeBasis`, ``basis.transform(X)``).
    draws : bool, default False
        One row of scores per posterior draw.

    Returns
    -------
    ndarray, shape (n_docs,) or (n_draws, n_docs)

    Raises
    ------
    ValueError
        The ranker is not fitted (or has no draws for ``draws=True``), or ``X`` has the wrong
        shape or NaN or infinite values.
    """
    name = type(ranker).__name__
    if not hasattr(ranker, "theta_"):
        raise ValueError(f"{name} is not fitted: call fit_map or fit_nuts first")
    if draws and getattr(ranker, "theta_draws_", None) is None:
        raise ValueError(f"draws=True needs posterior draws: call {name}.fit_nuts first")
    theta = ranker.theta_draws_ if draws else ranker.theta_
    return theta @ check_features(X, theta.shape[-1]).T


def check_features(X, n_features, name="X"):
    """``X`` as float64 after checking it has shape (n_docs, ``n_features``) and finite values;
    ``name`` is the argument the messages give."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(
            f"{name} must be a 2-D (n_docs, {n_features}) array with the training split's "
            f"feature columns, got shape {X.shape} (for a ranker trained on a HingeBasis, pass "
            "basis.transform(X))"
        )
    if not np.all(np.isfinite(X)):
        row = int(np.flatnonzero(~np.all(np.isfinite(X), axis=1))[0])
        raise ValueError(f"{name} has NaN or infinite features (first in row {row})")
    return X


class FeatureScaling:
    """Per-feature standardisation fitted on the training features, stored with a ranker.

    ``z = (x - center) / scale`` with ``center`` the training mean and ``scale`` the training
    standard deviation (1 for a constant feature, and everything the identity when
    ``standardize=False``). The rankers fit ``theta_std`` on ``z``; the scores
    ``z @ theta_std = x @ theta - center @ theta`` with ``theta = theta_std / scale`` (the raw
    coefficients the rankers report as ``theta_``) differ from ``x @ theta`` by one constant,
    which neither ranking model nor any ranking metric can see. So the likelihood is exactly the
    same function of the scores; what changes is the prior, ``N(0, sigma^2)`` on each
    ``theta_std`` (i.e. on ``scale_f * theta_f``), which makes ``prior_sigma`` mean the same
    thing for every feature whatever its units, and keeps the optimiser well-conditioned when a
    feature has values like 1e6.
    """

    def __init__(self, X, standardize=True):
        X = np.asarray(X, dtype=np.float64)
        F = X.shape[1]
        self.center = np.zeros(F)
        self.scale = np.ones(F)
        if standardize and X.shape[0]:
            self.center = X.mean(axis=0)
            sd = X.std(axis=0)
            ok = np.isfinite(sd) & (sd > 0) & (sd > 1e-12 * np.maximum(1.0, np.abs(self.center)))
            self.scale = np.where(ok, sd, 1.0)
            self.center = np.where(ok, self.center, 0.0)

    def transform(self, X):
        """``(X - center) / scale``."""
        return (np.asarray(X, dtype=np.float64) - self.center) / self.scale

    def to_raw(self, theta_std):
        """Coefficients of the raw features (``theta_std / scale``, along the last axis)."""
        return np.asarray(theta_std) / self.scale

    def to_std(self, theta):
        """Inverse of :meth:`to_raw`."""
        return np.asarray(theta) * self.scale


class LinearRanker:
    """Base of the rankers that score a document by ``<psi, theta>`` and fit ``theta`` by MAP or
    NUTS on a PyMC model with the prior ``theta ~ N(0, prior_sigma^2 I)`` on the standardised
    coefficients.

    A subclass passes the constructor's parameters to ``super().__init__`` and defines

    - ``_build(train)``: fit ``scaling_`` on ``train.X`` and set ``_train`` (the split) and
      ``model_`` (its model at ``prior_sigmas[0]``, the scale held in ``pm.Data("prior_sigma")``);
    - ``_model(sigma, whitening)``: the same model at scale ``sigma``, sampled through
      ``theta = loc + L z`` for ``whitening = (loc, L)``.

    Parameters
    ----------
    prior_sigmas : sequence of float
        Candidate prior scales (positive, finite); :meth:`fit_map` with a validation split keeps
        the one with the best validation NDCG@5.
    lbfgs_memory : int
        L-BFGS-B memory (``maxcor``) of :meth:`fit_map`.
    maxiter : int
        L-BFGS-B iteration limit of each fit of :meth:`fit_map` (default 50,000).
    standardize : bool
        Fit on standardised features (training mean and standard deviation, stored as
        ``scaling_`` and applied to any features at prediction through ``theta_``), so that
        badly scaled data (a feature value of 1e6) fits; see :class:`FeatureScaling` for what
        changes (only the prior: ``N(0, sigma^2)`` on the standardised coefficients).

    Attributes
    ----------
    theta_ : ndarray, shape (n_features,)
        MAP estimate, or posterior mean after :meth:`fit_nuts`, as coefficients of the RAW
        features (scores ``X @ theta_`` equal the standardised scores up to one constant).
    scaling_ : FeatureScaling
        The feature standardisation fitted on the training split.
    diagnostics_ : dict
        After :meth:`fit_nuts`: ``divergences``, ``max_r_hat``, ``chains``, ``draws``
        (:func:`pm_perm.inference.checked_sample`); empty after :meth:`fit_map`.
    theta_draws_ : ndarray, shape (n_draws, n_features)
        After :meth:`fit_nuts`: all posterior draws (None after :meth:`fit_map`).
    prior_sigma_ : float
        The prior scale used.
    idata_ : DataTree or None
        ``pm.sample`` result after :meth:`fit_nuts` (``theta`` there is the STANDARDISED
        coefficient vector); None after :meth:`fit_map`.
    map_results_ : dict
        After :meth:`fit_map`: prior scale -> ``scipy.optimize.OptimizeResult``.
    model_ : pymc.Model
        The (unwhitened) model.
    validation_ : dict
        Prior scale -> validation metrics (when a validation split was given).
    timings_ : dict
        Wall time in seconds: ``"build"``, ``"map"``; ``"whitening"`` and ``"nuts"`` (the
        latter including the former).
    """

    def __init__(self, prior_sigmas, lbfgs_memory, standardize, maxiter=50_000):
        self.standardize = bool(standardize)
        self.maxiter = int(maxiter)
        self.lbfgs_memory = check_lbfgs_memory(lbfgs_memory)
        self.prior_sigmas = tuple(float(s) for s in prior_sigmas)
        if not self.prior_sigmas or any(not np.isfinite(s) or s <= 0 for s in self.prior_sigmas):
            raise ValueError(f"prior_sigmas must be positive numbers, got {prior_sigmas!r}")
        self.validation_ = {}
        self.timings_ = {}
        self._map = None  # (scale, standardised MAP) on the current split: fit_nuts' whitening

    def _build(self, train):
        raise NotImplementedError

    def _model(self, sigma, whitening):
        raise NotImplementedError

    def fit_map(self, train, valid=None):
        """MAP estimate: L-BFGS-B on the exact log-posterior, as ``pm.find_MAP`` does.

        With ``valid``, every scale in ``prior_sigmas`` is fitted and the one with the highest
        validation NDCG@5 kept; without, the first scale is used. The log-posterior and its
        gradient are compiled once for all scales and each fit starts from the previous optimum
        (:func:`pm_perm.inference.map_path`; the class's notes say when the start cannot change the
        optimum). A fit that does not converge raises ``MapFitError``; a ``valid`` that is
        not a ``RankingSplit`` with the training split's feature columns raises a
        ``ValueError`` before fitting. Returns ``self``.
        """
        if valid is not None:
            if not isinstance(valid, RankingSplit):
                raise ValueError("valid must be a pm_perm.learning_to_rank.data.RankingSplit (see "
                                 "read_letor) or None")
            if isinstance(train, RankingSplit):
                check_features(valid.X, train.n_features, "valid.X")
        self._build(train)
        t0 = time.perf_counter()

        def score(sigma, theta):
            self.validation_[sigma] = evaluate_ranking(self.scaling_.transform(valid.X) @ theta,
                                                       valid.y, valid.group_ptr, ks=(1, 3, 5))
            return self.validation_[sigma]["ndcg@5"]

        self.prior_sigma_, self._theta_std, _, self.map_results_ = map_path(
            self.model_, self.prior_sigmas, None if valid is None else score,
            maxcor=self.lbfgs_memory, maxiter=self.maxiter)
        self._map = (self.prior_sigma_, self._theta_std)
        self.theta_ = self.scaling_.to_raw(self._theta_std)
        self.diagnostics_ = {}
        self.idata_ = None
        self.theta_draws_ = None
        self.timings_["map"] = time.perf_counter() - t0
        return self

    def fit_nuts(self, train, *, prior_sigma=None, draws=1000, tune=1000, chains=4,
                 random_seed=None, progressbar=False, whiten=True, **kwargs):
        """Posterior draws of ``theta`` by NUTS (``pm.sample``); returns ``self``.

        ``prior_sigma`` defaults to the scale chosen by a previous :meth:`fit_map` (or the first
        candidate); on the split of that fit, its model and MAP are reused. With
        ``whiten=True`` (default) NUTS runs on ``z`` with ``theta = theta_map + L z``, ``L L^T``
        the inverse Hessian of the negative log-posterior at the MAP (central differences of
        the exact gradient, ``2 n_features`` evaluations; eigenvalues floored at 1e-8 of the
        largest): the posterior is unchanged, but correlated features (MQ2008 has many) no
        longer force NUTS to its maximum tree depth. ``theta_`` becomes the posterior mean and
        ``theta_draws_`` holds all draws, shape (chains * draws, n_features). The draws are
        checked (:func:`pm_perm.inference.checked_sample`: incomplete or non-finite draws raise,
        divergences and the largest r_hat go to ``diagnostics_``). Extra keyword arguments go
        to ``pm.sample``.
        """
        if getattr(self, "_train", None) is not train:
            self._build(train)
            self._map = None  # a MAP of another split
        sigma = float(prior_sigma or getattr(self, "prior_sigma_", self.prior_sigmas[0]))
        t0 = time.perf_counter()
        with self.model_:
            pm.set_data({"prior_sigma": sigma})
        model = self.model_
        if whiten:
            model = self._model(sigma, self._whitening(sigma))
        self.timings_["whitening"] = time.perf_counter() - t0
        idata, diagnostics = checked_sample(model, draws=draws, tune=tune, chains=chains,
                                            random_seed=random_seed, progressbar=progressbar,
                                            **kwargs)
        post = np.asarray(idata.posterior["theta"])
        self.idata_, self.diagnostics_ = idata, diagnostics
        self.prior_sigma_ = sigma
        draws_std = post.reshape(-1, post.shape[-1])
        self._theta_std = draws_std.mean(axis=0)
        self.theta_draws_ = self.scaling_.to_raw(draws_std)
        self.theta_ = self.theta_draws_.mean(axis=0)
        self.timings_["nuts"] = time.perf_counter() - t0
        return self

    def _whitening(self, sigma):
        """(MAP, L) at scale ``sigma``, L L^T the inverse Hessian of -log posterior there: the
        MAP of :meth:`fit_map` when it was fitted on this split at this scale, else a new one
        (not a posterior mean a previous :meth:`fit_nuts` left in ``theta_``)."""
        if self._map is not None and self._map[0] == sigma:
            loc = self._map[1]
        else:
            _, loc, _, _ = map_path(self.model_, [sigma], maxcor=self.lbfgs_memory,
                                    maxiter=self.maxiter)
            self._map = (sigma, loc)
        return laplace_whitening(self.model_, loc)

    def decision_function(self, X, *, draws=False):
        """Scores ``X @ theta`` (rank by decreasing score); with ``draws=True`` one row per
        posterior draw, shape (n_draws, n_docs). ``X`` must have the training split's feature
        columns and finite values (a clear ``ValueError`` otherwise)."""
        return linear_scores(self, X, draws)
