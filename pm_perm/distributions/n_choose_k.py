"""``NChooseK``: binary labels with a prior over their count, and its marginals.

Model of Swersky et al., "Probabilistic n-Choose-k Models for Classification and Ranking"
(NIPS 2012): a count prior, then a conditional Bernoulli given the count. The normaliser is
exact (the tilted dynamic program of :mod:`pm_perm.kernels.esp`).

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
from pm_perm.distributions._params import LOGITS_MSG, logits_ok, select_last, simplex_ok
from pm_perm.distributions._shapes import check_observed_batch, static_last_dim
from pm_perm.distributions._values import IntegerRV
from pm_perm.kernels._checks import c_array
from pm_perm.kernels.count_draws import DRAW_NCHOOSEK, sample_nchoosek_core
from pm_perm.kernels.esp import nchoosek_marginals
from pm_perm.ops.cardinality import log_esp

_VERSION = labels.version_of(__file__)  # numba cache version (see pm_perm.kernels._version)

__all__ = ["NChooseK", "NChooseKRV", "nchoosek_marginals"]

# logp's refusal of parameters that admit no value at all (the draws refuse the same ones)
_NO_VALUE_MSG = (
    "count_probs puts no mass on a feasible count (k <= the number of finite logits; items with "
    "logit -inf are never on), so no value has positive probability"
)


class NChooseKRV(IntegerRV):
    """Count ``k ~ count_probs``, then ``y | k ~ ConditionalBernoulli(logits, k)``."""

    name = "n_choose_k"
    signature = "(n),(m)->(n)"
    dist_name = "NChooseK"

    @classmethod
    def rng_fn(cls, rng, logits, count_probs, size):
        batch = (
            np.broadcast_shapes(logits.shape[:-1], count_probs.shape[:-1]) if size is None else size
        )
        D = logits.shape[-1]
        if count_probs.shape[-1] != D + 1:
            raise ValueError(f"NChooseK: count_probs must have D + 1 = {D + 1} entries")
        return labels.draw_rows(batch, D, [(logits, (D,)), (count_probs, (D + 1,))],
                                lambda th, pk: sample_nchoosek_core(rng, c_array(th), c_array(pk)))


n_choose_k = NChooseKRV()


class NChooseK(pm.Discrete):
    r"""Binary n-choose-k model: a count prior, then a conditional Bernoulli given the count.

    .. math::

        p(y) = \pi_{s}\,\frac{\exp(\theta^\top y)}{e_{s}(e^{\theta})}, \qquad s = \sum_d y_d .

    ========  ===============================================
    Support   :math:`y \in \{0, 1\}^D`
    Mean      :func:`nchoosek_marginals`: :math:`\sum_k \pi_k\, p(y_d = 1 \mid k)`
    ========  ===============================================

    Parameters
    ----------
    logits : tensor_like of float, shape (..., D)
        Item logits :math:`\theta` (``-inf`` = never on). Shift-invariant likelihood.
    count_probs : tensor_like of float, shape (..., D + 1)
        Prior :math:`\pi_k = p(\sum y = k)`, k = 0..D, a simplex (non-negative, sums to 1 within
        1e-6). May be a random variable (e.g. ``pm.Dirichlet``); it gets gradients.

    Notes
    -----
    Value convention: ``y[..., d] = 1`` iff item ``d`` is on (int64). Cost: logp and gradient
    O(D s) per row. Counts above the number of finite logits cannot be realised; prior mass
    on them is lost (the pmf then sums to less than 1), so keep ``count_probs`` at 0 there.
    Draws condition on a feasible value: the count is drawn from ``count_probs`` restricted to
    the feasible counts and renormalised (deterministically, whatever the seed). Parameters
    with no mass on a feasible count admit no value: logp raises ``ParameterValueError``
    (``-inf`` inside a model) and a draw ``ValueError``, as for invalid logits or a
    ``count_probs`` that is not a simplex. Observed rows must have one label per logit
    (``ValueError`` at model build).
    Identity (tested): with the Poisson-binomial prior implied by the logits,
    :math:`\pi_k = e_k(e^\theta) / \prod_d (1 + e^{\theta_d})`, this is independent Bernoulli
    with probabilities ``sigmoid(logits)`` (logistic regression). ``support_point`` puts the
    ones on the :math:`k^*` largest logits for :math:`k^* = \arg\max_k \pi_k` over the feasible
    counts (a point of positive probability, not necessarily the mode).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pm_perm.distributions.n_choose_k import NChooseK
    >>> y = NChooseK.dist(logits=np.zeros(4), count_probs=np.array([0, 0, 1.0, 0, 0]))
    >>> int(pm.draw(y, random_seed=1).sum())
    2
    """

    rv_type = NChooseKRV
    rv_op = n_choose_k

    def __new__(cls, name, *args, observed=None, **kwargs):
        p = {**dict(zip(("logits", "count_probs"), args, strict=False)), **kwargs}
        if observed is not None:
            labels.check_observed_labels(observed, "binary", D=static_last_dim(p.get("logits")))
        check_observed_batch("NChooseK", observed, [("logits", p.get("logits"), 1),
                                                    ("count_probs", p.get("count_probs"), 1)])
        return super().__new__(cls, name, *args, observed=observed, **kwargs)

    @classmethod
    def dist(cls, logits, count_probs, **kwargs):
        count_probs = pt.cast(pt.as_tensor_variable(count_probs), "float64")
        logits = labels.as_logits(logits)
        labels.check_static_length(count_probs, logits, "count_probs")
        return super().dist([logits, count_probs], **kwargs)

    def support_point(rv, size, logits, count_probs):
        # the most probable FEASIBLE count (at most as many items as finite logits), so that the
        # point has a finite logp whenever the parameters admit any value
        n_finite = labels.n_finite_logits(logits)
        feasible = pt.le(pt.arange(count_probs.shape[-1]), n_finite[..., None])
        kstar = pt.argmax(pt.switch(feasible, count_probs, -1.0), axis=-1)
        mode = labels.on_largest(logits, kstar)
        if not rv_size_is_none(size):
            mode = pt.broadcast_to(mode, (*size, logits.shape[-1]))
        else:
            mode = pt.broadcast_to(mode, rv.shape)
        return mode

    def logp(value, logits, count_probs):
        D = logits.shape[-1]
        on = pt.eq(value, 1)
        binary = pt.all(on | pt.eq(value, 0), axis=-1)
        s = pt.sum(pt.cast(on, "int64"), axis=-1)
        pk = select_last(count_probs, s)
        dot = labels.on_dot(logits, on)
        lp = pt.log(pk) + dot - log_esp(logits, s)
        lp = labels.minus_inf_if(pt.eq(dot, -np.inf) | pt.eq(pk, 0.0), lp)
        lp = pt.switch(binary, lp, -np.inf)
        lp = check_parameters(
            lp,
            logits_ok(logits),
            pt.eq(count_probs.shape[-1], D + 1),
            pt.all(pt.ge(count_probs, 0.0)),
            simplex_ok(count_probs, labels.SIMPLEX_TOL),
            msg=f"{LOGITS_MSG}; count_probs must be a simplex of length D + 1",
        )
        feasible = labels.mass_up_to(count_probs, labels.n_finite_logits(logits))
        return check_parameters(lp, pt.gt(feasible, 0.0), msg=_NO_VALUE_MSG)


@numba_core_rv_funcify.register(NChooseKRV)
def _numba_n_choose_k(op, node):
    draw = labels.draw_numba(DRAW_NCHOOSEK)

    @numba_basic.numba_njit
    def core(rng, logits, count_probs, out=None):
        if count_probs.shape[0] != logits.shape[0] + 1:
            raise ValueError("NChooseK: count_probs must have D + 1 entries")
        return draw(rng, logits, 0, count_probs, out)

    core.handles_out = True
    return core, _VERSION
