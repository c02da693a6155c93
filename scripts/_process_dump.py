"""The per-process result file of the profiling plugins (``cpu_by_test``, ``rewrite_time``,
``numba_compile_profile``): one JSON file per pytest process, written when it exits.

No pm_perm import at load time: a plugin loads before the tests and must not import pm_perm (nor
count what that import may compile); the writer imports it when it runs, at exit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def dump_at_exit(plugin: str, env_var: str, data) -> None:
    """Write ``data`` to ``$env_var/<pid>.json`` (default ``outputs/<plugin>``) atomically, as
    strict JSON; each warning about it goes to stderr, naming the plugin."""
    from pm_perm._io import write_json

    out = Path(os.environ.get(env_var, f"outputs/{plugin}"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{os.getpid()}.json"
    for problem in write_json(path, data):  # atomically: a reader never sees half a file
        print(f"{plugin}: warning: {path}: {problem}", file=sys.stderr)
