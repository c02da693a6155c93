"""``pm-perm learn-to-rank``: train a ranker on LETOR / LightGBM files (or an MQ2008 fold),
evaluate it.

Examples
--------
::

    pm-perm learn-to-rank --mq2008-fold 1 --model rankmatch --fit map --json fold1.json
    pm-perm learn-to-rank --train S1.txt --train S2.txt --valid vali.txt --test test.txt --fit nuts
    pm-perm learn-to-rank --format lightgbm --train rank.train --test rank.test --model ridge
    pm-perm learn-to-rank --mq2008-fold 1 --model ordinal --fit map
    pm-perm learn-to-rank --mq2008-fold 1 --model ordinal --hinge-knots 4

The test split's NDCG@1..10, P@1..10 and MAP are printed (mean over queries, conventions of
:mod:`pm_perm.learning_to_rank.metrics`). With ``--fit nuts`` each metric is computed per
posterior draw and printed as posterior mean and 90% interval, with an ArviZ summary (r_hat,
ESS) of theta. Models: ``rankmatch`` (:class:`pm_perm.learning_to_rank.rankmatch.RankMatch`),
``ordinal`` (the ordinal n-choose-k ranker on whole query lists,
:class:`pm_perm.learning_to_rank.ordinal.OrdinalRanker`) and ``ridge``, a linear pointwise
baseline (:func:`pm_perm.learning_to_rank.baselines.fit_ridge`: ridge regression on the labels,
penalty chosen on the validation split). ``--hinge-knots K`` makes any of them an additive
piecewise-linear model of the features (:class:`pm_perm.learning_to_rank.features.HingeBasis`,
fitted on the training split). ``--mq2008-fold K`` reads the shared data folder
(:func:`pm_perm.datasets.data_home`, or ``--data-root``).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from pm_perm.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FIT_FAILED,
    EXIT_INTERRUPTED,
    NON_NEGATIVE_INT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    STDOUT_HELP,
    finish_outputs,
    run_record,
    stdout_for_results,
    write_json_result,
)
from pm_perm.cli.common import status as _status

__all__ = [
    "add_parser",
    "fit_and_evaluate",
    "hinge_splits",
    "input_files",
    "load_splits",
    "plot_files",
    "run_rank",
]

KS = tuple(range(1, 11))


def add_parser(subparsers):
    """Register the ``learn-to-rank`` subcommand on an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser(
        "learn-to-rank",
        help="train and evaluate a learning-to-rank model",
        description=__doc__.split("\n\n")[0],
    )
    data = p.add_argument_group("data")
    data.add_argument("--train", action="append", metavar="FILE", help="training file (repeat "
                      "for a split made of several files)")
    data.add_argument("--valid", action="append", metavar="FILE", help="validation file(s)")
    data.add_argument("--test", action="append", metavar="FILE", help="test file(s)")
    data.add_argument("--format", choices=("letor", "lightgbm"), default="letor",
                      help="letor: '<label> qid:<q> <id>:<v> ...'; lightgbm: no qid, group "
                      "sizes in '<file>.query' (default: letor)")
    data.add_argument("--mq2008-fold", type=int, metavar="K", help="use MQ2008 fold K (1-5) "
                      "instead of files")
    data.add_argument("--data-root", metavar="DIR", help="folder holding MQ2008_LETOR4 "
                      "(default: $PM_PERM_DATA, else ../shared/data next to the repository)")
    data.add_argument("--query-norm", action="store_true", help="min-max scale features within "
                      "each query (LETOR QueryLevelNorm)")
    model = p.add_argument_group("model")
    model.add_argument("--model", choices=("rankmatch", "ordinal", "ridge"), default="rankmatch")
    model.add_argument("--fit", choices=("map", "nuts"), default="map")
    model.add_argument("--hinge-knots", type=int, default=0, metavar="K",
                       help="additive piecewise-linear scores: add hinges max(0, x - knot) at K "
                       "training quantiles of every feature (pm_perm.learning_to_rank.features."
                       "HingeBasis; default 0: the raw features)")
    model.add_argument("--subset-size", type=int, default=3, metavar="M",
                       help="RankMatch subset size M (default 3; M > #ratings uses ties)")
    model.add_argument("--subsets-per-doc", type=float, default=0.4,
                       help="RankMatch subsets per query = this * D * M (default 0.4)")
    model.add_argument("--prior-sigma", type=POSITIVE_FLOAT, action="append", metavar="S",
                       help="prior scale of theta; repeat to choose on validation NDCG@5 "
                       "(default 0.1 0.3 1 3 10)")
    model.add_argument("--lbfgs-memory", type=int, default=10, metavar="K",
                       help="L-BFGS-B memory of the MAP fits (default 10; 50 converges in about "
                       "half the iterations on MQ2008)")
    model.add_argument("--draws", type=POSITIVE_INT, default=1000)
    model.add_argument("--tune", type=NON_NEGATIVE_INT, default=1000)
    model.add_argument("--chains", type=POSITIVE_INT, default=4)
    model.add_argument("--seed", type=NON_NEGATIVE_INT, default=0)
    out = p.add_argument_group("output")
    out.add_argument("--convention", choices=("standard", "letor4"), default="standard",
                     help="NDCG discount convention (see pm_perm.learning_to_rank.metrics)")
    out.add_argument("--json", metavar="OUT.json", help="write the results as JSON" + STDOUT_HELP)
    out.add_argument("--predictions", metavar="OUT.txt",
                     help="write one test score per line" + STDOUT_HELP)
    out.add_argument("--plots", metavar="DIR", help="with --fit nuts: save a trace plot, a forest "
                     "plot of theta and, for up to 3 test queries of <= 16 documents, the "
                     "posterior predictive probability of each document being in the top 5; "
                     "with --hinge-knots also the posterior shape functions (shapes.png)")
    out.add_argument("--overwrite", action="store_true", help="replace output files that "
                     "already exist (an output that is an input file is refused even then)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar for NUTS")
    p.set_defaults(func=run_rank)
    return p


