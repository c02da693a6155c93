"""Ranking data without features: ballots, surveys, judges' orderings (PrefLib files).

Value convention (rank form, ``-1`` = unranked, ties share the smallest position of their
block): ``docs/guide/preferences_data.md``.

The names below are imported on first use (PEP 562): ``pm-perm --help`` imports this package
for its ``preferences`` subcommand and needs neither the reader nor numba for that. The
modules: :mod:`~pm_perm.preferences.data` (``RankingData``), :mod:`~pm_perm.preferences.preflib`
(PrefLib reader and writer), :mod:`~pm_perm.preferences.pairwise` (pairwise comparison
tables: ``read_pairwise``), :mod:`~pm_perm.preferences.rank_matrix` (BayesMallows-style rank
matrices: ``read_rank_matrix``), :mod:`~pm_perm.preferences.predict` (prediction for a new
assessor: ``predict_next``, ``predict_top``); :mod:`~pm_perm.preferences.consensus` summarises
the posterior of a latent consensus ranking.
"""

from pm_perm._lazy import lazy_attributes as _lazy_attributes

__all__ = ["PairwiseData", "RankingData", "predict_next", "predict_top", "read_pairwise",
           "read_preflib", "read_rank_matrix", "write_preflib"]
# the names of __all__ (from pm_perm.preferences.data, .pairwise, .predict, .preflib and
# .rank_matrix) and the submodules, on first access
__getattr__, __dir__ = _lazy_attributes(__name__, {"PairwiseData": "pm_perm.preferences.pairwise",
                                                   "RankingData": "pm_perm.preferences.data",
                                                   "predict_next": "pm_perm.preferences.predict",
                                                   "predict_top": "pm_perm.preferences.predict",
                                                   "read_pairwise": "pm_perm.preferences.pairwise",
                                                   "read_preflib": "pm_perm.preferences.preflib",
                                                   "read_rank_matrix":
                                                       "pm_perm.preferences.rank_matrix",
                                                   "write_preflib": "pm_perm.preferences.preflib"},
                                        globals())
