"""What every ``pm-perm`` subcommand shares: option types, exit statuses, status lines, the JSON
result with its run record, and the reporting of outputs that could not be written.

The rules of the outputs themselves (checked before any work, written atomically, never an input,
a device or FIFO written directly and never replaced, ``-`` for the standard output) are
:mod:`pm_perm._io`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

import numpy as np

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT_FAILED",
    "FRACTION",
    "NON_NEGATIVE_INT",
    "OPEN_UNIT_FLOAT",
    "POSITIVE_FLOAT",
    "POSITIVE_INT",
    "STDOUT_HELP",
    "checked_type",
    "finish_outputs",
    "library_versions",
    "progress_context",
    "run_record",
    "status",
    "stdout_for_results",
    "write_json_result",
]

#: exit statuses of every subcommand: 0 done; 1 an output could not be written (the others
#: were); 2 bad input or options (nothing was fitted); 3 the fit failed (nothing was written);
#: 130 interrupted (Ctrl-C; nothing was written)
EXIT_OK, EXIT_OUTPUT_FAILED, EXIT_BAD_INPUT, EXIT_FIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def checked_type(kind, ok, requirement):
    """An ``argparse`` type: ``kind(text)`` if ``ok`` of it, else an error naming the option
    (argparse prefixes ``argument --option:``) and exit status 2, before any work."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
        return value

    return parse


POSITIVE_INT = checked_type(int, lambda v: v >= 1, "a positive integer")
NON_NEGATIVE_INT = checked_type(int, lambda v: v >= 0, "a non-negative integer")
POSITIVE_FLOAT = checked_type(float, lambda v: 0.0 < v < np.inf, "a positive finite number")
OPEN_UNIT_FLOAT = checked_type(float, lambda v: 0.0 < v < 1.0,
                               "a number strictly between 0 and 1")
FRACTION = checked_type(float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")


#: what the help of an output option says about ``-``, devices and FIFOs
STDOUT_HELP = ("; - for the standard output (the summary then goes to the standard error); a "
               "device or FIFO (/dev/null) is written directly, never replaced")


def stdout_for_results(*outputs):
    """A context for a whole run: if one of ``outputs`` is ``-`` (the standard output), the
    standard output carries that output alone, and the summary, progress bars and everything
    else printed go to the standard error (:func:`pm_perm._io.reserve_stdout`)."""
    from pm_perm._io import STDOUT, reserve_stdout

    return reserve_stdout() if STDOUT in outputs else contextlib.nullcontext()


def status(msg):
    """A status line on standard error (standard output carries the results); none inside
    :func:`pm_perm._progress.quiet` (a command's ``--quiet``)."""
    from pm_perm._progress import is_quiet

    if not is_quiet():
        print(msg, file=sys.stderr, flush=True)


def progress_context(quiet):
    """The context of a whole run: with ``quiet`` no progress and no status lines
    (:mod:`pm_perm._progress`; errors and warnings are still printed). Progress of long fits is
    otherwise shown on the standard error when it is a terminal, never when it is piped."""
    from pm_perm._progress import quiet as quiet_progress

    return quiet_progress() if quiet else contextlib.nullcontext()


def run_record(args, inputs):
    """What is needed to reproduce a run: version, command line, settings, input files
    (path, size, sha256), seed, draws/chains, platform."""
    import platform

    import pm_perm
    from pm_perm._io import file_record

    nuts = getattr(args, "fit", None) == "nuts"
    settings = {k: v for k, v in vars(args).items() if k not in ("func",)}
    return {
        "pm_perm_version": pm_perm.__version__,
        "argv": list(sys.argv),
        "settings": settings,
        "seed": args.seed,
        "draws": args.draws if nuts else None,
        "tune": args.tune if nuts else None,
        "chains": args.chains if nuts else None,
        "inputs": [file_record(f) for f in inputs],
        "python": platform.python_version(),
        "versions": library_versions(),
    }


def library_versions():
    """Installed versions of the numerical libraries a result depends on (None if absent)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("numpy", "scipy", "pymc", "pytensor", "numba", "arviz"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def write_json_result(command, path, result, failed, *, overwrite):
    """Write ``result`` as strict JSON to ``path`` (atomically; ``-`` is the standard output;
    an existing file only with ``overwrite``, checked in the same step as the write); the
    outputs that already failed are recorded in it (``output_errors``), and each non-finite
    number replaced by null is added to its ``warnings`` and printed. Raises what the write
    raises."""
    from pm_perm._io import to_strict_json, write_text

    if failed:
        result["output_errors"] = list(failed)
    data, notes = to_strict_json(result)
    data["warnings"] = data.get("warnings", []) + notes
    for w in notes:
        print(f"pm-perm {command}: warning: {w}", file=sys.stderr)
    write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n", overwrite=overwrite)


def finish_outputs(command, failed):
    """Print each output that could not be written; the exit status (1 if any, else 0)."""
    for msg in failed:
        print(f"pm-perm {command}: error: could not write {msg}", file=sys.stderr)
    return EXIT_OUTPUT_FAILED if failed else EXIT_OK