def plot_files(with_shapes=False):
    """Names of the files :func:`save_plots` writes into its folder."""
    return ["trace.png", "forest.png", "top5.png", *(["shapes.png"] if with_shapes else [])]


def save_plots(rm, test, directory, *, seed=0, max_draws=400, basis=None, train_X=None,
               overwrite=True):
    """Trace and forest plots of theta and top-5 probabilities for a few test queries.

    With a ``basis`` (:class:`~pm_perm.learning_to_rank.features.HingeBasis`, fitted on the raw
    training
    features ``train_X``), also ``shapes.png``: the posterior shape functions of the six most
    varying features (:func:`pm_perm.learning_to_rank.plots.plot_shape_functions`).

    Returns the list of files written (each atomically, :func:`pm_perm._io.save_figure`;
    ``overwrite=False`` refuses a file that exists when it is written, in the same step).
    Top-5 probabilities come from one exact draw of the
    whole query's ranking per posterior draw of theta (at most ``max_draws`` draws), from the
    fitted model's own predictive: the matching model for a
    :class:`~pm_perm.learning_to_rank.rankmatch.RankMatch`
    (:func:`~pm_perm.learning_to_rank.rankmatch.ranking_predictive`), Plackett-Luce for the ordinal
    ranker (:func:`~pm_perm.learning_to_rank.predictive.plackett_luce_predictive`).
    """
    from pathlib import Path

    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pm_perm._io import save_figure
    from pm_perm.learning_to_rank.predictive import plackett_luce_predictive
    from pm_perm.learning_to_rank.rankmatch import RankMatch, ranking_predictive

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    shown = {"feature": list(range(min(8, test.n_features)))}
    files = [out / name for name in plot_files(basis is not None)]
    save_figure(az.plot_trace_dist(rm.idata_, var_names=["theta"], coords=shown,
                                   backend="matplotlib"), files[0], overwrite=overwrite)
    save_figure(az.plot_forest(rm.idata_, var_names=["theta"], backend="matplotlib"), files[1],
                overwrite=overwrite)
    plt.close("all")
    predictive = ranking_predictive if isinstance(rm, RankMatch) else plackett_luce_predictive
    rng = np.random.default_rng(seed)
    draws = rm.theta_draws_
    draws = draws[rng.choice(len(draws), min(max_draws, len(draws)), replace=False)]
    sizes = test.group_sizes
    has_rel = np.maximum.reduceat(test.y, test.group_ptr[:-1]) > 0
    queries = np.flatnonzero((sizes > 5) & (sizes <= 16) & has_rel)[:3]
    fig, axes = plt.subplots(1, max(1, queries.size), figsize=(4.5 * max(1, queries.size), 3.2),
                             squeeze=False)
    for ax, q in zip(axes[0], queries, strict=False):
        rows = slice(test.group_ptr[q], test.group_ptr[q + 1])
        y = predictive(draws, test.X[rows], rng=rng)
        top5 = (y < 5).mean(axis=0)
        ax.bar(np.arange(top5.size), top5,
               color=plt.cm.viridis(test.y[rows] / max(1, test.y.max())))
        ax.set(title=f"query {test.qids[q]}", ylabel="P(in top 5)", ylim=(0, 1),
               xlabel="document (dark = label 0, yellow = top label)")
    fig.tight_layout()
    save_figure(fig, files[2], overwrite=overwrite)
    plt.close(fig)
    if basis is not None:
        from pm_perm.learning_to_rank.plots import plot_shape_functions

        fig, _ = plot_shape_functions(basis, rm.theta_draws_, train_X, seed=seed,
                                      title="posterior shape functions (hinge basis)")
        save_figure(fig, files[3], overwrite=overwrite)
        plt.close(fig)
    return [str(f) for f in files]


