"""Progress of long fits on a terminal: one line on the standard error, rewritten in place.

Every fit that can take more than a few seconds (:class:`~pm_perm.inference.CompiledMAP`'s
L-BFGS-B, the multi-start and type-II fits and the Laplace Hessian of
:mod:`pm_perm.preferences.fitting`, NUTS's progress bar) reports through :class:`Progress`,
which writes only when the standard error is a terminal (``sys.stderr.isatty()``: never into a
pipe, a file or a test's captured output) and not inside :func:`quiet` (the CLI's
``--quiet``). Updates are throttled (at most one per ``interval`` seconds, default 0.25) and
rewrite one line (``\\r``); :meth:`Progress.close` ends it with a newline. What is running
around a fit (e.g. "tau = 0.25 (3 of 8)") is named by :func:`stage` and prefixes the line.
"""

from __future__ import annotations

import contextlib
import sys
import time

__all__ = ["Progress", "enabled", "format_seconds", "is_quiet", "quiet", "stage"]

#: least number of seconds between two printed updates of a :class:`Progress` (its default)
INTERVAL = 0.25
_QUIET = [0]  # depth of nested quiet() blocks
_STAGES = []  # the names of the stages around the current fit, outermost first


@contextlib.contextmanager
def quiet():
    """Inside this block no progress is shown (nestable)."""
    _QUIET[0] += 1
    try:
        yield
    finally:
        _QUIET[0] -= 1


def is_quiet():
    """True inside :func:`quiet`."""
    return _QUIET[0] > 0


@contextlib.contextmanager
def stage(name):
    """Inside this block progress lines start with ``name`` (after the enclosing stages')."""
    _STAGES.append(str(name))
    try:
        yield
    finally:
        _STAGES.pop()


def enabled(stream=None):
    """True when progress is shown on ``stream`` (default ``sys.stderr``): a terminal, and not
    inside :func:`quiet`."""
    stream = sys.stderr if stream is None else stream
    if _QUIET[0]:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def format_seconds(s):
    """``"42 s"``, ``"3 min 05 s"`` or ``"1 h 02 min"``."""
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class Progress:
    """One progress line of a task: ``update`` rewrites it (throttled), ``close`` ends it.

    Parameters
    ----------
    label : str
        What runs (e.g. "MAP"); the enclosing :func:`stage` names come first.
    total : int, optional
        Number of steps, when known in advance: each line then shows ``done/total`` and an
        estimate of the remaining time (elapsed time per step so far times the steps left).
    stream : file, optional
        Default ``sys.stderr`` (read when the progress starts).
    interval : float, optional
        Least number of seconds between two printed updates (default :data:`INTERVAL`).

    Notes
    -----
    When progress is not :func:`enabled` on the stream, nothing is ever written and
    ``update`` costs a comparison. Also a context manager (closing on exit).
    """

    def __init__(self, label, *, total=None, stream=None, interval=None):
        self.stream = sys.stderr if stream is None else stream
        self.active = enabled(self.stream)
        self.label = ": ".join([*_STAGES, str(label)])
        self.total = total
        self.interval = float(INTERVAL if interval is None else interval)
        self.t0 = time.perf_counter()
        self._last, self._width, self._pending = -float("inf"), 0, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def elapsed(self):
        """Seconds since the progress started."""
        return time.perf_counter() - self.t0

    def update(self, done=None, text="", *, force=False):
        """Show ``done`` steps (of ``total``) and ``text``; printed at most once per
        ``interval`` unless ``force``."""
        if not self.active:
            return
        self._pending = (done, text)
        now = time.perf_counter()
        if force or now - self._last >= self.interval:
            self._print(now)

    def _print(self, now):
        done, text = self._pending
        self._pending = None
        elapsed = now - self.t0
        parts = [self.label]
        if done is not None and self.total:
            left = ""
            if 0 < done < self.total:
                left = f", about {format_seconds(elapsed / done * (self.total - done))} left"
            parts.append(f"{done}/{self.total}{left}")
        elif done is not None:
            parts.append(str(done))
        if text:
            parts.append(text)
        parts.append(f"{format_seconds(elapsed)} elapsed")
        line = " | ".join(parts)
        pad = " " * max(0, self._width - len(line))
        self.stream.write("\r" + line + pad)
        self.stream.flush()
        self._width, self._last = len(line), now

    def close(self):
        """Print the last update (if it was throttled) and end the line."""
        if not self.active:
            return
        if self._pending is not None:
            self._print(time.perf_counter())
        if self._width:
            self.stream.write("\n")
            self.stream.flush()
        self.active = False
