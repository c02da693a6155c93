"""A compiled step for the Mallows model with a latent consensus: ``alpha`` and ``rho`` together.

:class:`MallowsConsensusGibbs` samples BayesMallows' model as ``pm.sample`` sees it, a
``Mallows(rho, alpha, distance)`` likelihood of observed rankings, a latent consensus ``rho`` =
``PermutationExpFamily`` with constant logits (zero: uniform) and a scalar ``alpha`` with an
Exponential, Gamma or HalfNormal prior of constant parameters (PyMC's default log transform).
Each draw makes ``n_sweeps`` rounds of one slice update of ``log(alpha)`` and ``n_moves``
leap-and-shift proposals of ``rho``, all in one compiled call
(:func:`pm_perm.kernels.mallows_gibbs.consensus_sweeps`): a proposal is scored by the change of
``sum_a d(R_a, rho)`` over the shifted items, not by the model's log-density, and ``log
Z_n(alpha)`` comes from the exact distance table built once. Distances: footrule, spearman (n <=
14, its table), hamming, kendall.

``pm.sample`` assigns it automatically (its competence is IDEAL for exactly those two variables
of a model of that form, and it is registered first in ``pymc.step_methods.STEP_METHODS``)
instead of NUTS for alpha and :class:`~pm_perm.inference.step_methods.PermutationLeapShift` for
rho. Any other form falls back to those: ``rho`` or ``alpha`` used by another variable or a
Potential, another prior, a batched ``rho``, cayley or ulam, several consensus models in one
model, or ``pm.sample`` called outside the model's ``with`` block (the competence needs the model
context). Pass ``step=`` to choose explicitly; :func:`mallows_consensus_spec` says why a model is
not of the form.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
from pymc.logprob.transforms import LogTransform
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors, graph_inputs
from pytensor.tensor.elemwise import DimShuffle
from pytensor.tensor.random.basic import ExponentialRV, GammaRV, HalfNormalRV
from pytensor.tensor.sharedvar import TensorSharedVariable

from pm_perm.kernels._checks import as_count
from pm_perm.kernels.leap_shift import default_leap_size
from pm_perm.kernels.mallows import SPEARMAN_TABLE_MAX_N, log_distance_counts
from pm_perm.kernels.mallows_gibbs import (
    CONSENSUS_KINDS,
    bitgen_fields,
    consensus_cost,
    consensus_sweeps,
)

__all__ = ["MallowsConsensusGibbs", "MallowsConsensusSpec", "mallows_consensus_spec"]

_PRIOR_OPS = (ExponentialRV, GammaRV, HalfNormalRV)
_RHO_OPS = ("PermutationExpFamilyRV", "PermutationExpFamilyGlynnRV",
            "PermutationExpFamilyBetheRV")


@dataclass(frozen=True)
class MallowsConsensusSpec:
    """What :class:`MallowsConsensusGibbs` reads from a model (see
    :func:`mallows_consensus_spec`)."""

    rho_rv: object
    alpha_rv: object
    distance: str
    rankings: np.ndarray  # (N, n) int64, rank form
    logits: np.ndarray  # (n, n): rho's prior exp(sum_i W[i, rho_i])
    prior: np.ndarray  # (a, b, c): log p(alpha) = a log(alpha) - b alpha - c alpha^2 + const


def _constant(x, what, data=False):
    """The value of ``x`` if its graph has constant inputs only (with ``data``, also ``pm.Data``
    containers, read now: e.g. observed rankings cast by the distribution), else ``ValueError``."""
    if isinstance(x, Constant):
        return np.asarray(x.data)
    if data and isinstance(x, TensorSharedVariable):
        return np.asarray(x.get_value())
    roots = (Constant, TensorSharedVariable) if data else Constant
    if not all(isinstance(v, roots) for v in graph_inputs([x])):
        raise ValueError(f"{what} is not a constant")
    # a small constant graph (e.g. Exponential's scale 1 / lam): Python thunks, no rewrites, no
    # compilation (x.eval() compiles with the default mode: about 0.15 s each)
    return np.asarray(pytensor.function([], x, mode=Mode(linker="py", optimizer=None))())


def _observed_value(model, obs):
    """The observed value now: a constant, a ``pm.Data`` container, or an expression of those
    alone (e.g. ``pm.Data`` cast to int64 by the distribution), evaluated."""
    return _constant(model.rvs_to_values[obs], f"the observed value of {obs.name}", data=True)


def _unexpanded(x):
    """``x`` without the leading broadcast dimensions that a batched RandomVariable adds."""
    while x.owner is not None and isinstance(x.owner.op, DimShuffle) \
            and x.owner.op.is_left_expand_dims:
        x = x.owner.inputs[0]
    return x


def _is_op(var, names):
    op = getattr(getattr(var, "owner", None), "op", None)
    return (op is not None and type(op).__name__ in names
            and type(op).__module__.startswith("pm_perm.distributions"))


def _prior(alpha_rv):
    """``(a, b, c)`` of ``alpha``'s prior, or ``ValueError``."""
    op = alpha_rv.owner.op
    params = alpha_rv.owner.op.dist_params(alpha_rv.owner)
    if isinstance(op, ExponentialRV):
        (scale,) = params
        return np.array([0.0, 1.0 / float(_constant(scale, "alpha's prior scale")), 0.0])
    if isinstance(op, GammaRV):
        shape, scale = (float(_constant(p, "alpha's prior parameters")) for p in params)
        return np.array([shape - 1.0, 1.0 / scale, 0.0])
    loc, scale = (float(_constant(p, "alpha's prior parameters")) for p in params)
    if loc != 0.0:
        raise ValueError("alpha's HalfNormal prior has a non-zero loc")
    return np.array([0.0, 0.0, 0.5 / scale**2])


