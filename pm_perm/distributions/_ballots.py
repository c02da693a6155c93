"""Ranking data with counts as one row per BALLOT: the observed value of a model-level ranking
variable given ``weights=counts`` (:class:`~pm_perm.PlackettLuce`,
:class:`~pm_perm.PartialRanking`).

``PlackettLuce("y", u, weights=counts, observed=orders)`` (distinct orders (n, M), counts (n,))
observes ``expand_counts(orders, counts)`` (:mod:`pm_perm.ops.ballots`), one row per ballot
(N = sum of the counts; rows of count 0 vanish). Its logp computes the log-probabilities of the
n distinct orders only and repeats them per ballot (:func:`per_ballot`), so

* ``pm.compute_log_likelihood`` has one entry per ballot: ``az.loo`` / ``az.compare`` are the
  per-ballot ones, with no extra step;
* the summed log-likelihood (``pm.find_MAP``, NUTS) is rewritten to ``sum(counts * log p)``
  and costs per distinct order;
* ``pm.sample_posterior_predictive`` draws one replicated ballot per observed ballot;
* with ``pm.Data`` orders and counts, a refit on new counts (``pm.set_data``) reuses the
  compiled functions.

``Dist.dist(weights=...)`` used directly with ``pm.logp(d, value)`` keeps its per-row meaning
(``weights * log p(row)``): only a model-level variable with ``observed`` is expanded.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import convert_dims
from pymc.model import modelcontext
from pymc.pytensorf import constant_fold
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.scalar.basic import Cast
from pytensor.tensor.elemwise import Elemwise

from pm_perm.ops.ballots import COUNTS_MSG, ExpandCounts, check_counts, expand_counts, repeat_rows

__all__ = ["ballot_arguments", "ballot_logp", "distinct_rows", "observed_ballots", "per_ballot"]


def _known(x):
    """NumPy value of ``x`` when known at build (array, constant, ``pm.Data``), else None."""
    if isinstance(x, SharedVariable):
        return np.asarray(x.get_value(borrow=True))
    if isinstance(x, Variable):
        try:
            (v,) = constant_fold([x], raise_not_constant=True)
        except Exception:  # a symbolic value: checked at run time
            return None
        return np.asarray(v)
    return np.asarray(x)


def observed_ballots(observed, weights):
    """The observed value of a ranking variable with counts: one row per ballot.

    Parameters
    ----------
    observed : array_like or TensorVariable, shape (n, M)
        Distinct orders (rank form), e.g. ``data.orders`` or a ``pm.Data``.
    weights : array_like or TensorVariable, shape (n,) or ()
        Their counts (non-negative integers; a scalar is the count of every row).

    Returns
    -------
    TensorVariable, shape (N, M)
        ``expand_counts(orders, counts)``, N = sum of the counts.

    Raises
    ------
    ValueError
        ``observed`` is not (n, M), ``weights`` not (n,) (or a scalar), or counts known at
        build are not finite non-negative integers (naming the first bad one).
    """
    orders = observed if isinstance(observed, Variable) else pt.as_tensor_variable(
        np.asarray(observed))
    if orders.type.ndim != 2:
        raise ValueError("with weights=counts, observed must be the distinct orders (n, M), one "
                         f"count per row; got observed of ndim {orders.type.ndim}")
    if orders.type.dtype in pt.type.int_dtypes:
        orders = pt.cast(orders, "int64")  # the variable's dtype: PyMC adds no cast on top
    counts = weights if isinstance(weights, Variable) else pt.as_tensor_variable(
        np.asarray(weights))
    if counts.type.ndim == 0:
        counts = pt.broadcast_to(counts, (orders.shape[0],))
    if counts.type.ndim != 1:
        raise ValueError("weights must be one count per observed order, shape (n,); got ndim "
                         f"{counts.type.ndim}")
    known = _known(weights)
    if known is not None and known.ndim == 1:
        rows = _known(orders.shape[0]) if orders.type.shape[0] is None else orders.type.shape[0]
        try:
            check_counts(known, None if rows is None else int(rows))
        except ValueError as err:
            raise ValueError(f"weights: {err}") from None
    return expand_counts(orders, counts)


def distinct_rows(value):
    """``(orders, counts)`` when ``value`` is an :func:`observed_ballots` expansion, else None.

    Integer casts on top of the expansion (PyMC casts observed data to its integer type and then
    to the variable's) are applied to the orders instead.
    """
    casts = []
    while (getattr(value, "owner", None) is not None and isinstance(value.owner.op, Elemwise)
           and isinstance(value.owner.op.scalar_op, Cast)
           and value.type.dtype in pt.type.int_dtypes
           and value.owner.inputs[0].type.dtype in pt.type.int_dtypes):
        casts.append(value.type.dtype)
        value = value.owner.inputs[0]
    owner = getattr(value, "owner", None)
    if owner is None or not isinstance(owner.op, ExpandCounts):
        return None
    orders, counts = owner.inputs
    for dtype in reversed(casts):
        orders = pt.cast(orders, dtype)
    return orders, counts


def per_ballot(ll_distinct, counts):
    """Per-ballot values from per-distinct-order ones: ``ll_distinct[i]`` repeated ``counts[i]``
    times (the counts checked: finite non-negative integers, else the parameter check fails).

    Summed, ``sum(per_ballot(ll, counts))`` is rewritten to ``sum(counts * ll)``
    (:mod:`pm_perm.ops.ballots`): it costs per distinct order.
    """
    c = pt.as_tensor_variable(counts)
    ok = pt.all(pt.isfinite(c) & pt.ge(c, 0) & pt.eq(c, pt.round(c))) \
        if c.type.dtype in pt.type.float_dtypes else pt.all(pt.ge(c, 0))
    return repeat_rows(check_parameters(ll_distinct, ok, msg=COUNTS_MSG), c)


def ballot_logp(value, logp_rows, shared):
    """The logp of ``value`` by ``logp_rows(rows)``: when ``value`` is an expansion
    (:func:`distinct_rows`) and the parameters are one for all rows (``shared``), computed on
    the distinct orders and repeated per ballot (:func:`per_ballot`); else on ``value``."""
    distinct = distinct_rows(value)
    if distinct is None or not shared:
        return logp_rows(value)
    orders, counts = distinct
    return per_ballot(logp_rows(orders), counts)


def _dim_length(model, dim):
    try:
        return int(_known(model.dim_lengths[dim]))
    except (TypeError, ValueError):
        return None


def ballot_arguments(dist_name, name, args, kwargs, observed):
    """``(args, kwargs, observed)`` of a model-level ranking variable, with counts expanded.

    With ``observed`` and ``weights`` (given by name or as the second positional argument), the
    observed value becomes :func:`observed_ballots` and the weights are dropped (each ballot has
    weight 1). Given ``dims``, the first must be a ballot dim: a new name (its length is set from
    the counts) or a dim of the model whose length is the number of ballots.
    """
    weights = kwargs.get("weights", args[1] if len(args) > 1 else None)
    if observed is None or weights is None:
        return args, kwargs, observed
    args, kwargs = list(args), dict(kwargs)
    if len(args) > 1:
        args[1] = None
    kwargs.pop("weights", None)
    value = observed_ballots(observed, weights)
    dims = kwargs.get("dims")
    if dims is not None and kwargs.get("shape") is None and kwargs.get("size") is None:
        dims = convert_dims(dims)
        model = modelcontext(None)
        n_ballots = _known(pt.sum(value.owner.inputs[1]))
        first = dims[0]
        length = _dim_length(model, first) if first in model.dim_lengths else None
        if length is not None and n_ballots is not None and length != int(n_ballots):
            rest = ", ".join(repr(d) for d in dims[1:])
            raise ValueError(
                f"{dist_name} {name!r}: with weights=counts the observed variable has one row per "
                f"BALLOT ({int(n_ballots)} = the sum of the counts), but its first dim {first!r} "
                f"has length {length} (the distinct orders?). Name a ballot dim instead, e.g. "
                f"dims=('ballot', {rest}) (a new dim: its length is set from the counts), or "
                "leave dims out")
        kwargs["shape"] = tuple(value.shape)
    return args, kwargs, value
