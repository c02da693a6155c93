"""Output paths of the benchmark scripts: checked before any work, written atomically.

A benchmark runs for minutes to hours; a wrong output path found at its end loses the run, and a
file written in place is left half written by an interrupt. These helpers check the path right
after the arguments are parsed (through ``pm_perm._io.check_outputs``: never an input file) and
write through ``pm_perm._io`` (the old file or the complete new one).
"""

from __future__ import annotations

from pathlib import Path

from pm_perm._io import OutputPathError, check_outputs, make_folder, write_json


def check_output(parser, option, path, inputs=()):
    """Check the output file ``path`` of ``option`` before any work; a bad path ends the run
    with ``parser.error`` (one line, exit status 2).

    Its missing folders are created (with their parents); an older result file may be replaced,
    one of ``inputs`` never. Nothing is checked when ``path`` is None or empty.
    """
    if not path:
        return
    try:
        make_folder(option, Path(path).parent)
        check_outputs({option: path}, inputs, overwrite=True)
    except OutputPathError as err:
        parser.error(str(err))


def mq2008_inputs(data_root):
    """The MQ2008 files under ``data_root`` (which no output may be); none if the folder is
    missing (loading a fold then fails with its own message)."""
    from pm_perm.ranking.data import _mq2008_folder

    try:
        return sorted(_mq2008_folder(data_root).glob("Fold*/*.txt"))
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
