"""Timing helper shared by the benchmark scripts (run them as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import math
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
