"""Clear errors for observed data whose batch shape does not match the parameters'."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.pytensorf import constant_fold
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable

from pm_perm.kernels.rank_form import validate_orders

__all__ = [
    "check_observed_batch",
    "check_observed_orders",
    "observed_utility_rows",
    "refuse_empty",
    "static_last_dim",
]


def _static_shape(x):
    if x is None:
        return None
    if not isinstance(x, Variable):
        return np.shape(x)
    shape = constant_fold([pt.as_tensor_variable(x).shape], raise_not_constant=False)[0]
    if isinstance(shape, np.ndarray) and shape.dtype.kind in "iu":
        return tuple(int(s) for s in shape)
    return None


def refuse_empty(dist_name, name, x, core_ndim):
    """Raise ``ValueError`` when the tensor ``x`` (a parameter of core shape ``(M,)`` or
    ``(M, M)``: ``core_ndim`` 1 or 2) has a static M of 0: no item to rank. An M known only at
    run time is checked by the logp (a parameter check) and the draws."""
    if 0 in x.type.shape[x.type.ndim - core_ndim:]:
        core = "(..., M)" if core_ndim == 1 else "(..., M, M)"
        raise ValueError(f"{dist_name}: {name} must have shape {core} with M >= 1 (at least one "
                         f"item); got shape {x.type.shape}")


def static_last_dim(x):
    """The last dimension of parameter ``x`` when it is known before run time (a literal, or a
    shape PyTensor can constant-fold), else ``None`` (also for ``x=None``)."""
    if x is None:
        return None
    (n,) = constant_fold([pt.as_tensor_variable(x).shape[-1]], raise_not_constant=False)
    return int(n) if isinstance(n, np.ndarray | np.integer | int) else None


def check_observed_batch(dist_name, observed, params):
    """Raise ``ValueError`` when a parameter's batch shape cannot broadcast to the observed
    batch shape (PyMC would otherwise fail later with an Elemwise shape error).

    ``params``: list of ``(name, value, core_ndim)``; the observed core has one dimension.
    Shapes that are only known at run time are not checked.
    """
    if isinstance(observed, SharedVariable):
        observed = observed.get_value(borrow=True)
    obs_shape = _static_shape(observed)
    if obs_shape is None or len(obs_shape) < 1:
        return
    obs_batch = tuple(obs_shape[:-1])
    for name, value, core_ndim in params:
        shape = _static_shape(value)
        if shape is None or len(shape) < core_ndim:
            continue
        batch = tuple(shape[: len(shape) - core_ndim])
        try:
            ok = np.broadcast_shapes(obs_batch, batch) == obs_batch
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{dist_name}: observed has shape {tuple(obs_shape)} (batch shape {obs_batch}) "
                f"but {name} has shape {tuple(shape)} (batch shape {batch}); expected {name} "
                f"with a batch shape that broadcasts to {obs_batch}, i.e. one {name} per "
                "observation or one shared by all"
            )


def check_observed_orders(dist_name, observed, check_values, param, core_ndim, args, kwargs):
    """The build-time checks of the observed rows of a ranking distribution, before PyMC casts
    them to int64: ``check_values(observed, M)`` (M: the last dimension of the first parameter
    when known before run time), then :func:`check_observed_batch` against that parameter
    (``param``, of core dimensions ``core_ndim``, given by name or first) and ``weights``.

    ``args`` and ``kwargs`` are those of the distribution's ``__new__``; ``observed=None`` is
    not checked.
    """
    if observed is None:
        return
    first = kwargs.get(param, args[0] if args else None)
    check_values(observed, static_last_dim(first))
    params = [(param, first, core_ndim), ("weights", kwargs.get("weights"), 0)]
    check_observed_batch(dist_name, observed, params)


def observed_utility_rows(observed, M):
    """The observed orders of a distribution on utilities (M,), checked at model build: rank
    form (:func:`pm_perm.kernels.rank_form.validate_orders`, naming the first bad row), no NaN,
    M columns (``M`` None: any). Returns the validated rows (n, M), or ``None`` when the value is
    not known at build (a symbolic or object array)."""
    if isinstance(observed, SharedVariable):
        observed = observed.get_value(borrow=True)
    if observed is None or isinstance(observed, pt.Variable):
        return None
    arr = np.asarray(observed)
    if arr.dtype == object:
        return None
    if arr.ndim == 0:
        raise ValueError("observed orders must have shape (..., M); got a scalar")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError("observed orders contain NaN; encode an unranked item as -1 (rank form)")
    m = arr.shape[-1] if M is None else M
    if arr.shape[-1] != m:
        raise ValueError(f"observed orders have length {arr.shape[-1]} but there are {m} "
                         "utilities")
    return validate_orders(arr.reshape(-1, m), m, name="observed")
