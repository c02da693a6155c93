"""Learned graph matching (Petterson et al. 2009, sec. 5.2): shape-context features, generated
silhouette pairs, the exponential-family model (MAP, NUTS) and max-margin baseline.

Modules: :mod:`~pm_perm.matching.features` (descriptors, edge features),
:mod:`~pm_perm.matching.data` (silhouette generator), :mod:`~pm_perm.matching.model`
(model, fits, baselines, posterior marginals, calibration). The CMU house and MPEG-7 loaders are
in :mod:`pm_perm.datasets.cmu_house` and :mod:`pm_perm.datasets.mpeg7`.
"""

from pm_perm.matching.data import make_silhouette_pairs
from pm_perm.matching.features import edge_features, normalized_coordinates, shape_context
from pm_perm.matching.model import (
    MapFit,
    baseline_prior_mean,
    calibration_table,
    feature_scale,
    fit_map,
    fit_max_margin,
    fit_nuts,
    hamming_error,
    log_likelihood,
    matching_model,
    no_learning_theta,
    posterior_matching_marginals,
    predict,
    sub_matchings,
)

__all__ = [
    "MapFit",
    "baseline_prior_mean",
    "calibration_table",
    "edge_features",
    "feature_scale",
    "fit_map",
    "fit_max_margin",
    "fit_nuts",
    "hamming_error",
    "log_likelihood",
    "make_silhouette_pairs",
    "matching_model",
    "no_learning_theta",
    "normalized_coordinates",
    "posterior_matching_marginals",
    "predict",
    "shape_context",
    "sub_matchings",
]