def input_files(args):
    """The input files a run of ``pm-perm learn-to-rank`` reads (data files and LightGBM group
    files)."""
    from pathlib import Path

    if args.mq2008_fold is not None:
        from pm_perm.datasets.mq2008 import mq2008_folder

        try:
            base = mq2008_folder(args.data_root)
        except FileNotFoundError:
            return []
        return [base / f"Fold{k}" / "test.txt" for k in range(1, 6)] + [
            base / f"Fold{args.mq2008_fold}" / "vali.txt"]
    files = [Path(f) for f in (args.train or []) + (args.valid or []) + (args.test or [])]
    if args.format == "lightgbm":
        files += [Path(f"{f}.query") for f in files if Path(f"{f}.query").exists()]
    return files


def load_splits(args):
    """(train, valid or None, test) from the parsed arguments.

    Raises ``ValueError`` before reading when a ``--valid`` or ``--test`` file is a ``--train``
    file, or a ``--test`` file is a ``--valid`` file (however spelled: ``../`` paths and
    symlinks included). LETOR test or validation queries that are training queries (the same
    qid and the same documents: a copy of the training file, say) give a ``UserWarning``
    (recorded in the result's ``warnings``); a shared qid alone does not, since files numbered
    independently reuse qids for other queries.
    """
    from pm_perm.datasets.mq2008 import load_mq2008_fold
    from pm_perm.learning_to_rank.data import read_letor, read_lightgbm

    if args.mq2008_fold is not None:
        if args.train or args.valid or args.test:
            raise ValueError("give either --mq2008-fold or --train/--valid/--test files, not both")
        return tuple(load_mq2008_fold(args.mq2008_fold, args.data_root,
                                      query_norm=args.query_norm))
    if not args.train or not args.test:
        raise ValueError("--train and --test are required (or use --mq2008-fold K)")
    _check_not_training_files(args)
    read = read_letor if args.format == "letor" else read_lightgbm
    train = read(args.train, single_doc="drop", query_norm=args.query_norm)
    opts = {"n_features": train.n_features, "query_norm": args.query_norm}
    valid = read(args.valid, single_doc="drop", **opts) if args.valid else None
    test = read(args.test, single_doc="keep", **opts)
    if args.format == "letor":  # LightGBM files have no qids (they are numbered 0, 1, ...)
        for option, split in (("--valid", valid), ("--test", test)):
            if split is not None:
                _warn_shared_qids(option, split, train)
    return train, valid, test


def _check_not_training_files(args):
    """Refuse a ``--valid`` or ``--test`` file that is a ``--train`` file, or a ``--test`` file
    that is a ``--valid`` file (same file, however spelled: ``../`` paths and symlinks
    included): its metrics would be on the data the model or its settings were fitted to."""
    from pm_perm._io import same_file

    fitted = "a model scored on its training data looks better than it is"
    chosen = "settings chosen on the test data make its metrics optimistic"
    for option, files, against, others, why in (
            ("--valid", args.valid, "--train", args.train, fitted),
            ("--test", args.test, "--train", args.train, fitted),
            ("--test", args.test, "--valid", args.valid, chosen)):
        for f in files or []:
            for other in others or []:
                if same_file(f, other):
                    raise ValueError(f"{option} {f} is the {against} file {other}: {why}; give "
                                     f"{option} a file of other queries")