def mallows_consensus_spec(model=None) -> MallowsConsensusSpec:
    """Recognise a Mallows model with a latent consensus that :class:`MallowsConsensusGibbs`
    can sample exactly.

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model of the ``with`` block.

    Returns
    -------
    MallowsConsensusSpec

    Raises
    ------
    ValueError
        Naming what does not fit: no (or more than one) ``(rho, alpha)`` pair of free variables
        shared by the observed ``Mallows`` variables; rho not a ``PermutationExpFamily`` of one
        permutation with constant logits; alpha not a scalar Exponential, Gamma or HalfNormal
        (loc 0) with constant parameters and PyMC's log transform; a distance without a compiled
        update (cayley, ulam; spearman beyond n = 14); rho or alpha used by any other variable
        or Potential; observed values that are not constants (or ``pm.Data``). The step methods
        that ``pm.sample`` assigns otherwise (NUTS, ``PermutationLeapShift``) sample such
        models.
    """
    model = pm.modelcontext(model)
    free = set(model.free_RVs)
    pairs = {}
    for obs in model.observed_RVs:
        if _is_op(obs, ("MallowsRV",)):
            rho, alpha = map(_unexpanded, obs.owner.op.dist_params(obs.owner))
            if rho in free and alpha in free:
                pairs.setdefault((rho, alpha), []).append(obs)
    if len(pairs) != 1:
        raise ValueError(f"the model has {len(pairs)} pairs (rho, alpha) of free variables that "
                         f"are the parameters of observed Mallows variables; "
                         f"MallowsConsensusGibbs needs exactly one")
    ((rho_rv, alpha_rv), obs_rvs), = pairs.items()
    if not _is_op(rho_rv, _RHO_OPS) or rho_rv.type.ndim != 1:
        raise ValueError(f"{rho_rv.name} is not a PermutationExpFamily of one permutation")
    n = rho_rv.type.shape[-1]
    (logits,) = rho_rv.owner.op.dist_params(rho_rv.owner)
    logits = _constant(logits, f"the logits of {rho_rv.name}").astype(np.float64)
    if logits.shape != (n, n) or np.isnan(logits).any() or (logits == np.inf).any():
        raise ValueError(f"the logits of {rho_rv.name} are not an (n, n) matrix without NaN "
                         f"or +inf")
    if not isinstance(alpha_rv.owner.op, _PRIOR_OPS) or alpha_rv.type.ndim != 0:
        raise ValueError(f"{alpha_rv.name} is not a scalar with an Exponential, Gamma or "
                         f"HalfNormal prior")
    if not isinstance(model.rvs_to_transforms.get(alpha_rv), LogTransform):
        raise ValueError(f"{alpha_rv.name} does not have PyMC's default log transform")
    prior = _prior(alpha_rv)
    distances = {obs.owner.op.distance for obs in obs_rvs}
    distance = distances.pop()
    if distances or distance not in CONSENSUS_KINDS:
        raise ValueError(f"the Mallows distance is not one of {sorted(CONSENSUS_KINDS)} (the "
                         f"same for every observed variable)")
    if distance == "spearman" and n > SPEARMAN_TABLE_MAX_N:
        raise ValueError(f"spearman at n = {n} has no distance table (n <= "
                         f"{SPEARMAN_TABLE_MAX_N})")
    ours = {rho_rv, alpha_rv, *obs_rvs}
    for var in [*model.free_RVs, *model.observed_RVs, *model.potentials]:
        if var not in ours and {rho_rv, alpha_rv} & set(ancestors([var])):
            raise ValueError(f"{var.name} depends on {rho_rv.name} or {alpha_rv.name}")
    rankings = []
    for obs in obs_rvs:
        value = _observed_value(model, obs)
        if value.shape[-1:] != (n,) or not np.array_equal(value, np.round(value)):
            raise ValueError(f"the observed value of {obs.name} is not integer rankings of "
                             f"{n} items")
        rankings.append(value.reshape(-1, n).astype(np.int64))
    return MallowsConsensusSpec(rho_rv, alpha_rv, distance, np.concatenate(rankings), logits,
                                prior)


