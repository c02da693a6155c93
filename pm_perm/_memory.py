"""The memory budget: how many bytes pm_perm may allocate for one table (private).

Read by the exact engines (the permanent's subset table, the partial-order tie blocks) and by
the readers that build dense arrays from a file (PrefLib orders, LETOR feature matrices), so
that an input too large for the machine gets an error naming its size instead of an
out-of-memory crash. No numba, no PyMC: the readers import it.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_BUDGET", "format_bytes", "memory_budget"]

#: bytes when ``PM_PERM_MEMORY_BUDGET`` is unset (2 GiB)
DEFAULT_BUDGET = 2 * 2**30


def memory_budget() -> int:
    """Bytes the exact engine may allocate for its tables.

    Read from the environment variable ``PM_PERM_MEMORY_BUDGET`` (an integer number of bytes,
    or with a suffix ``K``, ``M``, ``G``: powers of 1024); default 2 GiB. A value that is not a
    positive finite byte count (``-1``, ``0``, ``infG``, ``nanG``, ``2x``) raises ``ValueError``
    naming the variable.
    """
    raw = os.environ.get("PM_PERM_MEMORY_BUDGET", "").strip()
    if not raw:
        return DEFAULT_BUDGET
    mult = {"K": 2**10, "M": 2**20, "G": 2**30}
    try:
        if raw[-1].upper() in mult:
            budget = int(float(raw[:-1]) * mult[raw[-1].upper()])
        else:
            budget = int(raw)
    except (ValueError, OverflowError):  # not a number; NaN; infinity
        budget = 0
    if budget < 1:
        raise ValueError(
            f"PM_PERM_MEMORY_BUDGET={raw!r} is not a positive byte count; set it to e.g. "
            "2147483648 or 2G, or unset it for the default of 2 GiB"
        )
    return budget


def format_bytes(n: float) -> str:
    """``n`` bytes for a message: GiB from 1 GiB, MiB from 1 MiB, else kiB (powers of 1024)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n / 2**10:.2f} kiB"
