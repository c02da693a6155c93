"""``pm.sample`` with its outcome checked: interrupted or incomplete runs report nothing."""

from __future__ import annotations

import pymc as pm

from pm_perm.inference.checks import SamplingInterrupted, check_draws

__all__ = ["checked_sample"]


def checked_sample(model, *, var="theta", **kwargs):
    """``pm.sample`` on ``model`` whose draws are checked; returns ``(idata, diagnostics)``.

    Parameters
    ----------
    model : pymc.Model
    var : str
        The variable whose draws are checked and summarised.
    **kwargs
        To ``pm.sample`` (``draws``, ``tune``, ``chains``, ``random_seed``, ``callback``, ...).
        Without ``nuts_sampler`` (or with ``"pymc"``) PyMC's own NUTS runs (this function passes
        ``pm.sample`` a callback, which keeps it from switching to nutpie); ``nuts_sampler=
        "nutpie"`` (or a JAX sampler) runs that sampler, and then a ``callback`` is refused by
        ``pm.sample``.

    Returns
    -------
    idata : DataTree
    diagnostics : dict
        ``"divergences"`` (int), ``"max_r_hat"`` (float, None with one chain), ``"chains"``,
        ``"draws"`` (per chain).

    Raises
    ------
    SamplingInterrupted
        Ctrl-C (or a ``KeyboardInterrupt`` from the callback) during sampling: PyMC stops and
        would return the draws so far, padded or truncated; they are discarded, nothing is
        returned (a ``KeyboardInterrupt``, so an interactive session stops as expected).
    SamplingError
        Fewer draws than requested, or non-finite draws of ``var``.
    """
    import signal
    import threading

    interrupted = []
    user_callback = kwargs.pop("callback", None)

    def callback(trace, draw):
        if user_callback is not None:
            try:
                user_callback(trace=trace, draw=draw)
            except KeyboardInterrupt:
                interrupted.append("callback")
                raise

    previous = None
    if threading.current_thread() is threading.main_thread():
        default = signal.getsignal(signal.SIGINT)

        def on_sigint(signum, frame):
            interrupted.append("SIGINT")
            if callable(default):
                default(signum, frame)
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, on_sigint)
    if user_callback is None and kwargs.get("nuts_sampler") not in (None, "pymc"):
        callback = None  # nutpie / JAX samplers take no callback (Ctrl-C: the SIGINT handler)
    try:
        with model:
            idata = pm.sample(callback=callback, **kwargs)
    except KeyboardInterrupt:
        interrupted.append("raised")
    except Exception:
        if not interrupted:  # e.g. PyMC's "Not enough samples" after an interrupt in tuning
            raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise SamplingInterrupted(
            "sampling was interrupted (Ctrl-C); the draws so far were discarded and the model "
            "was left as it was before the call"
        )
    return idata, check_draws(idata, var, chains=kwargs.get("chains"),
                              draws=kwargs.get("draws", 1000))
