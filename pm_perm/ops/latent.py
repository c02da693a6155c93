"""A marker on the value of a LATENT permutation in a log-density graph: refuses inference
routes that cannot move a permutation.

A model with an unobserved permutation variable (e.g. the consensus of a Mallows-type model)
is sampled by ``pm.sample``: NUTS for the continuous variables and the swap step
(:class:`pm_perm.inference.step_methods.PermutationSwapMetropolis`) for the permutation. Two
other PyMC routes accept such a model and return a wrong answer without a word:

* ``pm.find_MAP`` optimises continuous variables only and holds every discrete one at its start
  point, so the "MAP" permutation is the initial point and the continuous variables are fitted
  given it;
* ``pm.sample_smc`` moves the particles by Gaussian proposals on the raveled values, rounded
  and cast back to integers (``pymc.smc.kernels._logp_forw``): such a value is almost never a
  permutation, so the particles keep their prior draws.

:class:`LatentPermutationGuard` is an identity (a ``ViewOp``, removed by PyTensor's
canonicalisation before a function is compiled, so it costs nothing) placed on the latent value
where its log-density is built. SMC rebuilds the log-density graph with the value replaced by
``round(float).astype(int)`` and lets every Op whose output type depends on its input remake
its node; the guard is such an Op, and its ``make_node`` refuses a permutation computed by
casting floats (:class:`LatentPermutationError`). ``find_MAP``'s graph is indistinguishable
from the one NUTS uses inside ``pm.sample``, except that it asks for the log-density without
Jacobian terms; :mod:`pm_perm.distributions._latent` warns then
(:class:`LatentPermutationWarning`).
"""

from __future__ import annotations

from pytensor.compile.ops import ViewOp
from pytensor.graph.basic import Apply
from pytensor.scalar import Cast
from pytensor.tensor.elemwise import Elemwise

__all__ = [
    "MAP_MESSAGE",
    "SMC_MESSAGE",
    "LatentPermutationError",
    "LatentPermutationGuard",
    "LatentPermutationWarning",
    "latent_permutation_guard",
]

#: The supported route for a model with a latent permutation.
SUPPORTED_ROUTE = (
    "sample the model instead: pm.sample() assigns NUTS to the continuous variables and, to a "
    "permutation, pm_perm's swap step (pm_perm.inference.step_methods.PermutationSwapMetropolis)"
)

#: Why a MAP fit by a continuous optimiser is wrong with a latent permutation ({names}).
MAP_MESSAGE = (
    "a MAP fit by a continuous optimiser (pm.find_MAP, L-BFGS-B) cannot optimise the latent "
    "discrete variable(s) {names}: it holds them at their start point, so the result is the "
    "start point for them and the continuous variables given it, not the posterior mode; "
    + SUPPORTED_ROUTE
)

#: Why pm.sample_smc is wrong with a latent permutation ({names}).
SMC_MESSAGE = (
    "pm.sample_smc cannot sample the latent permutation {names}: its proposals are Gaussian "
    "moves of the raveled values rounded to integers, which are almost never permutations, so "
    "the particles keep their prior draws; " + SUPPORTED_ROUTE
)


class LatentPermutationWarning(UserWarning):
    """A log-density of a model with a latent permutation was built for a MAP fit."""


class LatentPermutationError(ValueError):
    """An inference route that cannot move a latent permutation was asked to."""


class LatentPermutationGuard(ViewOp):
    """Identity on the value of a latent permutation ``name``; refuses a value cast from
    floats when its node is remade (see the module docstring)."""

    __props__ = ("name",)
    # lets non-strict graph rebuilds (pm.sample_smc's) call make_node with the new input
    _output_type_depends_on_input_value = True

    def __init__(self, name):
        self.name = str(name)

    def make_node(self, x):
        owner = x.owner
        if (owner is not None and isinstance(owner.op, Elemwise)
                and isinstance(owner.op.scalar_op, Cast)
                and owner.inputs[0].type.dtype.startswith("float")):
            raise LatentPermutationError(SMC_MESSAGE.format(names=repr(self.name)))
        return Apply(self, [x], [x.type()])


def latent_permutation_guard(value):
    """``value`` through a :class:`LatentPermutationGuard` named after it."""
    return LatentPermutationGuard(value.name)(value)
