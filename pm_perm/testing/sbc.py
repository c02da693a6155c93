"""Simulation-based calibration (Talts et al. 2018) of any PyMC model.

Draw the parameters from the prior, data from the model given them, fit the model to those data,
and record the rank of each true parameter among ``n_thin`` thinned posterior draws. If the
likelihood, its gradient and the sampler are right, every rank is uniform on ``0..n_thin``;
:func:`uniformity_pvalue` tests that with a chi-square over equal-width bins, and
:func:`plot_rank_histograms` shows it. The model is built (and, with nutpie, compiled) once and
given each replication's data through a ``pm.Data`` container.

A discrete parameter (an integer, such as a latent ranking's entries) ties with its draws: its
rank is the number of draws below the true value plus a uniform share of the ties (randomised
tie-breaking, Talts et al. 2018, section 4.1), which is again uniform on ``0..n_thin`` when the
posterior is right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = ["SBCModel", "plot_rank_histograms", "run_sbc", "uniformity_pvalue"]


@dataclass(frozen=True)
class SBCModel:
    """One simulation-based calibration problem: the prior, the simulator and the model.

    Parameters
    ----------
    shapes : dict of str to tuple
        The shape of each calibrated parameter, by its name in the model (order kept: the
        simulator takes the parameters in this order).
    priors : dict of str to callable
        ``priors[name](rng)`` draws the parameter ``name`` from its prior (a NumPy
        ``Generator``); the same prior as the model's.
    build : callable
        ``build(data)`` returns the ``pm.Model``, its observed data in a ``pm.Data`` container
        named ``data_name``. Called once, with the first replication's data.
    simulate : callable
        ``simulate(*params)`` returns a PyMC distribution (``X.dist(...)``) of the data given
        symbolic parameters (compiled once); or, with ``numpy_simulator=True``,
        ``simulate(*values, rng=rng)`` returns a data set (NumPy).
    numpy_simulator : bool, default False
        ``simulate`` is a NumPy simulator.
    data_name : str, default "y_obs"
        The name of the ``pm.Data`` container of the data.

    Examples
    --------
    A Normal mean with known noise: :func:`run_sbc`'s example.
    """

    shapes: Mapping[str, tuple]
    priors: Mapping[str, Callable]
    build: Callable
    simulate: Callable
    numpy_simulator: bool = False
    data_name: str = "y_obs"
    _sizes: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if set(self.priors) != set(self.shapes):
            raise ValueError(f"priors {sorted(self.priors)} and shapes {sorted(self.shapes)} "
                             "must name the same parameters")
        object.__setattr__(self, "_sizes",
                           {k: int(np.prod(s, dtype=np.int64)) for k, s in self.shapes.items()})


def _data_simulator(spec, seed):
    """``draw(*values)``: one data set given parameter values."""
    if spec.numpy_simulator:
        sim_rng = np.random.default_rng(seed + 1)
        return lambda *values: spec.simulate(*values, rng=sim_rng)
    import pymc as pm
    import pytensor.tensor as pt

    syms = [pt.tensor(k, shape=s, dtype="float64") for k, s in spec.shapes.items()]
    return pm.pytensorf.compile(syms, spec.simulate(*syms), random_seed=seed)


def _posterior_sampler(spec, model, sampler, draws, tune, chains):
    """``fit(y, seed)``: ``{name: (n_draws, size)}`` posterior draws given data ``y``."""
    def flat(get):
        return {k: np.asarray(get(k)).reshape(-1, n) for k, n in spec._sizes.items()}

    if callable(sampler):
        return lambda y, seed: flat(sampler(model, y, np.random.default_rng(seed)).__getitem__)
    if sampler == "nutpie":
        import nutpie

        compiled = nutpie.compile_pymc_model(model)

        def fit(y, seed):
            post = nutpie.sample(compiled.with_data(**{spec.data_name: y}), draws=draws,
                                 tune=tune, chains=chains, seed=seed, progress_bar=False)
            return flat(lambda k: post.posterior[k].values)
        return fit
    if sampler == "pymc":
        import pymc as pm

        def fit(y, seed):
            with model:
                pm.set_data({spec.data_name: y})
                post = pm.sample(draws=draws, tune=tune, chains=chains, cores=1, random_seed=seed,
                                 progressbar=False, compute_convergence_checks=False)
            return flat(lambda k: post.posterior[k].values)
        return fit
    raise ValueError(f"sampler must be 'nutpie', 'pymc' or a callable; got {sampler!r}")


def run_sbc(spec, reps, *, n_thin=99, draws=500, tune=500, chains=2, sampler="nutpie", seed=0,
            rng=None, progress=None):
    """Run ``reps`` SBC replications of ``spec``; the rank of each true parameter entry.

    Parameters
    ----------
    spec : SBCModel
        The prior, simulator and model.
    reps : int
        Number of replications.
    n_thin : int, default 99
        Posterior draws the ranks are taken among (evenly spaced over all draws, so that they
        are nearly independent): ranks are in ``0..n_thin``.
    draws, tune, chains : int
        Draws and tuning steps per chain, and chains, of ``"nutpie"`` and ``"pymc"``.
    sampler : {"nutpie", "pymc"} or callable, default "nutpie"
        ``"nutpie"``: the model compiled once by nutpie, new data by ``with_data``; ``"pymc"``:
        ``pm.set_data`` and ``pm.sample`` (the model's default step methods); a callable
        ``sampler(model, data, rng)`` returns ``{name: draws}``, draws along the first axis (e.g.
        an exact posterior sampler, to check a simulator and prior).
    seed : int, default 0
        Seeds the data simulator (and ``rng`` if not given).
    rng : numpy.random.Generator, optional
        Draws the parameters and the samplers' seeds; default ``default_rng(seed)``.
    progress : callable, optional
        Called as ``progress(done, reps)`` after each replication.

    Returns
    -------
    dict of str to list of int
        ``ranks["name[i]"]``: the rank of entry ``i`` (C order) of parameter ``name`` in each
        replication, the number of thinned posterior draws below the true value; draws equal to
        it (a discrete parameter) add a uniform count from ``0`` to their number (drawn from a
        generator of its own, seeded by ``seed``, so that continuous parameters' ranks do not
        depend on it).

    Examples
    --------
    A Normal mean with known noise (10 observations), its exact (conjugate) posterior as the
    sampler; a real check passes ``sampler="nutpie"`` or ``"pymc"``:

    >>> import pymc as pm
    >>> def build(y):
    ...     with pm.Model() as model:
    ...         mu = pm.Normal("mu", 0.0, 1.0)
    ...         pm.Normal("y", mu, 1.0, observed=pm.Data("y_obs", y))
    ...     return model
    >>> spec = SBCModel(shapes={"mu": ()}, priors={"mu": lambda rng: rng.normal()}, build=build,
    ...                 simulate=lambda mu: pm.Normal.dist(mu, 1.0, shape=10))
    >>> def exact(model, y, rng):  # mu | y ~ N(sum y / 11, 1 / 11)
    ...     return {"mu": rng.normal(y.sum() / 11, 11 ** -0.5, size=500)}
    >>> ranks = run_sbc(spec, reps=50, sampler=exact, seed=1)
    >>> len(ranks["mu[0]"]), min(ranks["mu[0]"]) >= 0, max(ranks["mu[0]"]) <= 99
    (50, True, True)
    """
    rng = np.random.default_rng(seed) if rng is None else rng
    draw_y = _data_simulator(spec, seed)
    first = {k: spec.priors[k](rng) for k in spec.shapes}
    model = spec.build(draw_y(*first.values()))
    fit = _posterior_sampler(spec, model, sampler, draws, tune, chains)
    ranks = {f"{k}[{i}]": [] for k, n in spec._sizes.items() for i in range(n)}
    tie_rng = np.random.default_rng([seed, 7])  # randomised tie-breaking of discrete ranks
    for r in range(reps):
        true = {k: spec.priors[k](rng) for k in spec.shapes}
        post = fit(draw_y(*true.values()), int(rng.integers(2**31)))
        for k, values in post.items():
            if values.shape[0] < n_thin:
                raise ValueError(f"{values.shape[0]} posterior draws of {k}; n_thin = {n_thin}")
            idx = np.linspace(0, values.shape[0] - 1, n_thin).astype(int)  # thin
            for i, t in enumerate(np.ravel(true[k])):
                ties = int((values[idx, i] == t).sum())
                below = int((values[idx, i] < t).sum())
                ranks[f"{k}[{i}]"].append(below + (int(tie_rng.integers(ties + 1)) if ties
                                                   else 0))
        if progress is not None:
            progress(r + 1, reps)
    return ranks


def uniformity_pvalue(ranks, n_thin=99, bins=10):
    """Chi-square test that ranks in ``0..n_thin`` are uniform, over ``bins`` equal-width bins.

    Parameters
    ----------
    ranks : array_like
        Ranks of one parameter (:func:`run_sbc`).
    n_thin : int, default 99
        The largest possible rank; ``n_thin + 1`` should be a multiple of ``bins`` (equal bins).
    bins : int, default 10
        Number of bins; the expected count per bin should be about 5 or more.

    Returns
    -------
    p_value : float
        Under uniform ranks, ``p < alpha`` with probability about ``alpha``.
    counts : list of int
        The ranks per bin.

    Examples
    --------
    >>> p, counts = uniformity_pvalue(np.arange(100), n_thin=99, bins=5)
    >>> round(p, 6), counts
    (1.0, [20, 20, 20, 20, 20])
    """
    counts, _ = np.histogram(ranks, bins=bins, range=(-0.5, n_thin + 0.5))
    return float(stats.chisquare(counts).pvalue), counts.tolist()


def plot_rank_histograms(ranks, *, n_thin=99, bins=10, title=None, axes=None):
    """Rank histograms of :func:`run_sbc`'s ranks, one panel per parameter entry.

    Each panel: the counts per bin, the expected count (line) and the 99 % binomial interval of
    one bin's count under uniform ranks (band); its title gives :func:`uniformity_pvalue`.

    Parameters
    ----------
    ranks : dict of str to list of int
        :func:`run_sbc`'s result.
    n_thin, bins : int
        As in :func:`uniformity_pvalue`.
    title : str, optional
        The figure's title.
    axes : sequence of matplotlib Axes, optional
        One per parameter entry; default a new figure with one row of panels.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if axes is None:
        fig, grid = plt.subplots(1, len(ranks), figsize=(2.6 * len(ranks), 2.4), squeeze=False)
        axes = grid[0]
    fig = axes[0].figure
    for ax, (param, rk) in zip(axes, ranks.items(), strict=True):
        pval, counts = uniformity_pvalue(rk, n_thin=n_thin, bins=bins)
        ax.bar(range(bins), counts, color="0.6")
        ax.axhline(len(rk) / bins, color="C3")
        lo, hi = stats.binom.ppf([0.005, 0.995], len(rk), 1 / bins)
        ax.axhspan(lo, hi, color="C3", alpha=0.15)
        ax.set_title(f"{param}\np = {pval:.2f}", fontsize=8)
        ax.set_xticks([])
    if title is not None:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
