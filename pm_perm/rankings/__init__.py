"""Ranking data without features: ballots, surveys, judges' orderings (PrefLib files).

Value convention (rank form, ``-1`` = unranked, ties share the smallest position of their
block): ``docs/guide/rankings_data.md``.

The names below are imported on first use (PEP 562): ``pm-perm --help`` imports this package
for its ``rankings`` subcommand and needs neither the reader nor numba (0.3 s) for that.
"""

__all__ = ["RankingData", "read_preflib", "write_preflib"]


def __getattr__(name):
    """``RankingData``, ``read_preflib``, ``write_preflib`` (from :mod:`pm_perm.rankings.data`)
    and the submodules, imported on first access."""
    import importlib
    import importlib.util

    if name in __all__:
        value = getattr(importlib.import_module("pm_perm.rankings.data"), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
