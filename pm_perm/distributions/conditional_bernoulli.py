"""``ConditionalBernoulli``: binary labels with exactly ``k`` ones.

Model of Swersky et al., "Probabilistic n-Choose-k Models for Classification and Ranking"
(NIPS 2012). The normaliser is exact: ``log e_k(exp theta)`` by the tilted dynamic program of
:mod:`pm_perm.kernels.esp` (O(D k) per row, gradient = conditional marginals).

Value convention: ``y[..., d]`` in {0, 1} says whether item ``d`` is on (int64); the count is
``sum(y, -1)``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

from pm_perm.distributions import _count_labels as labels
from pm_perm.distributions._params import LOGITS_MSG, logits_ok
from pm_perm.distributions._shapes import check_observed_batch, static_last_dim
from pm_perm.distributions._values import IntegerRV
from pm_perm.kernels._checks import c_array
from pm_perm.kernels._tilted_dp import n_finite
from pm_perm.kernels.count_draws import (
    DRAW_CONDITIONAL_BERNOULLI,
    DRAW_ERRORS,
    K_OUT_OF_RANGE,
    sample_conditional_bernoulli_core,
)
from pm_perm.ops.cardinality import log_esp

_VERSION = labels.version_of(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["ConditionalBernoulli", "ConditionalBernoulliRV"]

# logp's refusal of parameters that admit no value at all (the draws refuse the same ones)
_NO_VALUE_MSG = (
    "k is larger than the number of finite logits, so no value has positive probability (items "
    "with logit -inf are never on): lower k or make more logits finite"
)


def _draw_row(rng, logits, k):
    row = c_array(logits)
    if not (0 <= k <= n_finite(row)):
        raise ValueError(DRAW_ERRORS[K_OUT_OF_RANGE])
    return sample_conditional_bernoulli_core(rng, row, int(k))


class ConditionalBernoulliRV(IntegerRV):
    """Binary vector with exactly ``k`` ones: ``p(y) = exp(theta . y) / e_k(exp theta)``."""

    name = "conditional_bernoulli"
    signature = "(n),()->(n)"
    dist_name = "ConditionalBernoulli"

    @classmethod
    def rng_fn(cls, rng, logits, k, size):
        batch = np.broadcast_shapes(logits.shape[:-1], np.shape(k)) if size is None else size
        D = logits.shape[-1]
        return labels.draw_rows(batch, D, [(logits, (D,)), (k, ())],
                                lambda th, kk: _draw_row(rng, th, kk))


conditional_bernoulli = ConditionalBernoulliRV()


class ConditionalBernoulli(pm.Discrete):
    r"""Conditional Bernoulli: binary ``y`` with exactly ``k`` ones.

    .. math::

        p(y \mid k) = \frac{\exp(\theta^\top y)}{e_k(e^{\theta})}, \qquad
        e_k(w) = \sum_{|c| = k} \prod_{d \in c} w_d .

    ========  ===============================================
    Support   :math:`y \in \{0, 1\}^D,\ \sum_d y_d = k`
    Mean      :math:`p(y_d = 1 \mid k)` (the gradient of :math:`\log e_k`)
    ========  ===============================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., D)
        Item logits :math:`\theta`; ``-inf`` = item never on. NaN / ``+inf`` are invalid.
        The likelihood is invariant to adding a constant to all logits: use a
        ``pm.ZeroSumNormal`` or a proper prior.
    k : tensor_like of int, shape (...)
        Number of ones, ``0 <= k <= D``, and at most the number of finite logits.

    Raises
    ------
    ParameterValueError
        From logp (``ValueError`` from a draw) for invalid logits, ``k`` outside 0..D, or a
        ``k`` larger than the number of finite logits (no value is possible). Inside a model
        the check gives ``logp = -inf``, as every parameter check.
    ValueError
        At model build, for observed data that are not binary or whose rows do not have one
        label per logit.

    Notes
    -----
    Value convention: ``y[..., d] = 1`` iff item ``d`` is on (int64). Cost: logp and its
    gradient O(D k) per row (one tilted dynamic program); a draw O(D k). ``support_point``
    puts the ones on the ``k`` largest logits (the mode). Values that are not binary or do not
    have ``k`` ones have ``logp = -inf``.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pm_perm.distributions.conditional_bernoulli import ConditionalBernoulli
    >>> y = ConditionalBernoulli.dist(logits=np.array([2.0, 0.0, -1.0, 1.0]), k=2)
    >>> int(pm.draw(y, random_seed=1).sum())
    2

    References
    ----------
    Chen, Dempster & Liu (1994), Weighted finite population sampling to maximize entropy.
    Swersky et al. (2012), Probabilistic n-Choose-k Models for Classification and Ranking.
    """

    rv_type = ConditionalBernoulliRV
    rv_op = conditional_bernoulli

    def __new__(cls, name, *args, observed=None, **kwargs):
        p = {**dict(zip(("logits", "k"), args, strict=False)), **kwargs}
        if observed is not None:
            labels.check_observed_labels(observed, "binary", D=static_last_dim(p.get("logits")))
        check_observed_batch("ConditionalBernoulli", observed,
                             [("logits", p.get("logits"), 1), ("k", p.get("k"), 0)])
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, k, **kwargs):
        return super().dist([labels.as_logits(logits), labels.as_count(k)], **kwargs)

    def support_point(rv, size, logits, k):
        mode = labels.on_largest(logits, k)
        if not rv_size_is_none(size):
            mode = pt.broadcast_to(mode, (*size, logits.shape[-1]))
        return mode

    def logp(value, logits, k):
        on = pt.eq(value, 1)
        dot = labels.on_dot(logits, on)
        binary = pt.all(on | pt.eq(value, 0), axis=-1)
        ok = binary & pt.eq(pt.sum(value, axis=-1), k)
        lp = labels.minus_inf_if(pt.eq(dot, -np.inf), dot - log_esp(logits, k))
        lp = pt.switch(ok, lp, -np.inf)
        lp = check_parameters(
            lp,
            logits_ok(logits),
            pt.ge(k, 0),
            pt.le(k, logits.shape[-1]),
            msg=f"{LOGITS_MSG}, and 0 <= k <= D",
        )
        return check_parameters(lp, pt.le(k, labels.n_finite_logits(logits)), msg=_NO_VALUE_MSG)


@numba_core_rv_funcify.register(ConditionalBernoulliRV)
def _numba_conditional_bernoulli(op, node):
    draw = labels.draw_numba(DRAW_CONDITIONAL_BERNOULLI)

    @numba_basic.numba_njit
    def core(rng, logits, k, out=None):
        return draw(rng, logits, np.int64(k), logits, out)

    core.handles_out = True
    return core, _VERSION
