"""Latent (unobserved) ``PermutationExpFamily`` values in a model's log-density: guarded.

Each permutation RandomVariable's ``_logprob`` is wrapped so that, where the value is a free
value variable of a model (not observed data), it passes through
:func:`pm_perm.ops.latent.latent_permutation_guard` (which makes ``pm.sample_smc`` raise), and
a log-density built without Jacobian terms (``model.logp(jacobian=False)``: what ``pm.find_MAP``
optimises) warns :class:`~pm_perm.ops.latent.LatentPermutationWarning` naming the supported
route. PyMC passes ``use_jacobian`` to every ``_logprob`` it calls from a model's log-density
(``pymc.logprob.basic.transformed_conditional_logp``); a direct ``pm.logp(rv, value)`` does not
pass it and is left alone. No PyMC function is replaced: only pm_perm's own RandomVariables'
registrations are.
"""

from __future__ import annotations

import warnings

from pymc.logprob.abstract import _logprob
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant

from pm_perm.distributions.permutation import (
    PermutationExpFamilyBetheRV,
    PermutationExpFamilyGlynnRV,
    PermutationExpFamilyRV,
)
from pm_perm.ops.latent import MAP_MESSAGE, LatentPermutationWarning, latent_permutation_guard

__all__ = ["guard_latent_values"]


def _is_free_value(value):
    """True for a model's value variable (a graph root that is neither data nor a constant)."""
    return value.owner is None and not isinstance(value, Constant | SharedVariable)


def guard_latent_values(rv_type):
    """Wrap the ``_logprob`` registered for ``rv_type`` (a RandomVariable with one output whose
    values are permutations) with the latent-value guard of this module."""
    inner = _logprob.dispatch(rv_type)

    @_logprob.register(rv_type)
    def guarded_logprob(op, values, *inputs, **kwargs):
        (value,) = values
        if _is_free_value(value):
            if kwargs.get("use_jacobian") is False:
                warnings.warn(MAP_MESSAGE.format(names=repr(value.name)),
                              LatentPermutationWarning, stacklevel=2)
            value = latent_permutation_guard(value)
        return inner(op, [value], *inputs, **kwargs)

    guarded_logprob.__wrapped__ = inner
    return guarded_logprob


for _rv_type in (PermutationExpFamilyRV, PermutationExpFamilyGlynnRV, PermutationExpFamilyBetheRV):
    guard_latent_values(_rv_type)