def _warn_shared_qids(option, split, train):
    """Warn when queries of ``split`` are training queries: the same qid AND the same documents
    (the same feature rows, in any order). LETOR qids are unique across a data set's files, so
    such a query is a copy; files numbered independently reuse qids for other queries, which is
    no cause for a warning."""
    shared, where, ours = np.intersect1d(split.qids, train.qids, return_indices=True)
    copies = [int(q) for q, i, j in zip(shared, where, ours, strict=True)
              if _same_documents(split, int(i), train, int(j))]
    if copies:
        examples = ", ".join(str(q) for q in copies[:5])
        warnings.warn(
            f"{len(copies)} of the {split.n_queries} {option} queries are --train queries (the "
            f"same qid and the same documents: qids {examples}"
            f"{', ...' if len(copies) > 5 else ''}): the metrics are optimistic on them; remove "
            f"them from the {option} file", UserWarning, stacklevel=2)


def _same_documents(a, i, b, j):
    """Query ``i`` of split ``a`` has the feature rows of query ``j`` of split ``b`` (as a
    multiset of rows)."""
    rows_a = a.X[a.group_ptr[i]:a.group_ptr[i + 1]]
    rows_b = b.X[b.group_ptr[j]:b.group_ptr[j + 1]]
    if rows_a.shape != rows_b.shape:
        return False
    return sorted(r.tobytes() for r in rows_a) == sorted(r.tobytes() for r in rows_b)


def hinge_splits(train, valid, test, n_knots):
    """Replace the features of the three splits by a hinge basis fitted on ``train``.

    Returns ``(train, valid, test, basis)``; ``valid`` may be None. See
    :class:`pm_perm.learning_to_rank.features.HingeBasis`.
    """
    from pm_perm.learning_to_rank.features import HingeBasis

    basis = HingeBasis(n_knots).fit(train)
    _status(f"hinge basis: {train.n_features} features -> {basis.columns_.shape[0]} columns")
    valid = None if valid is None else basis.transform_split(valid)
    return basis.transform_split(train), valid, basis.transform_split(test), basis


