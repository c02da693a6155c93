"""Ranking data without features: ballots, surveys, judges' orderings (PrefLib files).

Value convention (rank form, ``-1`` = unranked, ties share the smallest position of their
block): ``docs/guide/rankings_data.md``.
"""

from pm_perm.rankings.data import RankingData, read_preflib, write_preflib

__all__ = ["RankingData", "read_preflib", "write_preflib"]
