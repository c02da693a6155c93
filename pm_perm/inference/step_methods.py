"""PyMC step methods for LATENT permutation variables (unobserved correspondences in a model).

:class:`PermutationSwapMetropolis` is a Metropolis-within-Gibbs sampler: for each permutation
(each batch row of each assigned variable) it proposes ``n_swaps`` transpositions of two
positions, accepting each with the Metropolis ratio of the FULL model log-density (so the latent
permutation may enter the likelihood in any way). Proposals are symmetric; the chain is
irreducible over all permutations with finite density (with forbidden ``-inf`` edges it may be
reducible, as for the kernel in :mod:`pm_perm.kernels.swap_mcmc`). Cost: one model-logp
evaluation per proposal. Approximate (MCMC), any M; mixing slows as the posterior sharpens.

:class:`PermutationLeapShift` mixes those swaps with the leap-and-shift move of Vitelli et al.
(2018) on the values read as ranks (an item's rank moves by at most ``L`` and the ranks in
between shift by one), which moves a latent consensus ranking much faster than swaps when the
posterior is concentrated (a swap of two distant ranks is then almost always rejected). Its
proposal is asymmetric near the ends of the rank range; the Metropolis-Hastings ratio carries the
exact correction (:func:`pm_perm.kernels.leap_shift.leap_shift_log_hastings`).

Importing this module registers both in ``pymc.step_methods.STEP_METHODS`` (the registry that
``pm.sample`` consults; see ``pymc.sampling.mcmc.assign_step_methods``), the leap-and-shift step
first, so ``pm.sample`` assigns :class:`PermutationLeapShift` (swaps and leaps) to
permutation-valued random variables; pass ``step=PermutationSwapMetropolis([...])`` for swaps
alone. :mod:`pm_perm.distributions` imports this module, so every model with a pm_perm
distribution has them; a model whose only permutation variable is your own
``support_is_permutation`` RandomVariable needs ``import pm_perm.inference.step_methods``. A
random variable is recognised as permutation-valued when its Op has
``support_is_permutation = True`` or is a 1-d-support, ``(m,m)``-parameter RandomVariable
defined in ``pm_perm.distributions``.

References
----------
V. Vitelli, O. Sorensen, M. Crispino, A. Frigessi, E. Arjas, "Probabilistic preference learning
with the Mallows rank model", JMLR 18 (2018), section 2.4 (leap-and-shift).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.step_methods import STEP_METHODS
from pymc.step_methods.arraystep import ArrayStep
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_value_vars_from_user_vars
from pytensor.tensor.random.op import RandomVariable

from pm_perm.kernels._checks import as_count, first_non_permutation
from pm_perm.kernels.leap_shift import (
    default_leap_size,
    leap_in_place,
    leap_shift_log_hastings,
    leap_window,
)

__all__ = [
    "PermutationLeapShift",
    "PermutationSwapMetropolis",
    "is_permutation_rv",
    "register_step_method",
]


def is_permutation_rv(var) -> bool:
    """True if ``var`` is the output of a permutation-valued RandomVariable of pm_perm."""
    op = getattr(getattr(var, "owner", None), "op", None)
    if op is None:
        return False
    if getattr(op, "support_is_permutation", False):
        return True
    return (
        isinstance(op, RandomVariable)
        and type(op).__module__.startswith("pm_perm.distributions")
        and op.ndim_supp == 1
        and list(op.ndims_params) == [2]
    )


def _check_permutation(name: str, value: np.ndarray, step: str = "PermutationSwapMetropolis"):
    """Raise ``ValueError`` unless every row (last axis) of ``value`` is a permutation of
    ``0..M-1``; the message names the step method ``step``, the variable ``name``, the first bad
    row and its value."""
    if value.ndim == 0:
        raise ValueError(
            f"{step}: {name} is a scalar; a permutation variable must have at "
            "least one dimension (its last axis holds the permutation)"
        )
    M = value.shape[-1]
    idx = first_non_permutation(value)
    if idx is not None:
        where = f"{name}[{', '.join(map(str, idx))}]" if idx else name
        raise ValueError(
            f"{step}: the value of {where} is {value[idx].tolist()}, which is "
            f"not a permutation of 0..{M - 1}; start from a permutation of 0..M-1 in every row "
            f"(check initvals for {name})"
        )


def _permutation_value_vars(step: str, vars, model, initial_point):
    """The value variables of ``vars``, checked: integer, permutation-valued, and a permutation
    in ``initial_point`` (when given); errors name the step method ``step``."""
    vars = get_value_vars_from_user_vars(vars, model)
    for v in vars:
        if "int" not in v.dtype:
            raise ValueError(
                f"{step} needs integer permutation variables; {v.name} has dtype {v.dtype}"
            )
        if not is_permutation_rv(model.values_to_rvs[v]):
            raise ValueError(
                f"{step} applies only to permutation-valued random variables (pm_perm's "
                f"permutation distributions, or a RandomVariable whose Op has "
                f"support_is_permutation = True); {v.name} is not one: assign it another step "
                f"method (e.g. pm.Metropolis)"
            )
        if initial_point is not None and v.name in initial_point:
            _check_permutation(v.name, np.asarray(initial_point[v.name]), step)
    return vars


def _start(step: str, apoint: RaveledVars, logp):
    """A copy of ``apoint`` and its model log-density, after checking that every variable holds
    permutations and that the density is finite (errors name the step method ``step``)."""
    q = RaveledVars(np.copy(apoint.data), apoint.point_map_info)
    offset = 0
    for name, shape, size, _dtype in apoint.point_map_info:
        _check_permutation(name, q.data[offset:offset + size].reshape(shape), step)
        offset += size
    logp_curr = logp(q)
    if not np.isfinite(logp_curr):
        raise ValueError(
            f"{step}: the model log-density is {logp_curr} at the start point of "
            f"{', '.join(info[0] for info in apoint.point_map_info)}; the chain cannot move from "
            f"there: start from values of finite density (initvals)"
        )
    return q, logp_curr


class _PermutationStep(ArrayStep):
    """What the permutation step methods share: checked variables, the model's compiled
    log-density, no tuning, and their competence."""

    def _setup(self, vars, model, initial_point, compile_kwargs, blocked, rng):
        model = pm.modelcontext(model)
        vars = _permutation_value_vars(type(self).__name__, vars, model, initial_point)
        logp = model.compile_logp(**(compile_kwargs or {}))
        ArrayStep.__init__(self, vars, [logp], blocked=blocked, rng=rng)

    def reset_tuning(self):
        return

    @staticmethod
    def competence(var, has_grad=False):
        """IDEAL for permutation-valued pm_perm random variables, INCOMPATIBLE otherwise."""
        return Competence.IDEAL if is_permutation_rv(var) else Competence.INCOMPATIBLE


@dataclass_state
class PermutationSwapMetropolisState(StepMethodState):
    n_swaps: int | None


class PermutationSwapMetropolis(_PermutationStep):
    """Transposition Metropolis-within-Gibbs for latent permutation variables.

    Parameters
    ----------
    vars : list
        Permutation-valued variables (value ``y[..., i]`` = column matched to row ``i``).
    n_swaps : int, optional
        Swap proposals per permutation per step (an integer >= 1); default M (one sweep).
    model, rng, initial_point, compile_kwargs, blocked
        As for PyMC's other step methods.

    Raises
    ------
    ValueError
        At construction, for a variable that is not a permutation-valued random variable (see
        :func:`is_permutation_rv`) or not integer, for ``n_swaps`` that is not an integer
        >= 1, and for an ``initial_point`` whose value of a variable is not a permutation. At a
        step, when the value of a variable is not a permutation of ``0..M-1`` in every row or
        the model log-density is not finite (an invalid start point, e.g. from ``initvals``).

    Notes
    -----
    Stats: ``accept_rate`` (fraction of accepted swaps in the step). The initial point must be a
    valid permutation with finite model density: a swap proposal keeps a permutation a
    permutation, and a chain started at density zero would never move, so both are refused.
    """

    name = "permutation_swap_metropolis"
    stats_dtypes_shapes = {"accept_rate": (float, [])}
    _state_class = PermutationSwapMetropolisState

    def __init__(
        self,
        vars,
        *,
        n_swaps=None,
        model=None,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        blocked=True,
    ):
        self.n_swaps = None if n_swaps is None else as_count(n_swaps, "n_swaps", 1)
        self._setup(vars, model, initial_point, compile_kwargs, blocked, rng)

    def astep(self, apoint: RaveledVars, *args):
        logp = args[0]
        q, logp_curr = _start(type(self).__name__, apoint, logp)
        n_prop = n_acc = 0
        offset = 0
        for _name, shape, size, _dtype in apoint.point_map_info:
            M = shape[-1]
            rows = size // M if M else 0
            n_swaps = self.n_swaps if self.n_swaps is not None else M
            if M >= 2:
                for r in range(rows):
                    base = offset + r * M
                    for _ in range(n_swaps):
                        i = int(self.rng.integers(M))
                        j = int(self.rng.integers(M - 1))
                        j += j >= i
                        a, b = base + i, base + j
                        q.data[a], q.data[b] = q.data[b], q.data[a]
                        logp_prop = logp(q)
                        n_prop += 1
                        if np.log(self.rng.random()) < logp_prop - logp_curr:
                            logp_curr = logp_prop
                            n_acc += 1
                        else:
                            q.data[a], q.data[b] = q.data[b], q.data[a]
            offset += size
        return q, [{"accept_rate": n_acc / n_prop if n_prop else 0.0}]


@dataclass_state
class PermutationLeapShiftState(StepMethodState):
    leap_size: int | None
    n_moves: int | None
    swap_prob: float


class PermutationLeapShift(_PermutationStep):
    """Leap-and-shift and swap Metropolis-Hastings-within-Gibbs for latent permutations.

    Each step makes ``n_moves`` proposals per permutation (each batch row of each variable):
    with probability ``swap_prob`` a swap of two positions (as :class:`PermutationSwapMetropolis`),
    else a leap-and-shift on the values read as ranks (Vitelli et al. 2018: a uniformly chosen
    item's rank ``r`` moves to a uniformly chosen rank within ``leap_size`` of ``r``, and the
    ranks in between shift by one: :mod:`pm_perm.kernels.leap_shift`), accepted with the
    Metropolis-Hastings ratio of the FULL model log-density and the proposal's exact correction.
    Each kind of move leaves the posterior invariant, so their random mixture does; swaps make
    the chain irreducible wherever the swap step is (leaps of one rank alone, too).

    Parameters
    ----------
    vars : list
        Permutation-valued variables (value ``y[..., i]``: for a ranking, the rank of item ``i``).
    leap_size : int, optional
        The largest rank change of a leap, ``L >= 1``; default ``max(1, M // 5)`` (BayesMallows'
        default) for each variable's ``M``.
    n_moves : int, optional
        Proposals per permutation per step (an integer >= 1); default M.
    swap_prob : float, default 0.5
        Probability that a proposal is a swap rather than a leap, in ``[0, 1]`` (0: leap-and-shift
        alone, as BayesMallows).
    model, rng, initial_point, compile_kwargs, blocked
        As for PyMC's other step methods.

    Raises
    ------
    ValueError
        As :class:`PermutationSwapMetropolis` (a variable that is not a permutation-valued
        integer random variable, a start that is not a permutation or has zero density), and for
        ``leap_size`` or ``n_moves`` that is not an integer >= 1 or ``swap_prob`` outside
        ``[0, 1]``.

    Notes
    -----
    Cost: one model-logp evaluation per proposal, as the swap step. Stats: ``accept_rate``
    (accepted fraction of all proposals of the step) and ``leap_accept_rate`` (of its leaps;
    NaN when it made none). ``pm.sample`` assigns this step to permutation-valued variables.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pm_perm
    >>> from pm_perm.inference.step_methods import PermutationLeapShift
    >>> with pm.Model():
    ...     rho = pm_perm.PermutationExpFamily("rho", logits=np.zeros((6, 6)))
    ...     step = PermutationLeapShift([rho], leap_size=2, swap_prob=0.0)
    >>> step.leap_size, step.swap_prob
    (2, 0.0)
    """

    name = "permutation_leap_shift"
    stats_dtypes_shapes = {"accept_rate": (float, []), "leap_accept_rate": (float, [])}
    _state_class = PermutationLeapShiftState

    def __init__(
        self,
        vars,
        *,
        leap_size=None,
        n_moves=None,
        swap_prob=0.5,
        model=None,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        blocked=True,
    ):
        self.leap_size = None if leap_size is None else as_count(leap_size, "leap_size", 1)
        self.n_moves = None if n_moves is None else as_count(n_moves, "n_moves", 1)
        try:
            ok = 0.0 <= float(swap_prob) <= 1.0 and not isinstance(swap_prob, str | bool)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"swap_prob must be a probability in [0, 1]; got {swap_prob!r} "
                             f"(0: leap-and-shift moves only, 1: swaps only)")
        self.swap_prob = float(swap_prob)
        self._setup(vars, model, initial_point, compile_kwargs, blocked, rng)

    def astep(self, apoint: RaveledVars, *args):
        logp = args[0]
        q, logp_curr = _start(type(self).__name__, apoint, logp)
        data, rng = q.data, self.rng
        n_prop = n_acc = n_leap = n_leap_acc = 0
        offset = 0
        for _name, shape, size, _dtype in apoint.point_map_info:
            M = shape[-1]
            rows = size // M if M else 0
            L = self.leap_size if self.leap_size is not None else default_leap_size(M)
            n_moves = self.n_moves if self.n_moves is not None else M
            for r in range(rows if M >= 2 else 0):
                row = data[offset + r * M: offset + (r + 1) * M]
                for _ in range(n_moves):
                    is_swap = rng.random() < self.swap_prob
                    if is_swap:
                        i = int(rng.integers(M))
                        j = int(rng.integers(M - 1))
                        j += j >= i
                        row[i], row[j] = row[j], row[i]
                        log_hastings = 0.0
                    else:
                        item = int(rng.integers(M))
                        old = int(row[item])
                        new = max(0, old - L) + int(rng.integers(leap_window(old, M, L)))
                        new += new >= old
                        leap_in_place(row, item, new)
                        log_hastings = leap_shift_log_hastings(old, new, M, L)
                        n_leap += 1
                    logp_prop = logp(q)
                    n_prop += 1
                    if np.log(rng.random()) < logp_prop - logp_curr + log_hastings:
                        logp_curr = logp_prop
                        n_acc += 1
                        n_leap_acc += not is_swap
                    elif is_swap:
                        row[i], row[j] = row[j], row[i]
                    else:
                        leap_in_place(row, item, old)
            offset += size
        return q, [{"accept_rate": n_acc / n_prop if n_prop else 0.0,
                    "leap_accept_rate": n_leap_acc / n_leap if n_leap else np.nan}]


def register_step_method():
    """Register :class:`PermutationLeapShift` and :class:`PermutationSwapMetropolis` in PyMC's
    step-method registry (idempotent), the leap-and-shift step ahead of the swap step so that
    ``pm.sample`` picks it for permutation variables (PyMC takes the first of equally competent
    methods), and :class:`~pm_perm.inference.mallows_consensus.MallowsConsensusGibbs` first of
    all (IDEAL only for the alpha and rho of a Mallows model with a latent consensus)."""
    from pm_perm.inference.mallows_consensus import MallowsConsensusGibbs

    if MallowsConsensusGibbs not in STEP_METHODS:
        STEP_METHODS.insert(0, MallowsConsensusGibbs)
    if PermutationSwapMetropolis not in STEP_METHODS:
        STEP_METHODS.append(PermutationSwapMetropolis)
    if PermutationLeapShift not in STEP_METHODS:
        STEP_METHODS.insert(STEP_METHODS.index(PermutationSwapMetropolis), PermutationLeapShift)


register_step_method()
