"""Learned graph matching (Petterson et al. 2009, sec. 5.2): shape-context features, generated
silhouette pairs, the exponential-family model (MAP, NUTS) and max-margin baseline.

Modules: :mod:`~pm_perm.matching.features` (descriptors, edge features),
:mod:`~pm_perm.matching.data` (silhouette generator), :mod:`~pm_perm.matching.model`
(model, fits, baselines, posterior marginals, calibration). The CMU house and MPEG-7 loaders are
in :mod:`pm_perm.datasets.cmu_house` and :mod:`pm_perm.datasets.mpeg7`.
"""

# each submodule's __all__ is the one list of its public names; the package re-exports them
from pm_perm.matching import data, features, model
from pm_perm.matching.data import *  # noqa: F403
from pm_perm.matching.features import *  # noqa: F403
from pm_perm.matching.model import *  # noqa: F403

__all__ = [*data.__all__, *features.__all__, *model.__all__]
