"""Timing helpers shared by the benchmark scripts (run them as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time


def best_time(fn, repeats):
    """Best wall time in seconds of ``repeats`` calls of ``fn()``, after one warm-up call
    (compilation, caches)."""
    fn()
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
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
