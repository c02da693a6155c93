"""Learned graph matching: the exponential-family model (MAP, NUTS) and its baselines.

The model (Petterson et al. 2009, sec. 3 and 5.2): for a pair of point sets with edge features
``x`` of shape ``(M, M, d)``, the matching ``y`` (``y[i]`` = point of the second set matched to
point ``i`` of the first) follows ``PermutationExpFamily(logits=x . theta)``, with a Gaussian
prior ``theta ~ N(0, sigma^2 I)``; all training pairs enter as one batched likelihood term.
The prediction for a new pair is the model's mode, the max-weight matching of ``x . theta``.

Baselines on the same features: *no learning* (equal weights on the descriptor distances,
i.e. plain shape-context matching) and *max-margin* learning (a structured SVM with Hamming
loss, Caetano et al. 2009), solved by block-coordinate Frank-Wolfe (Lacoste-Julien et al. 2013)
with the Hungarian algorithm for loss-augmented inference.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
import pymc as pm
from scipy.optimize import linear_sum_assignment, minimize_scalar

from pm_perm.distributions import PermutationExpFamily, edge_logits
from pm_perm.distributions.permutation import check_observed_permutations
from pm_perm.inference import map_path, whitened_normal
from pm_perm.kernels.matching import max_weight_matching
from pm_perm.kernels.permanent import log_permanent, permutation_marginals

__all__ = [
    "MapFit",
    "baseline_prior_mean",
    "calibration_table",
    "feature_scale",
    "fit_map",
    "fit_max_margin",
    "fit_nuts",
    "hamming_error",
    "log_likelihood",
    "matching_model",
    "no_learning_theta",
    "posterior_matching_marginals",
    "predict",
    "sub_matchings",
]


def _check_x(x, ndim=None):
    """Edge features ``(..., M, M, d)`` (exactly ``ndim`` axes if given), all finite."""
    x = np.asarray(x, dtype=np.float64)
    if (x.ndim < 3 if ndim is None else x.ndim != ndim) or x.shape[-3] != x.shape[-2]:
        lead = "..." if ndim is None else "n_pairs"
        raise ValueError(f"x must have shape ({lead}, M, M, d); got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x contains NaN or inf features; fix or drop those pairs (edge "
                         "features of finite point sets are finite)")
    return x


def _check_xy(x, y):
    x = _check_x(x, ndim=4)
    y = np.asarray(y)
    if y.shape != x.shape[:2]:
        raise ValueError(f"y must have shape (n_pairs, M) = {x.shape[:2]}; got {y.shape}")
    check_observed_permutations(y, y.shape[1])
    return x, y.astype(np.int64)


def _check_theta(theta, d, name="theta"):
    """``theta`` of shape (d,), or draws ``theta_draws`` of shape (S, d)."""
    theta = np.asarray(theta, dtype=np.float64)
    want = f"({d},)" if name == "theta" else f"(S, {d})"
    if theta.ndim != (1 if name == "theta" else 2) or theta.shape[-1] != d:
        raise ValueError(f"{name} must have shape {want}, one weight per feature of x; got "
                         f"shape {theta.shape}")
    if not np.all(np.isfinite(theta)):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(theta))[0])
        raise ValueError(f"{name} must be finite; {name}[{', '.join(map(str, where))}] is "
                         f"{theta[where]} (a failed fit? check its diagnostics)")
    return theta


def _logits(x, theta):
    """``x . theta``, refused when it overflows (finite weights whose products are not)."""
    with np.errstate(over="ignore", invalid="ignore"):
        W = x @ theta
    if not np.all(np.isfinite(W)):
        raise ValueError("x . theta overflows float64 (edge logits beyond 1.8e308); theta or "
                         f"the features are far too large (max |theta| = "
                         f"{np.max(np.abs(theta)):.3g}); rescale the features or check the fit")
    return W


def _check_prior_sigmas(prior_sigmas):
    sigmas = tuple(np.atleast_1d(np.asarray(prior_sigmas, dtype=np.float64)).ravel().tolist())
    if not sigmas or any(not np.isfinite(s) or s <= 0 for s in sigmas):
        raise ValueError(f"prior_sigmas must be positive numbers, got {prior_sigmas!r}")
    return sigmas


def feature_scale(x):
    """Per-feature scale ``s[c]`` = mean of ``x[..., c]`` (1 where that mean is 0).

    Learning uses ``x / s`` so that every feature is of order one and one prior scale (or one
    regularisation constant) fits all; O(size of x).
    """
    s = np.asarray(x, dtype=np.float64).reshape(-1, np.shape(x)[-1]).mean(axis=0)
    return np.where(s > 0, s, 1.0)


def no_learning_theta(d, n_descriptor=None):
    """Weights of plain descriptor matching: ``-1`` on the first ``n_descriptor`` features.

    With the squared-difference features of :func:`pm_perm.matching.features.edge_features`,
    ``x . theta`` is then minus the squared Euclidean distance between the descriptors, and the
    max-weight matching is plain shape-context matching. Extra features get weight 0.
    """
    theta = np.zeros(d)
    theta[: d if n_descriptor is None else n_descriptor] = -1.0
    return theta


def sub_matchings(x, y, size, n_sub=1, seed=0, disjoint=False):
    """Random sub-matchings of ``size`` points per pair (for a composite likelihood).

    For each pair and each of ``n_sub`` draws, a random set ``S`` of ``size`` rows is kept with
    the columns ``y[S]`` they are matched to. Under the model, the conditional law of ``y`` on
    ``S`` given ``y`` on the other rows (equivalently, given that ``S`` is mapped onto
    ``y[S]``) is again ``PermutationExpFamily`` with logits ``W[S][:, y[S]]``: each
    sub-matching is an exact *conditional* likelihood, and their product over pairs is a
    composite likelihood (Lindsay 1988). It costs O(size 2^size) per term instead of
    O(M 2^M), which makes M = 30 (beyond ``EXACT_MAX_M``) trainable and M = 20 cheap.

    Parameters
    ----------
    x : array_like of float, shape (n_pairs, M, M, d)
    y : array_like of int, shape (n_pairs, M)
    size : int
        Points per sub-matching, ``2 <= size <= M``.
    n_sub : int
        Sub-matchings per pair.
    seed : int
    disjoint : bool
        If true, the ``n_sub`` row sets of a pair are disjoint (blocks of one random order of
        the rows; needs ``n_sub * size <= M``), so no point is counted twice; otherwise each set
        is drawn independently.

    Returns
    -------
    x_sub : ndarray, shape (n_pairs * n_sub, size, size, d)
    y_sub : ndarray of int64, shape (n_pairs * n_sub, size)
        Sub-matchings of pair ``p`` are rows ``p * n_sub .. (p + 1) * n_sub - 1``. Columns are
        put in a random order, so the sub-problems' truths are not all the identity.
    """
    x, y = _check_xy(x, y)
    n, M = y.shape
    if not 2 <= size <= M:
        raise ValueError(f"size must be in 2..M = {M}; got {size}")
    if disjoint and n_sub * size > M:
        raise ValueError(f"disjoint sub-matchings need n_sub * size <= M = {M}")
    rng = np.random.default_rng(seed)
    if disjoint:
        order = np.argsort(rng.random((n, M)), axis=1)[:, : n_sub * size]
        rows = order.reshape(n * n_sub, size)
    else:
        rows = np.argsort(rng.random((n * n_sub, M)), axis=1)[:, :size]  # random subsets S
    pair = np.repeat(np.arange(n), n_sub)
    shuffle = np.argsort(rng.random((n * n_sub, size)), axis=1)
    cols = np.take_along_axis(np.take_along_axis(y[pair], rows, axis=1), shuffle, axis=1)
    x_sub = x[pair[:, None, None], rows[:, :, None], cols[:, None, :]]
    return x_sub, np.argsort(shuffle, axis=1).astype(np.int64)


def matching_model(x, y, prior_sigma=1.0, method="exact", whitening=None, prior_mean=None):
    """PyMC model: ``theta ~ N(mu, prior_sigma^2 I)``, ``y ~ PermutationExpFamily(x . theta)``.

    Parameters
    ----------
    x : array_like of float, shape (n_pairs, M, M, d)
        Edge features of the training pairs (scaled, see :func:`feature_scale`).
    y : array_like of int, shape (n_pairs, M)
        True matchings, ``y[p, i]`` = column matched to row ``i`` of pair ``p``.
    prior_sigma : float
        Prior scale, held in the ``pm.Data`` container ``"prior_sigma"`` (change it with
        ``pm.set_data`` without rebuilding the model).
    method : {"exact", "bethe"}
        Passed to :class:`pm_perm.PermutationExpFamily`.
    whitening : tuple (loc, L), optional
        Sample ``z ~ N(0, I)``-scaled coordinates instead: ``theta = loc + L z`` is then a
        ``pm.Deterministic`` and the prior is written on ``theta`` (the posterior is unchanged;
        see :func:`fit_nuts`).
    prior_mean : array_like of float, shape (d,), optional
        The prior mean ``mu`` (default 0). E.g. a multiple of :func:`no_learning_theta` (see
        :func:`baseline_prior_mean`) shrinks towards plain descriptor matching instead of
        towards ``theta = 0`` (all matchings equally likely).

    Returns
    -------
    pymc.Model
        ``theta`` (dims ``"feature"``) and one batched observed term ``"y"``. One log-posterior
        gradient costs O(n_pairs M 2^M) with the exact engine (about 10 ms per pair at M = 20).

    Raises
    ------
    ValueError
        If ``x`` is not of shape (n_pairs, M, M, d) or holds NaN or inf, ``y`` is not one
        permutation per pair, ``prior_sigma`` is not a positive number, or ``prior_mean`` is
        not finite of shape (d,).
    """
    x, y = _check_xy(x, y)
    if not (np.isfinite(prior_sigma) and prior_sigma > 0):
        raise ValueError(f"prior_sigma must be a positive number, got {prior_sigma!r}")
    coords = {"feature": np.arange(x.shape[-1]), "pair": np.arange(x.shape[0]),
              "row": np.arange(x.shape[1])}
    with pm.Model(coords=coords) as model:
        sigma = pm.Data("prior_sigma", float(prior_sigma))
        mu = 0.0
        if prior_mean is not None:
            mu = np.asarray(prior_mean, dtype=np.float64)
            if mu.shape != (x.shape[-1],) or not np.all(np.isfinite(mu)):
                raise ValueError(f"prior_mean must be finite with shape ({x.shape[-1]},); "
                                 f"got shape {mu.shape}")
        theta = whitened_normal("theta", mu, sigma, dims="feature", whitening=whitening)
        PermutationExpFamily("y", logits=edge_logits(x, theta), method=method, observed=y,
                             dims=("pair", "row"))
    return model


class MapFit(NamedTuple):
    """Result of :func:`fit_map`: the chosen prior scale, its MAP and the validation scores."""

    theta: np.ndarray
    prior_sigma: float
    val_errors: dict
    #: Scale -> tie-break log-likelihood (an empty read-only mapping without ``tiebreak``).
    tiebreak_loglik: Mapping = MappingProxyType({})


def fit_map(x, y, prior_sigmas=(1.0,), validation=None, method="exact", tiebreak=None,
            prior_mean=None, lbfgs_memory=10, maxiter=50_000):
    """MAP estimate of ``theta``, the prior scale chosen by validation Hamming error.

    Parameters
    ----------
    x, y, method, prior_mean
        See :func:`matching_model`.
    prior_sigmas : float or sequence of float
        Candidate prior scales, fitted in this order, each warm-started at the previous optimum.
    validation : tuple (x_val, y_val), optional
        Validation pairs (any M): the scale whose MAP has the lowest :func:`hamming_error` of
        :func:`predict` is chosen. Without it only the first scale is fitted.
    tiebreak : tuple (x_tb, y_tb), optional
        Pairs with M <= ``EXACT_MAX_M`` (e.g. :func:`sub_matchings` of the validation pairs)
        whose exact :func:`log_likelihood` breaks ties in the validation error, which are
        common when few validation pairs are (nearly) all matched right. Without it, and for
        ties in both, the earliest scale in ``prior_sigmas`` wins.
    lbfgs_memory : int
        L-BFGS-B memory (``maxcor``). The shape-context bins are strongly correlated, so weakly
        regularised fits are ill-conditioned and converge in far fewer iterations with more
        memory (e.g. 50 instead of scipy's 10; same optimum).
    maxiter : int
        L-BFGS-B iteration limit per scale.

    Returns
    -------
    MapFit

    Raises
    ------
    ValueError
        For bad ``x``, ``y`` or ``prior_mean`` (see :func:`matching_model`) or a non-positive
        scale in ``prior_sigmas``.
    pm_perm.inference.MapFitError
        A fit did not converge.

    Notes
    -----
    The same optimum as ``pm.find_MAP`` (L-BFGS-B on the model's log posterior and gradient),
    but the log posterior is compiled once for all scales (``pm_perm.inference.map_path``).
    The negative log posterior is convex in ``theta`` (Petterson et al. 2009), so the start does
    not matter. Each L-BFGS-B step costs one value-and-gradient pass, O(n_pairs M 2^M).
    """
    sigmas = _check_prior_sigmas(prior_sigmas)
    model = matching_model(x, y, sigmas[0], method, prior_mean=prior_mean)
    score = None
    if validation is not None:
        x_val, y_val = validation

        def score(sigma, theta):
            err = hamming_error(predict(x_val, theta), y_val)
            if tiebreak is None:
                return (-err,)
            return (-err, log_likelihood(*tiebreak, theta))

    sigma, theta, scores, _ = map_path(model, sigmas, score, start=prior_mean,
                                       maxcor=lbfgs_memory, maxiter=maxiter)
    return MapFit(np.asarray(theta, dtype=np.float64), float(sigma),
                  {s: -v[0] for s, v in scores.items()},
                  {s: v[1] for s, v in scores.items() if len(v) > 1})


def baseline_prior_mean(x, y, direction, spread_bounds=(1e-3, 1e3)):
    """The maximum-likelihood multiple ``alpha * direction`` of fixed weights, as a prior mean.

    With ``direction`` the no-learning weights (:func:`no_learning_theta`, times the feature
    scale if ``x`` is scaled), ``alpha`` is the one temperature that makes plain descriptor
    matching a calibrated model of the training matchings. Used as ``prior_mean`` it centres the
    prior on that matcher: as the prior scale goes to 0 the MAP's predictions become those of
    no learning, as it grows they approach the maximum-likelihood fit.

    Parameters
    ----------
    x, y
        Training pairs with M <= ``EXACT_MAX_M`` (e.g. :func:`sub_matchings`).
    direction : array_like of float, shape (d,)
        Weights whose max-weight matchings are the baseline's (only their direction matters).
    spread_bounds : tuple of float
        Search range of the standard deviation of the logits ``x . (alpha * direction)`` over
        all training entries (scale-free bounds on ``alpha``). If the baseline matches every
        training pair perfectly, the likelihood rises towards 1 as ``alpha`` grows, and a point
        on that plateau is returned: a prior mean under which the baseline is all but certain.

    Returns
    -------
    ndarray of float64, shape (d,)
        ``alpha * direction``.

    Notes
    -----
    The log-likelihood is concave in ``alpha`` (an exponential family along a line), so a
    bounded scalar search on ``log alpha`` finds it: about 25 evaluations of
    :func:`log_likelihood`, O(n_pairs M 2^M) each.
    """
    x, y = _check_xy(x, y)
    direction = np.asarray(direction, dtype=np.float64)
    if direction.shape != (x.shape[-1],) or not np.all(np.isfinite(direction)):
        raise ValueError(f"direction must be finite with shape ({x.shape[-1]},); "
                         f"got shape {direction.shape}")
    spread = float(np.std(x @ direction))
    if not spread > 0:
        raise ValueError("x . direction is constant: the direction cannot score matchings")
    lo, hi = (np.log(b / spread) for b in spread_bounds)
    res = minimize_scalar(lambda la: -log_likelihood(x, y, np.exp(la) * direction),
                          bounds=(lo, hi), method="bounded", options={"xatol": 1e-3})
    return np.exp(res.x) * direction


def fit_nuts(x, y, prior_sigma=1.0, draws=500, tune=500, chains=4, seed=0, cores=1,
             whitening=None, method="exact", **kwargs):
    """Posterior of ``theta`` by NUTS (``pm.sample``); returns the ``InferenceData``.

    Parameters
    ----------
    x, y, prior_sigma, method
        See :func:`matching_model`.
    draws, tune, chains, seed, cores
        Passed to ``pm.sample`` (with ``random_seed=seed``), as are extra keyword arguments.
    whitening : tuple (loc, L), optional
        E.g. ``pm_perm.inference.laplace_whitening(matching_model(x, y, prior_sigma), theta)``
        at the MAP ``theta`` (the inverse Hessian of the negative log posterior there, by
        central differences of the exact gradient, O(d n_pairs M 2^M)): NUTS then runs on
        ``z`` with ``theta = loc + L z``, which removes most of the correlation between the
        shape-context bins. The posterior is unchanged.

    Notes
    -----
    Cost: about ``chains * (draws + tune) * (leapfrog steps)`` gradients of O(n_pairs M 2^M)
    each; keep ``n_pairs`` and ``M`` moderate (sub-matchings, :func:`sub_matchings`).
    """
    model = matching_model(x, y, prior_sigma, method, whitening=whitening)
    with model:
        return pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                         progressbar=False, **kwargs)


def predict(x, theta):
    """Predicted matchings: the max-weight matching of ``x . theta`` (the model's mode).

    ``x`` of shape ``(..., M, M, d)``, finite, ``theta`` of shape ``(d,)``; returns int64
    ``(..., M)``. O(M^3) per pair (Hungarian), any M. Raises ``ValueError`` for other shapes,
    non-finite ``x`` or ``theta``, or an ``x . theta`` that overflows.
    """
    x = _check_x(x)
    theta = _check_theta(theta, x.shape[-1])
    return max_weight_matching(_logits(x, theta))


def log_likelihood(x, y, theta):
    """Exact ``sum_p log p(y_p | x_p, theta)`` of matchings under the model.

    ``x`` of shape ``(n_pairs, M, M, d)`` with M <= ``EXACT_MAX_M``, ``y`` of shape
    ``(n_pairs, M)``, ``theta`` of shape ``(d,)``; returns a float (log base e).
    O(n_pairs M 2^M) (exact permanent; about 0.1 ms per pair at M = 15). Raises
    ``ValueError`` for other shapes, non-finite ``x`` or ``theta``, an ``x . theta`` that
    overflows, or a ``y`` that is not a permutation.
    """
    x, y = _check_xy(x, y)
    theta = _check_theta(theta, x.shape[-1])
    W = _logits(x, theta)
    hit = np.take_along_axis(W, y[:, :, None], axis=2)[..., 0].sum(axis=1)
    return float(np.sum(hit - log_permanent(W)))


def hamming_error(y_pred, y_true):
    """Mean fraction of points matched to the wrong point (normalised Hamming loss).

    ``y_pred`` and ``y_true`` must have the same shape, e.g. ``(n_pairs, M)`` (``ValueError``
    otherwise: they are not broadcast).
    """
    y_pred, y_true = np.asarray(y_pred), np.asarray(y_true)
    if y_pred.shape != y_true.shape:
        raise ValueError(f"y_pred and y_true must have the same shape; got {y_pred.shape} and "
                         f"{y_true.shape}")
    return float(np.mean(y_pred != y_true))


def posterior_matching_marginals(x, theta_draws):
    """Posterior matching marginals ``P[p, i, j] = E_theta[p(y_p[i] = j | theta)]``.

    Parameters
    ----------
    x : array_like of float, shape (n_pairs, M, M, d)
    theta_draws : array_like of float, shape (S, d)
        Posterior draws of ``theta``.

    Returns
    -------
    ndarray of float64, shape (n_pairs, M, M)
        The average over draws of the exact marginal matrices (doubly stochastic).

    Raises
    ------
    ValueError
        If ``x`` holds NaN or inf, the draws do not have ``d`` finite weights each, or
        ``x . theta`` overflows.

    Notes
    -----
    O(S n_pairs M 2^M) time (exact engine, M <= ``EXACT_MAX_M``): at M = 20 about 11 ms per
    (draw, pair).
    """
    x = _check_x(x, ndim=4)
    draws = _check_theta(np.atleast_2d(theta_draws), x.shape[-1], "theta_draws")
    P = np.zeros(x.shape[:-1])
    for theta in draws:
        P += permutation_marginals(_logits(x, theta))
    return P / len(draws)


def calibration_table(P, y_true, edges=(0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0),
                      entries="predicted"):
    """Calibration of matching marginals: stated probability against frequency correct.

    Parameters
    ----------
    P : array_like of float, shape (n_pairs, M, M)
        Matching marginals (e.g. :func:`posterior_matching_marginals`).
    y_true : array_like of int, shape (n_pairs, M)
    edges : sequence of float
        Bin edges for the probabilities (the last bin is closed on the right).
    entries : {"predicted", "all"}
        ``"predicted"``: the predicted match of each row, i.e. the max-weight matching ``yhat``
        of ``P`` (the Bayes decision under Hamming loss: it maximises the expected number of
        correct points), with probability ``P[i, yhat[i]]``, correct if
        ``yhat[i] = y_true[i]``. ``"all"``: every cell ``P[i, j]``, "correct" if
        ``j = y_true[i]`` (a reliability diagram of the whole marginal matrix).

    Returns
    -------
    list of dict
        One row per non-empty bin with keys ``lo, hi, n, mean_prob, frac_correct``.
        Calibrated marginals have ``mean_prob ~ frac_correct`` in every bin. O(n_pairs M^3).

    Raises
    ------
    ValueError
        ``edges`` not increasing (or fewer than two), shapes of ``P`` and ``y_true`` that do
        not match, or an unknown ``entries``.
    """
    P = np.asarray(P, dtype=np.float64)
    y_true = np.asarray(y_true)
    edges = np.asarray(edges, dtype=np.float64)
    if edges.ndim != 1 or edges.size < 2 or not np.all(np.diff(edges) > 0):
        raise ValueError(f"edges must be at least two increasing bin edges; got {edges.tolist()}")
    if P.ndim < 2 or P.shape[-1] != P.shape[-2] or y_true.shape != P.shape[:-1]:
        raise ValueError(f"P must have shape (n_pairs, M, M) and y_true (n_pairs, M); got "
                         f"{P.shape} and {y_true.shape}")
    if entries == "predicted":
        yhat = max_weight_matching(P)
        prob = np.take_along_axis(P, yhat[..., None], axis=-1)[..., 0].ravel()
        correct = (yhat == y_true).ravel()
    elif entries == "all":
        prob = P.ravel()
        correct = (np.arange(P.shape[-1]) == y_true[..., None]).ravel()
    else:
        raise ValueError(f"entries must be 'predicted' or 'all'; got {entries!r}")
    idx = np.clip(np.searchsorted(edges, prob, side="right") - 1, 0, len(edges) - 2)
    rows = []
    for b in range(len(edges) - 1):
        m = idx == b
        if m.any():
            rows.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int(m.sum()),
                         "mean_prob": float(prob[m].mean()),
                         "frac_correct": float(correct[m].mean())})
    return rows


def _joint_features(x, y):
    """``phi(x, y) = sum_i x[i, y[i]]`` for one pair, shape (d,)."""
    return x[np.arange(len(y)), y].sum(axis=0)


def fit_max_margin(x, y, lam=1e-3, epochs=300, seed=0, tol=1e-3, return_info=False):
    """Max-margin (structured SVM) weights with normalised Hamming loss (Caetano et al. 2009).

    Minimises ``lam / 2 ||theta||^2 + (1 / n) sum_p max_y [Delta(y, y_p) + <theta, phi_p(y) -
    phi_p(y_p)>]`` with ``phi_p(y) = sum_i x_p[i, y[i]]`` and ``Delta`` the fraction of wrong
    points, by block-coordinate Frank-Wolfe (Lacoste-Julien, Jaggi, Schmidt & Pletscher 2013):
    each step solves the loss-augmented problem of one pair with the Hungarian algorithm and
    takes the optimal step on the dual, no step size to tune.

    Parameters
    ----------
    x : array_like of float, shape (n_pairs, M, M, d)
    y : array_like of int, shape (n_pairs, M)
    lam : float
        Regularisation constant (choose it on validation data).
    epochs : int
        Maximum number of passes over the pairs (in a random order each).
    seed : int
    tol : float
        Stop after the first pass whose summed block duality gaps (the BCFW estimate of the
        duality gap, on the scale of the objective, whose loss term is in [0, 1]) is ``<= tol``.
    return_info : bool
        Also return ``{"epochs": passes run, "gap": last pass's gap estimate}``.

    Returns
    -------
    ndarray of float64, shape (d,)
        Weights in the ``W = x . theta`` convention (predict with :func:`predict`); with
        ``return_info``, the tuple ``(theta, info)``.

    Raises
    ------
    ValueError
        If ``x`` is not of shape (n_pairs, M, M, d) or holds NaN or inf, ``y`` is not one
        permutation per pair, or ``lam <= 0``.

    Notes
    -----
    O(epochs n_pairs (M^3 + M^2 d)). BCFW needs O(1 / (lam * tol)) passes in the worst case:
    small ``lam`` may stop at ``epochs`` before reaching ``tol`` (check ``info["gap"]``).
    """
    x, y = _check_xy(x, y)
    n, M, _, d = x.shape
    if lam <= 0:
        raise ValueError(f"lam must be > 0; got {lam}")
    rng = np.random.default_rng(seed)
    phi_true = np.stack([_joint_features(x[p], y[p]) for p in range(n)])
    hamming_gain = 1.0 - np.eye(M)[y]  # [p, i, j] = 1 if j != y[p, i]
    w = np.zeros(d)
    w_i = np.zeros((n, d))
    ell_i = np.zeros(n)
    epoch, total_gap = 0, np.inf
    while epoch < epochs and total_gap > tol:
        epoch += 1
        total_gap = 0.0
        for p in rng.permutation(n):
            aug = x[p] @ w + hamming_gain[p] / M
            rows, cols = linear_sum_assignment(aug, maximize=True)
            ystar = np.empty(M, dtype=np.int64)
            ystar[rows] = cols
            w_s = (phi_true[p] - _joint_features(x[p], ystar)) / (lam * n)
            ell_s = np.mean(ystar != y[p]) / n
            diff = w_i[p] - w_s
            gap = lam * diff @ w - ell_i[p] + ell_s  # this block's duality gap
            total_gap += gap
            denom = lam * diff @ diff
            gamma = 0.0 if denom <= 0 else min(max(gap / denom, 0.0), 1.0)
            new_w_i = (1 - gamma) * w_i[p] + gamma * w_s
            w += new_w_i - w_i[p]
            w_i[p] = new_w_i
            ell_i[p] = (1 - gamma) * ell_i[p] + gamma * ell_s
    if return_info:
        return w, {"epochs": epoch, "gap": float(total_gap)}
    return w
