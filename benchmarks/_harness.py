"""The harness of the benchmark scripts: timing, fresh child processes, and output files.

Run the scripts as ``python benchmarks/<name>.py`` from the repository root (they import this
module as ``_harness``). Timings: :func:`best_time` (best of repeats after a warm-up), :func:`clock`
(wall and CPU now), :func:`run_child` (a measurement in a fresh process). Outputs: a benchmark
runs for minutes to hours, so a wrong output path found at its end would lose the run, and a file
written in place is left half written by an interrupt. :func:`check_output` checks a path right
after the arguments are parsed (``pm_perm._io.check_output_option``: never an input file), and
:func:`write_result` writes through ``pm_perm._io`` (the old file or the complete new one).
pm_perm is imported only when an output helper runs, so that the timing helpers add nothing to
what a measured child process imports.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

__all__ = ["best_time", "check_output", "clock", "mq2008_inputs", "run_child", "write_result"]


def best_time(fn, repeats, timer=time.perf_counter):
    """Best time in seconds of ``repeats`` calls of ``fn()``, after one warm-up call
    (compilation, caches): wall time, or CPU time with ``timer=time.process_time`` (on a loaded
    machine a call longer than a scheduler slice includes in its wall time the time other
    processes ran)."""
    fn()
    best = math.inf
    for _ in range(repeats):
        t = timer()
        fn()
        best = min(best, timer() - t)
    return best


def clock():
    """``(wall, cpu)`` seconds now: ``time.perf_counter()`` and the process's user + system CPU
    time (``os.times()``; the difference of two calls is what a step cost)."""
    t = os.times()
    return time.perf_counter(), t.user + t.system


def run_child(script, args, env):
    """Run ``python script *args`` in a fresh process with ``env`` and return the JSON of the last
    stdout line starting ``RESULT `` (the child prints ``"RESULT " + json.dumps(...)``); a failed
    child raises ``RuntimeError`` with the end of its stderr."""
    proc = subprocess.run([sys.executable, script, *args], env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def check_output(parser, option, path, inputs=()):
    """``pm_perm._io.check_output_option``: create the missing folders of ``path``; exit with
    status 2 and one line naming ``option`` if ``path`` is a folder or one of ``inputs``."""
    from pm_perm._io import check_output_option

    return check_output_option(parser, option, path, inputs)


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
    from pm_perm._io import write_json

    for problem in write_json(path, obj):
        if (str(path), problem) not in _REPORTED:
            _REPORTED.add((str(path), problem))
            print(f"warning: {path}: {problem}")