_SPEC_CACHE: dict[int, tuple] = {}


def _cached_spec(model):
    """:func:`mallows_consensus_spec` or None, cached per model and its number of variables."""
    key = id(model)
    size = (len(model.named_vars), len(model.potentials))
    hit = _SPEC_CACHE.get(key)
    if hit is not None and hit[0]() is model and hit[1] == size:
        return hit[2]
    try:
        spec = mallows_consensus_spec(model)
    except ValueError:
        spec = None
    if len(_SPEC_CACHE) > 64:
        _SPEC_CACHE.clear()
    _SPEC_CACHE[key] = (weakref.ref(model), size, spec)
    return spec


@dataclass_state
class MallowsConsensusGibbsState(StepMethodState):
    n_sweeps: int
    n_moves: int | None
    leap_size: int | None
    slice_width: float


class MallowsConsensusGibbs(BlockedStep):
    """Compiled Gibbs sweeps over ``alpha`` (slice) and the latent consensus ``rho``
    (leap-and-shift) of a Mallows model.

    Parameters
    ----------
    vars : list
        ``rho``, ``alpha`` or both (as value variables or random variables) of a model that
        :func:`mallows_consensus_spec` recognises; a variable not given is read from the point
        and kept.
    n_sweeps : int, default 1
        Rounds of (alpha update, ``n_moves`` rho proposals) per draw (an integer >= 1).
    n_moves : int, optional
        Leap-and-shift proposals of rho per round (an integer >= 1); default n.
    leap_size : int, optional
        The largest rank change of a leap (>= 1); default ``max(1, n // 5)`` (BayesMallows').
    slice_width : float, default 1.0
        Width of the slice sampler's steps on ``log(alpha)`` (> 0; any width is exact, a width
        near the posterior's spread is fastest).
    model, rng, initial_point, compile_kwargs, blocked
        As for PyMC's other step methods (``compile_kwargs`` is unused: nothing is compiled
        per model).

    Raises
    ------
    ValueError
        When the model is not of the form (the message of :func:`mallows_consensus_spec`), a
        variable is neither its rho nor its alpha, a count is not an integer >= 1,
        ``slice_width`` is not a positive number; at a step, when rho is not a permutation.

    Notes
    -----
    Exact: every update leaves the posterior invariant (Metropolis-Hastings with the
    leap-and-shift correction for rho, slice sampling for alpha). Cost per draw: about
    ``n_sweeps * (n_moves * L + 8 D)`` operations (``D`` distance values), no model evaluation.
    Stats: ``accept_rate`` (of the draw's leaps; NaN when rho is not updated).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> R = np.array([[0, 1, 2, 3], [1, 0, 2, 3], [0, 2, 1, 3]])
    >>> with pm.Model():
    ...     rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((4, 4)))
    ...     alpha = pm.Exponential("alpha", 0.001)
    ...     _ = pm_perm.Mallows("R", rho=rho, alpha=alpha, observed=R)
    ...     step = MallowsConsensusGibbs([rho, alpha], n_sweeps=2)
    >>> step.n_sweeps, step.distance
    (2, 'footrule')
    """

    name = "mallows_consensus_gibbs"
    stats_dtypes_shapes = {"accept_rate": (float, [])}
    _state_class = MallowsConsensusGibbsState

    def __init__(self, vars, *, n_sweeps=1, n_moves=None, leap_size=None, slice_width=1.0,
                 model=None, rng=None, initial_point=None, compile_kwargs=None, blocked=True):
        model = pm.modelcontext(model)
        self.n_sweeps = as_count(n_sweeps, "n_sweeps", 1)
        self.n_moves = None if n_moves is None else as_count(n_moves, "n_moves", 1)
        self.leap_size = None if leap_size is None else as_count(leap_size, "leap_size", 1)
        try:
            ok = float(slice_width) > 0 and np.isfinite(float(slice_width))
        except (TypeError, ValueError):
            ok = False
        if not ok or isinstance(slice_width, str | bool):
            raise ValueError(f"slice_width must be a positive number (the slice sampler's step "
                             f"on log(alpha), e.g. 1.0); got {slice_width!r}")
        self.slice_width = float(slice_width)
        try:
            spec = mallows_consensus_spec(model)
        except ValueError as err:
            raise ValueError(f"MallowsConsensusGibbs: {err}; sample this model with pm.sample's "
                             f"default steps (NUTS for alpha, PermutationLeapShift for rho)") \
                from None
        self.vars = get_value_vars_from_user_vars(vars, model)
        rho_value = model.rvs_to_values[spec.rho_rv]
        alpha_value = model.rvs_to_values[spec.alpha_rv]
        for v in self.vars:
            if v is not rho_value and v is not alpha_value:
                raise ValueError(f"MallowsConsensusGibbs samples {rho_value.name} and "
                                 f"{alpha_value.name} only; {v.name} is neither: assign it "
                                 f"another step method")
        self.rho_name, self.alpha_name = rho_value.name, alpha_value.name
        self.update_rho = any(v is rho_value for v in self.vars)
        self.update_alpha = any(v is alpha_value for v in self.vars)
        self.distance = spec.distance
        n = spec.rankings.shape[1]
        self._kind = CONSENSUS_KINDS[spec.distance]
        self._cost = consensus_cost(spec.rankings, spec.distance)
        self._logits = np.ascontiguousarray(spec.logits)
        self._d, self._log_counts = log_distance_counts(spec.distance, n)
        self._n_obs = float(spec.rankings.shape[0])
        self._prior = spec.prior
        self._L = self.leap_size if self.leap_size is not None else default_leap_size(n)
        self._moves = self.n_moves if self.n_moves is not None else n
        self.blocked = blocked
        self.rng = get_random_generator(rng)
        self._bitgen_rng = None
        if initial_point is not None and self.rho_name in initial_point:
            self._check(np.asarray(initial_point[self.rho_name]))

    def _check(self, rho):
        n = self._cost.shape[0]
        if rho.shape != (n,) or not np.array_equal(np.sort(rho), np.arange(n)):
            raise ValueError(f"MallowsConsensusGibbs: the value of {self.rho_name} is "
                             f"{rho.tolist()}, which is not a permutation of 0..{n - 1}; start "
                             f"from a permutation (check initvals for {self.rho_name})")

    def step(self, point):
        rho = np.array(point[self.rho_name], dtype=np.int64)
        if self._bitgen_rng is not self.rng:  # a new chain's generator (setup_chain)
            self._bitgen, self._bitgen_rng = bitgen_fields(self.rng), self.rng
        u, acc, status = consensus_sweeps(
            self._bitgen, rho, float(point[self.alpha_name]), self.n_sweeps, self._moves, self._L,
            self._kind, self._cost, self._logits, self._d, self._log_counts, self._n_obs,
            self._prior, self.slice_width, self.update_alpha, self.update_rho)
        if status:
            self._check(rho)
        new = dict(point)
        new[self.rho_name] = rho.astype(point[self.rho_name].dtype, copy=False)
        new[self.alpha_name] = np.asarray(u, dtype=point[self.alpha_name].dtype)
        rate = acc / (self.n_sweeps * self._moves) if self.update_rho else np.nan
        return new, [{"accept_rate": rate}]

    def __getstate__(self):
        # the bit generator's pointers are of this process and this generator: never pickled
        # (pm.sample's worker processes, copies of the step), rebuilt at the next step
        return {**self.__dict__, "_bitgen": None, "_bitgen_rng": None}

    def reset_tuning(self):
        return

    @staticmethod
    def competence(var, has_grad=False):
        """IDEAL for the ``rho`` and ``alpha`` of a model of the form (see
        :func:`mallows_consensus_spec`) in the current model context, INCOMPATIBLE otherwise."""
        try:
            model = pm.modelcontext(None)
        except TypeError:
            return Competence.INCOMPATIBLE
        spec = _cached_spec(model)
        if spec is not None and (var is spec.rho_rv or var is spec.alpha_rv):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE
