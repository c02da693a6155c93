"""Which model ``pm-perm preferences --model ...`` builds and how it is fitted by MAP (private
to :mod:`pm_perm.cli.preferences`, whose module docstring says which model runs when)."""

from __future__ import annotations

#: ``--model`` -> the builder of :mod:`pm_perm.preferences.models`.
MODELS = {"plackett-luce": "plackett_luce_model", "rank-one": "rank_one_model",
          "full": "full_model", "top-k": "top_k_model"}

#: The family of the PL-anchored models (:mod:`pm_perm.preferences.anchored`).
ANCHORED = "pl-anchored"
#: The ``--model`` values that fit the PL-anchored model where it applies: ``"full"`` (V3 of
#: ``benchmarks/bench_small_data.py``, ``tau`` by the Laplace evidence) and ``"rank-one"`` (V6:
#: the rank-one tilt with ``tau`` by cross-validation, the final fit from the Plackett-Luce MAP,
#: ``fit_map_cv``); both met the pre-registered small-data criterion (``docs/benchmarks.md``,
#: "Small data, V3" and "Small data, V5 and V6").
ANCHORED_MODELS = ("full", "rank-one")


def _family(args, data):
    """The family ``--model`` fits on ``data`` (all ballots, held-out ones included): the
    PL-anchored model for ``--model`` in :data:`ANCHORED_MODELS` (``full``, ``rank-one``) with one
    component, on ballots with no tie before their end, and (rank-one) without
    ``--learn-positions`` and by MAP; otherwise ``args.model`` itself (the older models)."""
    from pm_perm.kernels.pl_tilted import middle_tie_rows

    if (args.model in ANCHORED_MODELS and args.components == 1
            and not (args.model == "rank-one" and (args.learn_positions or args.fit == "nuts"))
            and not middle_tie_rows(data.orders).any()):
        return ANCHORED
    return args.model


def _variant(args, family):
    """``(variant, notes)`` of the JSON: which model ran, and why not the PL-anchored one."""
    if family == ANCHORED:
        how = ("cross-validated tau, final fit from the Plackett-Luce MAP"
               if args.model == "rank-one" else "type-II tau")
        return f"PL-anchored {args.model} (Plackett-Luce tilted, {how})", []
    if args.model not in ("full", "rank-one"):
        return args.model, []
    why = ("the PL-anchored model has one component and --components > 1 was given"
           if args.components > 1 else "--learn-positions was given"
           if args.model == "rank-one" and args.learn_positions else
           "the rank-one tilt's bilinear posterior mixes poorly under NUTS"
           if args.model == "rank-one" and args.fit == "nuts" else
           "the PL-anchored model takes complete and top-k ballots only, and some ballots have "
           "tied items before their end")
    shrunk = ("full item x position logits shrunk toward rank one" if args.model == "full"
              else "rank-one item x position logits")
    return (f"{args.model} ({shrunk})",
            [f"--model {args.model} fitted the older {shrunk} model, not a PL-anchored one "
             f"({why}); on small data it can lose to --model plackett-luce (see 'comparison')"])


def _build(args, train, family):
    """The model of ``args`` (``--model``, ``--components``, ...) of ``family`` on ``train``."""
    from pm_perm.preferences import models as rmod

    if family == ANCHORED:
        from pm_perm.preferences.anchored import pl_anchored_model

        return pl_anchored_model(train, prior_sigma=args.prior_sigma, tau=0.0,
                                 deviations=args.model)
    kwargs = {"components": args.components, "prior_sigma": args.prior_sigma}
    if args.model == "rank-one":
        kwargs["learn_positions"] = args.learn_positions
    if args.model == "top-k":
        kwargs["K"] = args.top_k
    if args.model == "full" and args.fit == "nuts":
        kwargs["parametrization"] = "auto"  # centred for many ballots per entry of W
    if args.fit == "map":
        kwargs.update(_type2_kwargs(args.model, args.learn_positions))
    return getattr(rmod, MODELS[args.model])(train, **kwargs)


def _type2_kwargs(model, learn_positions):
    """Builder arguments of a MAP fit whose hyperparameter ``fit_map_type2`` chooses by the
    Laplace evidence: the full and top-k models' deviation scale ``tau``; the rank-one model's
    position profile, a mix of the harmonic and linear ones (unless ``--learn-positions``)."""
    if model in ("full", "top-k"):
        return {"tau": 0.0}
    if model == "rank-one" and not learn_positions:
        return {"positions": 0.0}
    return {}


def _map_fitter(rm):
    """``fit_map_cv`` for the PL-anchored rank-one tilt (its ``tau`` by cross-validation, the
    final fit from the Plackett-Luce MAP: V6, "Small data, V5 and V6"; the Laplace evidence lost
    to Plackett-Luce on small data, "Small data, V4"), ``fit_map_type2`` for another model built
    with a type-II hyperparameter, else ``fit_map``."""
    import functools

    from pm_perm.preferences import fitting as rfit

    names = rm.model.named_vars
    if rm.family == ANCHORED and "b_raw" in names:
        return functools.partial(rfit.fit_map_cv, final_start="plackett-luce")
    type2 = "position_mix" in names or ("tau" in names
                                        and rm.model["tau"] not in rm.model.free_RVs)
    return rfit.fit_map_type2 if type2 else rfit.fit_map
