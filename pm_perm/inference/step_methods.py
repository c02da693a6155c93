"""PyMC step method for LATENT permutation variables (unobserved correspondences in a model).

:class:`PermutationSwapMetropolis` is a Metropolis-within-Gibbs sampler: for each permutation
(each batch row of each assigned variable) it proposes ``n_swaps`` transpositions of two
positions, accepting each with the Metropolis ratio of the FULL model log-density (so the latent
permutation may enter the likelihood in any way). Proposals are symmetric; the chain is
irreducible over all permutations with finite density (with forbidden ``-inf`` edges it may be
reducible, as for the kernel in :mod:`pm_perm.kernels.swap_mcmc`). Cost: one model-logp
evaluation per proposal. Approximate (MCMC), any M; mixing slows as the posterior sharpens.

Importing this module appends it to ``pymc.step_methods.STEP_METHODS`` (the registry that
``pm.sample`` consults; see ``pymc.sampling.mcmc.assign_step_methods``), so it is assigned
automatically to permutation-valued random variables. :mod:`pm_perm.distributions` imports it,
so every model with a pm_perm distribution has it; a model whose only permutation variable is
your own ``support_is_permutation`` RandomVariable needs ``import pm_perm.inference.step_methods``.
A
random variable is recognised as permutation-valued when its Op has
``support_is_permutation = True`` or is a 1-d-support, ``(m,m)``-parameter RandomVariable
defined in ``pm_perm.distributions``.
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

__all__ = ["PermutationSwapMetropolis", "is_permutation_rv", "register_step_method"]


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


def _check_permutation(name: str, value: np.ndarray) -> None:
    """Raise ``ValueError`` unless every row (last axis) of ``value`` is a permutation of
    ``0..M-1``; the message names the variable ``name``, the first bad row and its value."""
    if value.ndim == 0:
        raise ValueError(
            f"PermutationSwapMetropolis: {name} is a scalar; a permutation variable must have at "
            "least one dimension (its last axis holds the permutation)"
        )
    M = value.shape[-1]
    idx = first_non_permutation(value)
    if idx is not None:
        where = f"{name}[{', '.join(map(str, idx))}]" if idx else name
        raise ValueError(
            f"PermutationSwapMetropolis: the value of {where} is {value[idx].tolist()}, which is "
            f"not a permutation of 0..{M - 1}; start from a permutation of 0..M-1 in every row "
            f"(check initvals for {name})"
        )


@dataclass_state
class PermutationSwapMetropolisState(StepMethodState):
    n_swaps: int | None


class PermutationSwapMetropolis(ArrayStep):
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
        model = pm.modelcontext(model)
        vars = get_value_vars_from_user_vars(vars, model)
        for v in vars:
            if "int" not in v.dtype:
                raise ValueError(
                    f"PermutationSwapMetropolis needs integer permutation variables; {v.name} "
                    f"has dtype {v.dtype}"
                )
            if not is_permutation_rv(model.values_to_rvs[v]):
                raise ValueError(
                    f"PermutationSwapMetropolis applies only to permutation-valued random "
                    f"variables (pm_perm's permutation distributions, or a RandomVariable whose "
                    f"Op has support_is_permutation = True); {v.name} is not one: assign it "
                    f"another step method (e.g. pm.Metropolis)"
                )
            if initial_point is not None and v.name in initial_point:
                _check_permutation(v.name, np.asarray(initial_point[v.name]))
        self.n_swaps = None if n_swaps is None else as_count(n_swaps, "n_swaps", 1)
        if compile_kwargs is None:
            compile_kwargs = {}
        super().__init__(vars, [model.compile_logp(**compile_kwargs)], blocked=blocked, rng=rng)

    def reset_tuning(self):
        return

    def astep(self, apoint: RaveledVars, *args):
        logp = args[0]
        q = RaveledVars(np.copy(apoint.data), apoint.point_map_info)
        offset = 0
        for name, shape, size, _dtype in apoint.point_map_info:
            _check_permutation(name, q.data[offset:offset + size].reshape(shape))
            offset += size
        logp_curr = logp(q)
        if not np.isfinite(logp_curr):
            raise ValueError(
                f"PermutationSwapMetropolis: the model log-density is {logp_curr} at the start "
                f"point of {', '.join(info[0] for info in apoint.point_map_info)}; the chain "
                f"cannot move from there: start from values of finite density (initvals)"
            )
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

    @staticmethod
    def competence(var, has_grad=False):
        """IDEAL for permutation-valued pm_perm random variables, INCOMPATIBLE otherwise."""
        return Competence.IDEAL if is_permutation_rv(var) else Competence.INCOMPATIBLE


def register_step_method():
    """Append :class:`PermutationSwapMetropolis` to PyMC's step-method registry (idempotent)."""
    if PermutationSwapMetropolis not in STEP_METHODS:
        STEP_METHODS.append(PermutationSwapMetropolis)


register_step_method()
