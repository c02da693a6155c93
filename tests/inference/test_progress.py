"""Progress of long fits (issue 50, item 4): shown on a terminal, never when piped or quiet.

A terminal is a pseudo-terminal (``pty.openpty``) standing in for the standard error of the
process: the fits run in this process with ``sys.stderr`` replaced by its slave end, and what
they wrote is read back from the master end.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import sys

import numpy as np
import pymc as pm
import pytest

from pm_perm import _progress
from pm_perm.inference import CompiledMAP
from pm_perm.inference.laplace import negative_hessian


def _drain(fd):
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the slave end is closed and everything was read
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


@contextlib.contextmanager
def stderr_on(kind, monkeypatch):
    """``sys.stderr`` replaced by a pseudo-terminal (``kind="tty"``) or a pipe (``"pipe"``);
    yields a list that receives what was written."""
    read_fd, write_fd = pty.openpty() if kind == "tty" else os.pipe()
    stream = os.fdopen(write_fd, "w")
    assert stream.isatty() == (kind == "tty")
    written = []
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        yield written
    finally:
        stream.flush()
        written.append(_drain(read_fd))
        stream.close()
        os.close(read_fd)


def _model():
    y = np.random.default_rng(0).normal(1.0, 2.0, size=50)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0, shape=3)
        pm.Normal("y", mu.sum(), 2.0, observed=y)
    return model


@pytest.mark.parametrize("kind", ["tty", "pipe"])
def test_map_fit_shows_progress_on_a_terminal_only(kind, monkeypatch):
    engine = CompiledMAP(_model())
    with stderr_on(kind, monkeypatch) as written:
        engine.fit(seed=1)
    text = written[0]
    if kind == "pipe":
        assert text == ""
        return
    assert "MAP (L-BFGS-B)" in text and "iteration" in text and "-log p" in text
    assert "elapsed" in text and text.startswith("\r") and text.endswith("\n")


def test_quiet_silences_a_terminal(monkeypatch):
    engine = CompiledMAP(_model())
    with stderr_on("tty", monkeypatch) as written, _progress.quiet():
        engine.fit(seed=1)
    assert written[0] == ""


def test_hessian_progress_counts_coordinates_and_estimates_the_time_left(monkeypatch):
    with stderr_on("tty", monkeypatch) as written, _progress.stage("tau = 0.5 (2 of 8)"):
        monkeypatch.setattr(_progress, "INTERVAL", 0.0)  # every update printed
        H = negative_hessian(lambda x: -2 * x, np.ones(3))
    np.testing.assert_allclose(H, 2 * np.eye(3))
    text = written[0]
    assert "tau = 0.5 (2 of 8): Laplace Hessian (coordinates) | 1/3, about" in text
    assert "3/3" in text and "left" in text


def test_updates_are_throttled_to_one_line_rewritten_in_place():
    read_fd, write_fd = pty.openpty()
    stream = os.fdopen(write_fd, "w")
    with _progress.Progress("work", total=1000, stream=stream, interval=3600) as p:
        for k in range(1000):
            p.update(k + 1)
    stream.close()
    text = _drain(read_fd).replace("\r\n", "\n")  # the terminal writes a newline as \r\n
    os.close(read_fd)
    # the first update, then (throttled) only the last one when closing: two rewrites, one line
    assert text.count("\r") == 2 and text.count("\n") == 1, repr(text)
    assert "work | 1/1000" in text and "work | 1000/1000" in text


def test_a_stream_without_isatty_or_closed_shows_nothing():
    class NoTTY:
        def write(self, s):
            raise AssertionError("written")

    assert not _progress.enabled(NoTTY())
    read_fd, write_fd = pty.openpty()
    stream = os.fdopen(write_fd, "w")
    stream.close()
    os.close(read_fd)
    assert not _progress.enabled(stream)
    _progress.Progress("x", stream=NoTTY()).update(1)  # never writes


def test_format_seconds():
    assert _progress.format_seconds(3.21) == "3.2 s"
    assert _progress.format_seconds(42) == "42 s"
    assert _progress.format_seconds(185) == "3 min 05 s"
    assert _progress.format_seconds(3725) == "1 h 02 min"
