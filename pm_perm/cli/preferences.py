"""``pm-perm preferences``: fit a model of ranking data (PrefLib file), report held-out fit.

Examples
--------
::

    pm-perm preferences ED-00028-00000001.soi --model full --fit map --json apa.json
    pm-perm preferences meath.soi --model rank-one --components 3 --heldout-fraction 0.2 \\
        --json meath.json --plots meath_plots
    pm-perm preferences ballots.soi --model plackett-luce --fit nuts --chains 4 --json pl.json

The ballots are split at random (``--seed``) into a held-out share ``--heldout-fraction`` of the
BALLOTS and a training share; the model (:mod:`pm_perm.preferences.models`) is fitted to the
training ballots by MAP or NUTS. Reported log-likelihoods are natural logs per ballot of the
observed (partial) orders, the ballot length not included: under MAP the plug-in
``log p(order | MAP)``; under NUTS the log posterior predictive density
``log mean_draws p(order | draw)`` (over at most ``--max-loglik-draws`` draws). The consensus
is the most probable complete order of each draw (:func:`pm_perm.preferences.analysis.
consensus_posterior`); under MAP there is one draw, so its "posterior probability" is 1 and
says nothing about uncertainty: use ``--fit nuts`` for that.

Which model ``--model full`` fits (issue 53): with one component (``--components 1``, the
default) on complete or top-k ballots (no tie before a ballot's end), the PL-anchored model
:func:`pm_perm.preferences.anchored.pl_anchored_model`,
``p(pi) ∝ PL(pi; u) exp(sum_i D[i, pi(i)])`` with ``D`` zero-sum of scale ``tau``. ``tau = 0``
is Plackett-Luce exactly and ``tau`` is chosen by the Laplace evidence
(:func:`pm_perm.preferences.fitting.fit_map_type2`; the diagnostics hold the evidence of each
scale), so on small data the model stays within noise of Plackett-Luce and on large data it
departs where the data support it (``docs/benchmarks.md``, "Small data, V3"). Under
``--fit nuts`` ``tau`` is fixed at that type-II value (empirical Bayes: the model's ``tau`` is a
fixed container, and a ``HalfNormal`` scale that can reach 0 puts NUTS in a funnel) and NUTS
integrates ``u`` and ``D``. The JSON's ``variant`` and ``family`` (``"pl-anchored"``) say which
model ran; its ``logits`` are then ``null``: ``utilities`` (u) and ``deviations`` (D, items x
positions) take their place. Otherwise (``--components`` > 1, or ties before a ballot's end)
the older full model runs: item x position logits shrunk toward rank one (its MAP chooses
``tau`` by the Laplace evidence, NUTS integrates it).

Which model ``--model rank-one`` fits: by MAP with one component on complete or top-k ballots,
the PL-anchored rank-one tilt (``pl_anchored_model(data, deviations="rank-one")``,
``D = tau (B a)(B b)^T``) with ``tau`` chosen by 5-fold cross-validation on the training ballots
and the one-standard-error rule, the final fit started from the Plackett-Luce MAP (at
``tau = 0`` it is that MAP; :func:`pm_perm.preferences.fitting.fit_map_cv` with
``final_start="plackett-luce"``; the diagnostics hold ``cv_loglik`` and ``cv_se`` of each scale):
the Laplace evidence chose ``tau > 0`` on small Plackett-Luce data and lost
(``docs/benchmarks.md``, "Small data, V4"); so started, the cross-validated fit met the
small-data criterion ("Small data, V5 and V6"). Otherwise (``--components`` > 1, ties before a
ballot's end, ``--learn-positions``, or ``--fit nuts``, under which the bilinear tilt did not
mix: max r_hat 1.14, 2 chains x 300 draws) the older rank-one logits ``u c^T`` (its MAP chooses
the position profile by the evidence, between Plackett-Luce's first-order (harmonic) profile
and the linear one, ``position_mix`` 0 to 1, unless ``--learn-positions``). The older models
can lose to Plackett-Luce on small data; the JSON's ``notes`` say which model ran and why.

Comparison (:func:`compare_models`): unless the model is one-population Plackett-Luce, the
chosen model is scored against Plackett-Luce on the held-out ballots (or, without held-out
ballots and for at most ``CHECK_MAX_BALLOTS`` ballots, by ``CV_FOLDS``-fold cross-validation),
and a warning says when it loses by more than noise (2 standard errors of the per-ballot
difference): richer models can lose on small data. ``--compare`` adds rank-one, full and top-k
(those that apply to the data) and prints which model wins.

``--model top-k`` (:func:`pm_perm.preferences.models.top_k_model`): the exact top-k model for
any number of items, ballots of at most K = ``--top-k`` ranked items (default the longest ballot
in the file); its logits are M x (K + 1), the last column "not in the top K". Its MAP chooses
``tau`` by the Laplace evidence as the full model's does. ``--model full`` and ``rank-one``
stop beyond ``EXACT_MAX_M`` = 26 items with a message naming ``--model plackett-luce`` and
``--model top-k``.

JSON: ``model`` (the ``--model`` given), ``variant`` (the model that ran, in words), ``family``,
``notes``, ``components``, ``fit``, ``n_items``, ``n_rankings``, ``items``,
``train`` / ``heldout`` (``loglik_per_ranking``, ``n_rankings``, ``n_distinct``), ``logits``
(the fitted item x position matrix, rows = items in file order, columns = positions first to
last, for top-k the K positions and "not in the top K": MAP, or posterior mean under NUTS;
``null`` for Plackett-Luce, which has ``utilities`` instead, and for mixtures, whose ``blocs``
list each component's weight, logits and consensus),
``consensus`` (item names first to last; top-k: the K first), ``consensus_posterior``,
``position_marginals`` (M x M; top-k M x (K + 1)), ``top_k`` (top-k only: K),
``diagnostics``, ``comparison`` (:func:`compare_models`; ``null`` when not run), ``sampler``,
``timings``, ``warnings`` (sampler, numerical and JSON
warnings), ``output_errors`` (only when an output could not be written) and ``run``, what is
needed to reproduce the run, as for ``pm-perm learn-to-rank``
(:func:`pm_perm.cli.learning_to_rank.run_record`: version, argv, settings, seed, draws/tune/chains,
the input's path, size and sha256, library versions).

Outputs follow :mod:`pm_perm._io`: every output path (``--json`` and the ``--plots`` files) is
checked before the data is read; the input is never overwritten (not even with
``--overwrite``); an existing output needs ``--overwrite`` (checked again, in the same step, when
it is written: of two runs writing the same new file, one is refused); files are written
atomically, each on its own (one that fails does not stop the others); a device or FIFO
(``--json /dev/null``) is written directly, never replaced; ``--json -`` writes the JSON to the
standard output, and the summary then goes to the standard error; the JSON is strict (a
non-finite number becomes ``null`` and a warning).

Exit status: 0 success; 1 an output could not be written (the others were; the JSON lists the
failures in ``output_errors``); 2 bad input or output path (nothing fitted or written); 3 the
fit failed (MAP did not converge, NUTS returned incomplete or non-finite draws, a non-finite
log-likelihood; nothing written); 130 interrupted (Ctrl-C; nothing written). Settings out of
range (``--prior-sigma`` not positive and finite, ``--target-accept`` outside (0, 1), a negative
``--seed`` or ``--tune``, ``--draws`` or ``--chains`` below 1) are refused when the command line
is parsed (exit 2, before the data is read).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

from pm_perm.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FIT_FAILED,
    EXIT_INTERRUPTED,
    FRACTION,
    NON_NEGATIVE_INT,
    OPEN_UNIT_FLOAT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    STDOUT_HELP,
    finish_outputs,
    progress_context,
    run_record,
    stdout_for_results,
    write_json_result,
)
from pm_perm.cli.common import status as _status
from pm_perm.cli.preferences_models import (
    ANCHORED,
    MODELS,
    _build,
    _family,
    _map_fitter,
    _variant,
)

__all__ = ["add_parser", "run_rankings"]

def add_parser(subparsers):
    """Register the ``preferences`` subcommand on an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser("preferences",
                              help="Bayesian analysis of ranking data (PrefLib files)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("data_file", metavar="DATA_FILE", help="PrefLib .soc/.soi/.toc/.toi file")
    model = p.add_argument_group("model")
    model.add_argument("--model", choices=tuple(MODELS), default="full")
    model.add_argument("--components", type=POSITIVE_INT, default=1, metavar="K",
                       help="mixture components (voting blocs); default 1")
    model.add_argument("--prior-sigma", type=POSITIVE_FLOAT, default=3.0,
                       help="prior scale of the item utilities (default 3)")
    model.add_argument("--learn-positions", action="store_true",
                       help="rank-one model: learn the decreasing position profile c")
    model.add_argument("--top-k", type=POSITIVE_INT, default=None, metavar="K",
                       help="top-k model: positions modelled (default the longest ballot)")
    fit = p.add_argument_group("fit")
    fit.add_argument("--fit", choices=("map", "nuts"), default="map")
    fit.add_argument("--heldout-fraction", type=FRACTION, default=0.0, metavar="F",
                     help="share of the ballots held out (default 0: none)")
    fit.add_argument("--seed", type=NON_NEGATIVE_INT, default=0)
    fit.add_argument("--starts", type=POSITIVE_INT, default=None, metavar="N",
                     help="MAP: jittered starts, best kept (default 1, or 3 for mixtures)")
    fit.add_argument("--draws", type=POSITIVE_INT, default=1000)
    fit.add_argument("--tune", type=NON_NEGATIVE_INT, default=1000)
    fit.add_argument("--chains", type=POSITIVE_INT, default=4)
    fit.add_argument("--target-accept", type=OPEN_UNIT_FLOAT, default=0.9,
                     help="NUTS: target acceptance rate, in (0, 1) (default 0.9)")
    fit.add_argument("--max-loglik-draws", type=POSITIVE_INT, default=200,
                     help="NUTS: posterior draws used for log-likelihoods and plots (default 200)")
    fit.add_argument("--compare", action="store_true",
                     help="also fit Plackett-Luce, rank-one, full and top-k (those that apply "
                     "to the data) by MAP and compare them with "
                     "the chosen model on the held-out ballots (or, without "
                     f"--heldout-fraction, by {CV_FOLDS}-fold cross-validation over ballots)")
    out = p.add_argument_group("output")
    out.add_argument("--json", metavar="OUT.json", required=True,
                     help="results as JSON" + STDOUT_HELP)
    out.add_argument("--plots", metavar="DIR", help="save positions.png, pairwise.png, "
                     "consensus.png, ppc.png (posterior predictive checks) and, for mixtures, "
                     "blocs.png")
    out.add_argument("--ppc-reps", type=POSITIVE_INT, default=100,
                     help="replicated data sets for the posterior predictive checks (default 100)")
    out.add_argument("--overwrite", action="store_true", help="replace output files that "
                     "already exist (an output that is the input file is refused even then)")
    out.add_argument("--quiet", action="store_true", help="no progress and status lines (the "
                     "progress of long fits is shown on the standard error only when it is a "
                     "terminal); errors and warnings are still printed")
    p.set_defaults(func=run_rankings)
    return p


def plot_files(components):
    """Names of the files ``--plots`` writes (:func:`pm_perm.preferences.plots.save_all`)."""
    from pm_perm.preferences.plots import FIGURES

    return [f for f in FIGURES if f != "blocs.png" or components > 1]


def _check_args(args):
    """Validate the input, the settings argparse cannot check alone and every output path,
    before any work (the numeric settings are checked by their argparse types)."""
    from pm_perm._io import check_outputs

    src = Path(args.data_file)
    if src.is_dir():
        raise ValueError(f"data file {src} is a directory; give a PrefLib file")
    if not src.is_file():
        raise FileNotFoundError(f"data file {src} not found")
    if args.learn_positions and args.model != "rank-one":
        raise ValueError("--learn-positions applies to --model rank-one only")
    if args.top_k is not None and args.model != "top-k" and not args.compare:
        raise ValueError("--top-k applies to --model top-k (or --compare) only")
    check_outputs({"--json": args.json}, [src], overwrite=args.overwrite,
                  directories={"--plots": (args.plots, plot_files(args.components))})


def _check_data(args, data):
    """Refuse, before any model is built, data the chosen model cannot fit: no ballots, more
    items than the exact partial-order likelihood takes (naming the flags to use instead), or
    for the top-k model ballots longer than ``--top-k`` or K beyond its limits. Sets
    ``args.top_k`` (default: the longest ballot of the data, held-out ones included)."""
    if data.n_rankings == 0:
        raise ValueError(f"{args.data_file}: the file has no ballots (a header and no order "
                         "lines); nothing to fit")
    longest = int(max(1, data.ranked_lengths().max()))
    if args.top_k is None and (args.model == "top-k" or args.compare):
        args.top_k = min(longest, data.n_items)
    try:
        if args.model == "top-k":
            from pm_perm.kernels.top_k import check_top_k_size

            if longest > args.top_k:
                raise ValueError(f"the file holds ballots of {longest} ranked items, more than "
                                 f"--top-k {args.top_k}: use --top-k {longest} or more (or "
                                 "leave it out: the default is the longest ballot)")
            check_top_k_size(data.n_items, args.top_k)
        elif args.model != "plackett-luce":
            from pm_perm.kernels.partial_orders import check_partial_order_size

            check_partial_order_size(data.n_items, plackett_luce="--model plackett-luce",
                                     top_k="--model top-k")
    except ValueError as err:
        raise ValueError(f"{args.data_file}: --model {args.model}: {err}") from None


def _check_components(args, train):
    """Refuse more mixture components than the training ballots have distinct orders."""
    K, n = args.components, train.n_distinct
    if K > n:
        raise ValueError(
            f"--components {K} is more than the {n} distinct order(s) of the "
            f"{train.n_rankings} training ballot(s) in {args.data_file}: each component needs "
            "orders of its own, and extra components only split the same ballots (and fit "
            f"worse); use --components {n} or fewer (1 to start)")


def _loglik_per_ranking(post, family, data, *, fit, max_draws, seed):
    """Per-ballot natural-log likelihood of ``data`` (plug-in for MAP, lpd for NUTS)."""
    from scipy.special import logsumexp

    from pm_perm.preferences.posterior import pointwise_loglik

    if data.n_rankings == 0:
        return None
    ll = pointwise_loglik(post, family, data.orders, max_draws=max_draws, rng=seed)
    lpd = ll[0] if fit == "map" else logsumexp(ll, axis=0) - np.log(ll.shape[0])
    if not np.all(np.isfinite(lpd)):
        raise RuntimeError("the fitted model gives a non-finite log-likelihood to some ballots")
    return float(data.counts @ lpd / data.n_rankings)


def _nuts_diagnostics(idata, family, components):
    import arviz as az

    names = {"plackett-luce": ["u"], ANCHORED: ["u", "D"]}.get(family, ["W"])
    if components > 1:
        names.append("mixture_weights")
    summary = az.summary(idata, var_names=names, kind="diagnostics")
    stats = idata["sample_stats"]
    div = int(np.asarray(stats["diverging"].values).sum()) if "diverging" in stats else None
    r_hat = float(np.nanmax(np.asarray(summary["r_hat"], dtype=float)))
    ess = float(np.nanmin(np.asarray(summary["ess_bulk"], dtype=float)))
    return {"max_r_hat": r_hat, "min_ess_bulk": ess, "divergences": div,
            "converged": bool(r_hat <= 1.01 and div == 0)}


def _fit(args, train, family):
    from pm_perm.inference import SamplingError, sampler_warnings
    from pm_perm.preferences import fitting as rfit

    rm = _build(args, train, family)
    if args.fit == "map":
        starts = args.starts or (1 if args.components == 1 else 3)
        point = _map_fitter(rm)(rm, seed=args.seed, n_starts=starts)
        diag = point.pop("_optimizer")
        return rfit.posterior_params(point, family), diag, {"starts": starts}
    extra = {}
    if family == ANCHORED:  # NUTS at the type-II tau (module docstring)
        _status("PL-anchored model: choosing tau by the Laplace evidence (MAP) before NUTS")
        tau = float(rfit.fit_map_type2(rm, seed=args.seed)["tau"])
        extra = {"tau": tau, "tau_from": "type-II MAP (Laplace evidence), fixed under NUTS"}
    _status(f"NUTS: {args.chains} chains x {args.draws} draws ({args.tune} tuning)")
    idata = rfit.fit_nuts(rm, draws=args.draws, tune=args.tune, chains=args.chains,
                          seed=args.seed, target_accept=args.target_accept)
    post = rfit.posterior_params(idata, family)
    if not all(np.all(np.isfinite(v)) for v in post.values()):
        raise SamplingError("NUTS returned non-finite draws (mixture weights or ballot-length "
                            "probabilities); nothing is reported")
    diag = _nuts_diagnostics(idata, family, args.components)
    for w in sampler_warnings(diag):
        warnings.warn(w, RuntimeWarning, stacklevel=1)
    sampler = {"draws": args.draws, "tune": args.tune, "chains": args.chains,
               "target_accept": args.target_accept, "sampler": idata.attrs.get("pm_perm_sampler"),
               "parametrization": rm.parametrization, **extra}
    return post, diag, sampler


def _thin(post, max_draws, seed):
    S = post["params"].shape[0]
    if S <= max_draws:
        return post
    idx = np.sort(np.random.default_rng(seed).choice(S, max_draws, replace=False))
    return {k: v[idx] for k, v in post.items()}


def run_rankings(args):
    """Entry point of ``pm-perm preferences``; returns the exit status (module docstring)."""
    with stdout_for_results(args.json), progress_context(getattr(args, "quiet", False)):
        return _run_rankings(args)


def _run_rankings(args):
    from pm_perm._io import OutputPathError

    t0 = time.perf_counter()
    try:
        _check_args(args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from pm_perm.preferences.preflib import read_preflib

            data = read_preflib(args.data_file)
            _check_data(args, data)
            if args.heldout_fraction > 0:
                train, heldout = data.split_ballots(args.heldout_fraction,
                                                    np.random.default_rng(args.seed))
            else:
                train, heldout = data, None
            _check_components(args, train)
            family = _family(args, data)
            _status(f"{data.n_rankings} ballots ({data.n_distinct} distinct) over "
                    f"{data.n_items} items; fitting {_variant(args, family)[0]} "
                    f"(K={args.components}) by {args.fit.upper()} on {train.n_rankings} ballots")
            t_fit = time.perf_counter()
            post, diag, sampler = _fit(args, train, family)
            t_fit = time.perf_counter() - t_fit
            result, figures = _report(args, data, train, heldout, post, diag, family)
            result["comparison"] = compare_models(args, data, train, heldout, post, family)
    except KeyboardInterrupt:
        print("pm-perm preferences: interrupted (Ctrl-C) before the fit finished; nothing was "
              "written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (OutputPathError, ValueError, OSError) as err:
        print(f"pm-perm preferences: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as err:  # MapFitError, SamplingError, non-finite log-likelihoods
        print(f"pm-perm preferences: the fit failed, nothing was written: {err}", file=sys.stderr)
        return EXIT_FIT_FAILED
    result["warnings"] = list(dict.fromkeys(str(w.message).strip() for w in caught))
    for w in result["warnings"]:
        print(f"pm-perm preferences: warning: {w}", file=sys.stderr)
    result["sampler"] = sampler
    result["timings"] = {"fit": round(t_fit, 3), "total": round(time.perf_counter() - t0, 3)}
    result["run"] = run_record(args, [args.data_file])
    print(format_summary(result))
    return _write_outputs(args, result, figures)


def _write_outputs(args, result, figures):
    """Write the figures, then the JSON; one failing does not stop the other (exit status 1)."""
    failed = []
    if figures is not None:
        from pm_perm.preferences.plots import save_all

        _status("saving plots")
        try:
            result["plots"] = save_all(args.plots, overwrite=args.overwrite, **figures)
        except Exception as err:  # noqa: BLE001 - reported, the JSON is still written
            failed.append(f"--plots {args.plots}: {type(err).__name__}: {err}")
    try:
        write_json_result("preferences", args.json, result, failed, overwrite=args.overwrite)
    except Exception as err:  # noqa: BLE001
        failed.append(f"--json {args.json}: {type(err).__name__}: {err}")
    return finish_outputs("preferences", failed)


def _report(args, data, train, heldout, post, diag, family):
    from pm_perm.preferences import analysis

    K = args.components
    small = _thin(post, args.max_loglik_draws, args.seed)
    ll = {name: _loglik_per_ranking(small, family, d, fit=args.fit,
                                    max_draws=args.max_loglik_draws, seed=args.seed)
          for name, d in (("train", train), ("heldout", heldout)) if d is not None}
    names = list(data.item_names)
    consensus = analysis.consensus_posterior(small, family, top=10)
    marg = analysis.position_marginals(small, family, rng=args.seed)
    mean = small["params"].mean(axis=0)  # (K, M, M), (K, M) or PL-anchored (1, M, M + 1)
    variant, notes = _variant(args, family)
    result = {
        "model": args.model, "variant": variant, "family": family, "notes": notes,
        "components": K, "fit": args.fit, "n_items": data.n_items,
        "n_rankings": data.n_rankings, "n_distinct": data.n_distinct, "items": names,
        "train": {"loglik_per_ranking": ll["train"], "n_rankings": train.n_rankings,
                  "n_distinct": train.n_distinct},
        "heldout": {"loglik_per_ranking": ll.get("heldout"),
                    "n_rankings": 0 if heldout is None else heldout.n_rankings,
                    "n_distinct": 0 if heldout is None else heldout.n_distinct},
        "logits": (mean[0].tolist() if family not in ("plackett-luce", ANCHORED) and K == 1
                   else None),
        "consensus": [names[i] for i in consensus[0][0]],
        "consensus_posterior": [{"order": [names[i] for i in o], "probability": p}
                                for o, p in consensus],
        "position_marginals": marg.tolist(),
        "diagnostics": diag,
    }
    if family == "top-k":
        result["top_k"] = args.top_k
    if family == "plackett-luce":
        result["utilities"] = mean.tolist()
    if family == ANCHORED:  # p(pi) ∝ PL(pi; u) exp(sum_i D[i, pi(i)])
        result["utilities"] = mean[..., -1].tolist()
        result["deviations"] = mean[0, :, :-1].tolist()
    if K > 1:
        weights = small["weights"].mean(axis=0)
        one = {"weights": np.ones((1, 1)), "length_probs": small["length_probs"][:1]}
        result["blocs"] = [
            {"weight": float(weights[k]), "logits": mean[k].tolist(),
             "consensus": [names[i] for i in analysis.consensus_posterior(
                 {**one, "params": mean[None, k:k + 1]}, family, top=1)[0][0]]}
            for k in range(K)]
    figures = None
    if args.plots:
        _status("posterior predictive checks")
        ppc = analysis.ppc_summary(train, small, family, n_reps=args.ppc_reps, rng=args.seed)
        figures = dict(
            item_names=names, marginals=marg, consensus=consensus, ppc=ppc,
            pairwise=analysis.pairwise_probabilities(small, family, rng=args.seed,
                                                     n_per_draw=max(20, 20_000 // len(
                                                         small["params"]))),
            profiles=analysis.component_position_marginals(small, family, rng=args.seed),
            weights=small["weights"].mean(axis=0))
        result["ppc"] = {k: {kk: np.asarray(vv).tolist() for kk, vv in v.items()}
                         for k, v in ppc.items()}
    return result, figures


#: Cross-validation folds of ``--compare`` (and of the default check) without held-out ballots.
CV_FOLDS = 5
#: A model "loses by more than noise" when its mean per-ballot held-out log-likelihood is below
#: the other's by more than this many standard errors of the per-ballot difference.
NOISE_SE = 2.0
#: Without held-out ballots the default check runs a cross-validation only up to this many
#: ballots (where it costs seconds, and where the richer models can lose).
CHECK_MAX_BALLOTS = 1000


def _per_ballot(post, family, data, *, fit, max_draws, seed):
    """Log-likelihood of the ballots of ``data`` (plug-in for MAP, lpd for NUTS):
    ``(values, counts)``, one value per distinct order and its number of ballots (the ballots
    are never expanded: counts of any size cost the distinct orders only)."""
    from scipy.special import logsumexp

    from pm_perm.preferences.posterior import pointwise_loglik

    ll = pointwise_loglik(post, family, data.orders, max_draws=max_draws, rng=seed)
    lpd = ll[0] if fit == "map" else logsumexp(ll, axis=0) - np.log(ll.shape[0])
    if not np.all(np.isfinite(lpd)):
        raise RuntimeError("a fitted model gives a non-finite log-likelihood to some ballots")
    return lpd, data.counts.astype(np.float64)


def _map_scores(args, model, components, splits, data):
    """Per-ballot scores of ``model`` fitted by MAP on each split's training part.

    ``splits``: ``[(train, test)]`` (RankingData, held-out ballots), or cross-validation folds
    ``[(train_counts, test)]`` with the training counts aligned with ``data``'s distinct
    orders: one model is built on ``data`` and each fold only sets its counts
    (:func:`~pm_perm.preferences.fitting.set_counts`), so the compiled functions are reused."""
    import argparse

    from pm_perm.preferences import fitting as rfit

    sub = argparse.Namespace(**{**vars(args), "model": model, "components": components,
                                "fit": "map", "starts": None,
                                "learn_positions": args.learn_positions and model == "rank-one"})
    family = _family(sub, data)
    if not isinstance(splits[0][0], np.ndarray):
        post, _, _ = _fit(sub, splits[0][0], family)
        return _per_ballot(post, family, splits[0][1], fit="map", max_draws=None,
                           seed=args.seed)
    rm = _build(sub, data, family)
    fit_map = _map_fitter(rm)
    parts = []
    for train, test in splits:
        point = fit_map(rfit.set_counts(rm, train), seed=args.seed,
                        n_starts=1 if components == 1 else 3)
        post = rfit.posterior_params(point, family)
        parts.append(_per_ballot(post, family, test, fit="map", max_draws=None, seed=args.seed))
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def _mean(score):
    """Mean per ballot of a ``(values, counts)`` score."""
    values, counts = score
    return float(counts @ values / counts.sum())


def _difference(a, b):
    """Mean and standard error of the per-ballot difference ``a - b`` of two scores of the same
    ballots (``(values, counts)``, counts equal): the weighted mean and the standard error of
    the mean over the ``n = sum(counts)`` ballots (sample variance with ``n - 1``)."""
    (va, w), (vb, _) = a, b
    n = w.sum()
    d = va - vb
    mean = float(w @ d / n)
    se = float(np.sqrt(w @ (d - mean) ** 2 / (n - 1) / n)) if n > 1 else float("inf")
    return mean, se


def compare_models(args, data, train, heldout, post, family=None):
    """Score the chosen model against the others on ballots it was not fitted to.

    ``--compare``: Plackett-Luce, rank-one, full and top-k (one population each, MAP; those that
    apply to the data, :func:`_applies`: rank-one and full not beyond ``EXACT_MAX_M`` items), and
    the chosen model as fitted. By default (no ``--compare``): the chosen model against
    Plackett-Luce (one population, MAP) only, unless the chosen model IS one-population
    Plackett-Luce. The ballots scored: the held-out ones when ``--heldout-fraction`` is given (the
    chosen model's scores are those of its fit, MAP or NUTS); otherwise a ``CV_FOLDS``-fold
    cross-validation over the ballots, every model fitted by MAP on each fold's training part (by
    default only for at most ``CHECK_MAX_BALLOTS`` ballots: beyond that the check is skipped and the
    result says so).

    "Noise": ``NOISE_SE`` standard errors of the per-ballot difference of held-out
    log-likelihoods (paired over the same ballots). When the chosen model's mean is below
    Plackett-Luce's by more than that, a warning says so (recorded in the JSON's
    ``warnings``); with ``--compare`` the summary also says which model wins.

    ``family``: the family of the chosen model's fit (:func:`_family`; default ``args.model``).

    Returns
    -------
    dict or None
        ``None`` for one-population Plackett-Luce without ``--compare``; else ``method``,
        ``n_ballots``, ``noise``, ``models`` (each ``model``, ``components``,
        ``loglik_per_ballot``, ``difference_to_chosen`` = [mean, se] of other - chosen), ``best``
        (the label of the highest mean; ``null`` when skipped), ``chosen_loses_to_plackett_luce``
        and ``skipped`` (why not checked, or ``null``).
    """
    chosen = (args.model, args.components)
    if not args.compare and chosen == ("plackett-luce", 1):
        return None
    if heldout is not None:
        splits, method = [(train, heldout)], "held-out ballots"
    elif args.compare or data.n_rankings <= CHECK_MAX_BALLOTS:
        # the folds of data.ballot_folds (each ballot to one fold), as counts aligned with the
        # data's distinct orders (ballot_folds' parts drop the orders a part lacks)
        parts = np.random.default_rng(args.seed).multinomial(data.counts,
                                                             np.full(CV_FOLDS, 1 / CV_FOLDS))
        splits = [(data.counts - parts[:, k], data.with_counts(parts[:, k]))
                  for k in range(CV_FOLDS)]
        method = f"{CV_FOLDS}-fold cross-validation over ballots (MAP fits)"
    else:
        skipped = (f"no held-out ballots and more than {CHECK_MAX_BALLOTS} ballots: the model "
                   "was not compared with Plackett-Luce (use --heldout-fraction or --compare)")
        _status(skipped)
        return {"method": None, "n_ballots": 0, "noise": None, "models": [], "best": None,
                "chosen_loses_to_plackett_luce": None, "skipped": skipped}
    candidates = ([(m, 1) for m in MODELS if _applies(m, data, args.top_k)] if args.compare
                  else [("plackett-luce", 1)])
    _status(f"comparing with {', '.join(m for m, _ in candidates if (m, 1) != chosen)} on "
            f"{method}")
    if heldout is not None:
        scores = {chosen: _per_ballot(_thin(post, args.max_loglik_draws, args.seed),
                                      family or args.model, heldout, fit=args.fit,
                                      max_draws=args.max_loglik_draws, seed=args.seed)}
    else:
        scores = {chosen: _map_scores(args, args.model, args.components, splits, data)}
    for m, k in candidates:
        if (m, k) not in scores:
            scores[(m, k)] = _map_scores(args, m, k, splits, data)
    label = {key: f"{key[0]} (K={key[1]})" for key in scores}
    rows = [{"model": m, "components": k, "loglik_per_ballot": _mean(v),
             "difference_to_chosen": list(_difference(v, scores[chosen]))}
            for (m, k), v in scores.items()]
    best = max(scores, key=lambda key: _mean(scores[key]))
    pl = scores[("plackett-luce", 1)]
    diff, se = _difference(scores[chosen], pl)
    loses = bool(chosen != ("plackett-luce", 1) and diff < -NOISE_SE * se)
    if loses:
        warnings.warn(
            f"the chosen model ({label[chosen]}) loses to Plackett-Luce on {method}: "
            f"{-diff:.3f} nats per ballot worse (standard error {se:.3f}; more than "
            f"{NOISE_SE:g} standard errors, so not noise). On these data prefer --model "
            "plackett-luce (or see --compare)", RuntimeWarning, stacklevel=2)
    return {"method": method, "n_ballots": int(pl[1].sum()),
            "noise": f"{NOISE_SE:g} standard errors of the per-ballot difference",
            "models": rows, "best": label[best], "chosen_loses_to_plackett_luce": loses,
            "skipped": None}


def _applies(model, data, top_k):
    """Whether ``--compare`` can fit ``model`` to ``data``: rank-one and full within the exact
    partial-order limits, top-k within its own (K = ``top_k``), Plackett-Luce always."""
    from pm_perm.kernels.partial_orders import check_partial_order_size
    from pm_perm.kernels.top_k import check_top_k_size

    try:
        if model == "top-k":
            check_top_k_size(data.n_items, top_k)
        elif model != "plackett-luce":
            check_partial_order_size(data.n_items)
    except ValueError:
        return False
    return True


def _comparison_lines(comparison):
    if not comparison or comparison["skipped"] or not comparison["models"]:
        return []
    lines = [f"  compared on {comparison['method']} ({comparison['n_ballots']} ballots; noise = "
             f"{comparison['noise']}):"]
    for r in comparison["models"]:
        mean, se = r["difference_to_chosen"]
        lines.append(f"    {r['model']:>14} (K={r['components']}) {r['loglik_per_ballot']:.4f} "
                     f"per ballot ({mean:+.4f} +- {se:.4f} vs the chosen model)")
    lines.append(f"    best: {comparison['best']}")
    return lines


def format_summary(result):
    """A few lines for the terminal: fit per ballot and the consensus."""

    top = f", top {result['top_k']}" if "top_k" in result else ""
    lines = [f"{result['model']} (K={result['components']}{top}, {result['fit']}): "
             f"{result['n_rankings']} ballots over {result['n_items']} items"]
    if result.get("variant", result["model"]) != result["model"]:
        tau = result.get("diagnostics", {}).get("tau")
        tau = result.get("sampler", {}).get("tau") if tau is None else tau
        lines.append(f"  model: {result['variant']}" + ("" if tau is None else
                                                         f", tau {float(tau):g}"))
    lines.append(f"  train   log-likelihood per ballot "
                 f"{result['train']['loglik_per_ranking']:.4f}")
    if result["heldout"]["loglik_per_ranking"] is not None:
        lines.append(f"  heldout log-likelihood per ballot "
                     f"{result['heldout']['loglik_per_ranking']:.4f} "
                     f"({result['heldout']['n_rankings']} ballots)")
    lines += _comparison_lines(result.get("comparison"))
    if result["fit"] == "map":  # one point, no posterior: the order has no probability to show
        lines.append("  consensus (most probable complete order at the MAP estimate): "
                     + " > ".join(result["consensus"]))
    else:
        top = result["consensus_posterior"][0]
        lines.append(f"  consensus (posterior probability {top['probability']:.2f}): "
                     + " > ".join(result["consensus"]))
    return "\n".join(lines)
