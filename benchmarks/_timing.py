"""Timing helper shared by the benchmark scripts (run them as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import math
import os
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
