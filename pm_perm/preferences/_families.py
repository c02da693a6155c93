"""The ranking-model families and the name of each one's order parameter (private)."""

from __future__ import annotations

FAMILIES = ("plackett-luce", "rank-one", "full")


def check_family(family):
    """Raise unless ``family`` is one of ``FAMILIES`` (shared by the functions taking one)."""
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")


def param_name(family):
    """The order model's parameter: utilities ``"u"`` (Plackett-Luce) or logits ``"W"``."""
    return "u" if family == "plackett-luce" else "W"