def fit_and_evaluate(train, valid, test, *, model="rankmatch", fit="map", subset_size=3,
                     subsets_per_doc=0.4, prior_sigmas=None, draws=1000, tune=1000, chains=4,
                     seed=0, convention="standard", progressbar=False, lbfgs_memory=10):
    """Fit one model and evaluate it on the test split.

    ``lbfgs_memory`` is the L-BFGS-B memory of the RankMatch and ordinal MAP fits.

    Returns
    -------
    dict
        ``"test"``: metric -> value (posterior mean under NUTS); under NUTS also
        ``"test_interval90"`` (metric -> [5%, 95%] over draws) and ``"diagnostics"``;
        ``"scores"``: test scores (posterior-mean theta); ``"ranker"``: the fitted
        :class:`~pm_perm.learning_to_rank.rankmatch.RankMatch`; ``"timings"`` in seconds; settings.
    """
    from pm_perm.learning_to_rank.metrics import evaluate_ranking

    t0 = time.perf_counter()
    result = {"model": model, "fit": fit, "n_train_queries": train.n_queries,
              "n_test_queries": test.n_queries, "convention": convention}
    if model == "ridge":
        if fit != "map":
            raise ValueError("the ridge baseline is a point estimate: use --fit map")
        from pm_perm.learning_to_rank.baselines import fit_ridge

        ridge = fit_ridge(train, valid)
        scores = ridge.predict(test.X)
        result["ridge_alpha"] = ridge.alpha
    elif model in ("rankmatch", "ordinal"):
        sigmas = {"prior_sigmas": prior_sigmas} if prior_sigmas else {}
        if model == "rankmatch":
            from pm_perm.learning_to_rank.rankmatch import RankMatch

            rm = RankMatch(M=subset_size, subsets_per_doc=subsets_per_doc, seed=seed,
                           lbfgs_memory=lbfgs_memory, **sigmas)
            _status(f"RankMatch: fitting MAP (M={subset_size})")
        else:
            from pm_perm.learning_to_rank.ordinal import OrdinalRanker

            rm = OrdinalRanker(lbfgs_memory=lbfgs_memory, **sigmas)
            _status("ordinal n-choose-k: fitting MAP")
        rm.fit_map(train, valid)
        result["prior_sigma"] = rm.prior_sigma_
        result["standardize"] = rm.standardize
        result["map_fits"] = {
            str(s): {"success": bool(r.success), "status": int(r.status), "message": str(r.message),
                     "iterations": int(r.nit), "objective": float(r.fun)}
            for s, r in rm.map_results_.items()
        }
        result["lbfgs_memory"] = lbfgs_memory
        if model == "rankmatch":
            result.update(subset_size=subset_size, n_subsets=int(rm.subsets_.docs.shape[0]))
        else:
            result.update(n_train_queries_used=int(rm.padded_.n_queries),
                          max_query_length=int(rm.padded_.X.shape[1]))
        if fit == "nuts":
            _status(f"{type(rm).__name__}: NUTS, {chains} chains x {draws} draws")
            rm.fit_nuts(train, draws=draws, tune=tune, chains=chains, random_seed=seed,
                        progressbar=progressbar)
            per_draw = evaluate_ranking(rm.decision_function(test.X, draws=True), test.y,
                                        test.group_ptr, ks=KS, convention=convention)
            result["test"] = {k: float(np.mean(v)) for k, v in per_draw.items()}
            result["test_interval90"] = {
                k: [float(x) for x in np.quantile(v, [0.05, 0.95])] for k, v in per_draw.items()
            }
            from pm_perm.inference import sampler_warnings

            result["diagnostics"] = {**_diagnostics(rm.idata_), **rm.diagnostics_}
            result["warnings"] = sampler_warnings(rm.diagnostics_)
        scores = rm.decision_function(test.X)
        result["ranker"] = rm
        result["theta"] = [float(x) for x in rm.theta_]
        result["timings"] = {k: round(v, 3) for k, v in rm.timings_.items()}
    else:
        raise ValueError(f"unknown model {model!r}; choose rankmatch, ordinal or ridge")
    if "test" not in result:
        result["test"] = evaluate_ranking(scores, test.y, test.group_ptr, ks=KS,
                                          convention=convention)
    result.setdefault("timings", {})["total"] = round(time.perf_counter() - t0, 3)
    result["scores"] = scores
    return result


def run_rank(args):
    """Entry point of ``pm-perm learn-to-rank``; returns the exit status.

    Exit status: 0 success; 1 an output could not be written (the others were); 2 bad input
    (nothing was fitted or written; a bad setting such as ``--draws 0`` or ``--seed -1`` is
    refused when the command line is parsed, by ``argparse``, which exits); 3 the fit failed
    (optimiser or sampler; nothing written); 130 interrupted (Ctrl-C; nothing written). Every
    output path is checked before any work (:func:`pm_perm._io.check_outputs`) and written
    atomically (a device or FIFO directly); with ``--json -`` (or ``--predictions -``) the
    standard output carries that output alone and the table goes to the standard error.
    """
    with stdout_for_results(args.json, args.predictions):
        return _run_rank(args)


