"""The Plackett-Luce start of :func:`pm_perm.preferences.fitting.fit_map_cv`'s final fit
(``final_start="plackett-luce"``, PL-anchored models; private to that module)."""

from __future__ import annotations

import numpy as np

from pm_perm._progress import stage

#: The values of ``fit_map_cv``'s ``final_start``.
FINAL_STARTS = (None, "plackett-luce")


def check_final_start(final_start, rm):
    """Raise unless ``final_start`` is None, or ``"plackett-luce"`` for a PL-anchored model."""
    if final_start is None or (final_start == "plackett-luce" and rm.family == "pl-anchored"):
        return
    if final_start == "plackett-luce":
        raise ValueError(f"final_start='plackett-luce' needs a PL-anchored model "
                         f"(pl_anchored_model(data, tau=0.0)); got a {rm.family} model: leave "
                         f"final_start=None")
    raise ValueError(f"final_start must be one of {FINAL_STARTS}; got {final_start!r}")


def final_from_plackett_luce(engine, rm, base, counts, point, tau, *, seed, n_starts, maxiter):
    """The final point at ``tau`` from the Plackett-Luce MAP of the model's ballots (``base``'s
    orders with ``counts``; the deviations at 0): at ``tau = 0`` that MAP itself (the model is
    Plackett-Luce there: evaluated, not refitted), at ``tau > 0`` the higher MAP of the fit from
    it and ``point`` (the scan's fit, at ``engine.x``). ``engine.x`` is left at the point
    returned (an engine fit's dict, with ``"_info"``)."""
    from pymc.blocking import DictToArrayBijection

    from pm_perm.preferences.fitting import _best_start, _map_engine, set_counts
    from pm_perm.preferences.models import plackett_luce_model

    pl = plackett_luce_model(base, prior_sigma=_prior_sigma(rm))
    if not np.array_equal(counts, base.counts):
        pl = set_counts(pl, counts)
    pl_engine = _map_engine(pl, engine.options["maxcor"])
    with stage("the Plackett-Luce MAP (the final fit's start)"):
        _best_start(pl_engine, pl, seed, n_starts, maxiter)
    start = {k: np.zeros_like(v) for k, v in engine.unravel().items()}
    start.update({k: v for k, v in pl_engine.unravel().items() if k in start})
    x0 = DictToArrayBijection.map(start).data
    if tau == 0.0:  # an infinite gradient tolerance: L-BFGS-B stops at x0 before any step
        options, engine.options = engine.options, {**engine.options, "gtol": np.inf}
        try:
            return engine.fit(start=x0, what="the Plackett-Luce MAP at tau = 0")
        finally:
            engine.options = options
    x = engine.x.copy()
    other = engine.fit(start=x0, maxiter=maxiter,
                       what=f"the MAP fit at tau = {tau:g} from the Plackett-Luce MAP")
    if other["_info"]["log_posterior"] > point["_info"]["log_posterior"]:
        return other
    engine.x = x
    return point


def _prior_sigma(rm):
    """The prior scale of ``u_raw`` (``Normal(0, prior_sigma)``) in ``rm``'s model."""
    sigma = np.unique(rm.model["u_raw"].owner.inputs[-1].eval())
    if sigma.size != 1:
        raise ValueError(f"the prior scale of u_raw is not one number: {sigma}")
    return float(sigma[0])
