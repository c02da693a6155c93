"""Output paths of the benchmark scripts: checked before any work, written atomically.

A benchmark runs for minutes to hours; a wrong output path found at its end loses the run, and a
file written in place is left half written by an interrupt. These helpers check the path right
after the arguments are parsed (``pm_perm._io.check_output_option``: never an input file) and
write through ``pm_perm._io`` (the old file or the complete new one).
"""

from __future__ import annotations

from pm_perm._io import check_output_option as check_output
from pm_perm._io import write_json

__all__ = ["check_output", "mq2008_inputs", "write_result"]


def mq2008_inputs(data_root):
    """The MQ2008 files under ``data_root`` (which no output may be); none if the folder is
    missing (loading a fold then fails with its own message)."""
    from pm_perm.datasets.mq2008 import mq2008_folder

    try:
        return sorted(mq2008_folder(data_root).glob("Fold*/*.txt"))
    except FileNotFoundError:
        return []


_REPORTED: set = set()


def write_result(path, obj):
    """Write ``obj`` to ``path`` atomically as strict JSON (non-finite values as null); print
    each warning about them once per process (a checkpointed file is rewritten often)."""
    for problem in write_json(path, obj):
        if (str(path), problem) not in _REPORTED:
            _REPORTED.add((str(path), problem))
            print(f"warning: {path}: {problem}")