def _run_rank(args):
    from pm_perm._io import OutputPathError, check_outputs

    try:
        if args.plots and (args.fit != "nuts" or args.model == "ridge"):
            raise ValueError("--plots needs --fit nuts with --model rankmatch or ordinal "
                             "(posterior draws)")
        inputs = input_files(args)
        check_outputs({"--json": args.json, "--predictions": args.predictions}, inputs,
                      overwrite=args.overwrite,
                      directories={"--plots": (args.plots, plot_files(bool(args.hinge_knots)))})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            train, valid, test = load_splits(args)
            basis, raw_train_X = None, train.X
            if args.hinge_knots:
                train, valid, test, basis = hinge_splits(train, valid, test, args.hinge_knots)
            result = fit_and_evaluate(
                train, valid, test, model=args.model, fit=args.fit,
                subset_size=args.subset_size, subsets_per_doc=args.subsets_per_doc,
                prior_sigmas=args.prior_sigma, draws=args.draws, tune=args.tune,
                chains=args.chains, seed=args.seed, convention=args.convention,
                progressbar=not args.no_progress, lbfgs_memory=args.lbfgs_memory,
            )
    except KeyboardInterrupt:
        print("pm-perm learn-to-rank: interrupted (Ctrl-C) before the fit finished; nothing was "
              "written",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except (OutputPathError, ValueError, OSError) as err:
        print(f"pm-perm learn-to-rank: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as err:
        print(f"pm-perm learn-to-rank: the fit failed, nothing was written: {err}", file=sys.stderr)
        return EXIT_FIT_FAILED
    result["warnings"] = _unique([str(w.message).strip() for w in caught] +
                                 result.get("warnings", []))
    for w in result["warnings"]:
        print(f"pm-perm learn-to-rank: warning: {w}", file=sys.stderr)
    if basis is not None:
        result.update(hinge_knots=args.hinge_knots, n_columns=int(basis.columns_.shape[0]))
    result["run"] = run_record(args, inputs)
    print(format_table(result))
    if "summary" in result.get("diagnostics", {}):
        print(result["diagnostics"].pop("summary"))
    scores, ranker = result.pop("scores"), result.pop("ranker", None)
    return _write_outputs(args, result, scores, ranker, test, basis, raw_train_X)


def _write_outputs(args, result, scores, ranker, test, basis, raw_train_X):
    """Write every requested output; one failing does not stop the others (exit status 1)."""
    from pm_perm._io import atomic_path

    failed = []
    if args.plots:
        _status("saving plots")
        try:
            result["plots"] = save_plots(ranker, test, args.plots, seed=args.seed, basis=basis,
                                         train_X=raw_train_X, overwrite=args.overwrite)
            print("plots: " + ", ".join(result["plots"]))
        except Exception as err:  # noqa: BLE001 - reported, the other outputs still written
            failed.append(f"--plots {args.plots}: {type(err).__name__}: {err}")
    if args.predictions:
        try:
            if not np.all(np.isfinite(scores)):
                raise ValueError("some test scores are not finite")
            with atomic_path(args.predictions, overwrite=args.overwrite) as tmp:
                np.savetxt(tmp, scores, fmt="%.10g")
        except Exception as err:  # noqa: BLE001
            failed.append(f"--predictions {args.predictions}: {type(err).__name__}: {err}")
    if args.json:
        try:
            write_json_result("learn-to-rank", args.json, result, failed,
                              overwrite=args.overwrite)
        except Exception as err:  # noqa: BLE001
            failed.append(f"--json {args.json}: {type(err).__name__}: {err}")
    return finish_outputs("learn-to-rank", failed)


def _unique(items):
    return list(dict.fromkeys(items))


def format_table(result):
    """The test metrics as a text table (posterior mean and 90% interval under NUTS)."""
    test, interval = result["test"], result.get("test_interval90")
    lines = [f"test metrics ({result['model']}, {result['fit']}, {result['n_test_queries']} "
             f"queries, {result['convention']} NDCG)"]
    head = f"{'k':>4} {'NDCG@k':>8} {'P@k':>8}"
    if interval:
        head += f"   {'NDCG@k 90% interval':>21}"
    lines.append(head)
    for k in KS:
        row = f"{k:>4} {test[f'ndcg@{k}']:>8.4f} {test[f'p@{k}']:>8.4f}"
        if interval:
            lo, hi = interval[f"ndcg@{k}"]
            row += f"   [{lo:.4f}, {hi:.4f}]"
        lines.append(row)
    row = f" MAP {test['map']:>8.4f}"
    if interval:
        row += f"            [{interval['map'][0]:.4f}, {interval['map'][1]:.4f}]"
    lines.append(row)
    return "\n".join(lines)


def _diagnostics(idata):
    import arviz as az

    summary = az.summary(idata, var_names=["theta"])
    div = idata.sample_stats["diverging"] if "diverging" in idata.sample_stats else None
    return {
        "max_r_hat": float(np.max(summary["r_hat"])),
        "min_ess_bulk": float(np.min(summary["ess_bulk"])),
        "divergences": int(np.sum(div)) if div is not None else None,
        "summary": summary.to_string(),
    }
