"""What the three count-label distributions share: checks of observed labels, parameters
that admit no value, and their logp and gradient compiled natively by numba."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError

from pm_perm.distributions.conditional_bernoulli import ConditionalBernoulli
from pm_perm.distributions.n_choose_k import NChooseK
from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK
from tests.distributions._count_labels import FAST

# ----------------------------------------------------------------------------- observed data


def test_malformed_observed_data_is_rejected():
    theta = np.zeros(3)
    with pm.Model():
        with pytest.raises(ValueError, match="integers"):
            ConditionalBernoulli("a", theta, 1, observed=np.array([[0.5, 0.5, 0.0]]))
        with pytest.raises(ValueError, match="binary"):
            NChooseK("b", theta, np.full(4, 0.25), observed=np.array([[2, 0, 0]]))
        with pytest.raises(ValueError, match="NaN"):
            NChooseK("c", theta, np.full(4, 0.25), observed=np.array([[np.nan, 0, 1]]))
        with pytest.raises(ValueError, match="0..2"):
            OrdinalNChooseK("d", theta, counts=[1, 1, 1], observed=np.array([[0, 1, 3]]))
        with pytest.raises(ValueError, match="0..1"):
            OrdinalNChooseK("e", theta, n_levels=2, observed=np.array([[0, 1, 2]]))
        # a pm.Data container is checked by the value it holds at build
        with pytest.raises(ValueError, match="binary"):
            NChooseK("f", theta, np.full(4, 0.25), observed=pm.Data("f_obs", [[2, 0, 0]]))
        with pytest.raises(ValueError, match="0..2"):
            OrdinalNChooseK("g", theta, counts=[1, 1, 1],
                            observed=pm.Data("g_obs", [[0, 1, 3]]))


def test_observed_of_the_wrong_width_is_refused_at_build():
    """Observed rows whose length is not the number of logits: a clear error when the model is
    built, not PyTensor's Elemwise shape error when it is compiled."""
    theta = np.zeros(4)
    with pm.Model():
        with pytest.raises(ValueError, match="have length 3 in their last axis but there are 4 "
                                             "logits"):
            ConditionalBernoulli("a", theta, 2, observed=[[1, 1, 0]])
        with pytest.raises(ValueError, match="have length 3 .* 4 logits"):
            NChooseK("b", logits=theta, count_probs=np.full(5, 0.2), observed=[[1, 1, 0]])
        with pytest.raises(ValueError, match="have length 5 .* 4 logits"):
            OrdinalNChooseK("c", theta, counts=[2, 2], observed=[[0, 0, 1, 1, 0]])
        with pytest.raises(ValueError, match="have length 3 .* 4 logits"):
            NChooseK("d", theta, np.full(5, 0.2), observed=pm.Data("d_obs", [[1, 1, 0]]))
        NChooseK("e", theta, np.full(5, 0.2), observed=[[1, 1, 0, 0]])  # the right width


# ------------------------------------------------------------------------ infeasible parameters
# Counts that need more items on (at levels >= 1) than there are finite logits cannot be
# realised. logp keeps their prior mass as lost; draws condition on the feasible counts; when no
# count is feasible, logp and both draw paths refuse the parameters (as PermutationExpFamily
# refuses logits that admit no permutation).


NO_VALUE = [
    ("ConditionalBernoulli", lambda: ConditionalBernoulli.dist([-np.inf, -np.inf, 0, 0], 3),
     [0, 1, 1, 1], "k is larger than the number of finite logits"),
    ("NChooseK", lambda: NChooseK.dist([-np.inf, -np.inf, 0, 0], [0, 0, 0, 0.5, 0.5]),
     [0, 1, 1, 1], "count_probs puts no mass on a feasible count"),
    ("OrdinalNChooseK counts", lambda: OrdinalNChooseK.dist([-np.inf, -np.inf, -np.inf, 0],
                                                            counts=[2, 2]),
     [0, 0, 1, 1], "need more items at levels >= 1 than there are finite logits"),
    ("OrdinalNChooseK count_probs",
     lambda: OrdinalNChooseK.dist([-np.inf, -np.inf, 0, 0], count_probs=[[0.5, 0.5, 0, 0, 0],
                                                                         [0, 0, 0, 1.0, 0]]),
     [0, 0, 1, 1], "need more items at levels >= 1 than there are finite logits"),
]


@pytest.mark.parametrize("case", NO_VALUE, ids=[c[0] for c in NO_VALUE])
@pytest.mark.parametrize("mode", ["NUMBA", FAST], ids=["NUMBA", "python"])
def test_parameters_admitting_no_value_are_refused_by_logp_and_draws(case, mode):
    _, make, value, msg = case
    rv = make()
    with pytest.raises(ParameterValueError, match=msg):
        pytensor.function([], pm.logp(rv, np.array(value)), mode=mode)()
    with pytest.raises(ValueError, match="finite logits"):
        pm.draw(rv, random_seed=1, mode=mode)


def test_parameters_admitting_no_value_give_minus_inf_in_a_model(fast_mode):
    """In a model (compile_logp) the parameter check becomes -inf, as for every check."""
    with pm.Model() as m:
        x = pm.Normal("x")
        ConditionalBernoulli("y", logits=pt.stack([x, -np.inf, -np.inf, 0.0]), k=3,
                             observed=[1, 0, 1, 1])
    assert m.compile_logp()({"x": 0.0}) == -np.inf


def test_values_of_probability_zero_stay_minus_inf(fast_mode):
    """Feasible parameters: a value of probability 0 has logp -inf, not a parameter error."""
    th = np.array([0.5, -np.inf, 1.0, 0.0])
    assert pm.logp(ConditionalBernoulli.dist(th, 2), [1, 1, 0, 0]).eval() == -np.inf
    nk = NChooseK.dist(th, [0, 0, 0.5, 0, 0.5])  # count 4 infeasible, count 2 feasible
    assert pm.logp(nk, [1, 1, 1, 1]).eval() == -np.inf  # needs the -inf item
    assert pm.logp(nk, [1, 0, 0, 0]).eval() == -np.inf  # count 1 has no mass
    assert np.isfinite(pm.logp(nk, [1, 0, 1, 0]).eval())
    on = OrdinalNChooseK.dist(th, counts=[2, 1, 1])
    assert pm.logp(on, [0, 1, 2, 0]).eval() == -np.inf  # the -inf item gets label 1
    assert np.isfinite(pm.logp(on, [0, 0, 2, 1]).eval())


# ----------------------------------------------------------------------------- PyMC workflow


@pytest.mark.slow
def test_model_logp_and_gradient_compile_natively_in_numba():
    # Default (numba) backend: logp + dlogp of all three distributions compile without the
    # object-mode fallback (it would emit a UserWarning, an error under filterwarnings=error)
    # and agree with the Python VM. ~60 s with a cold numba cache (4 s warm), hence slow.
    rng = np.random.default_rng(0)
    D = 5
    with pm.Model() as model:
        th = pm.ZeroSumNormal("theta", sigma=2.0, shape=D)
        cp = pm.Dirichlet("cp", a=np.ones(D + 1))
        cpo = pm.Dirichlet("cpo", a=np.ones((3, D + 1)), shape=(3, D + 1))
        ConditionalBernoulli("a", th, 2, observed=np.array([[1, 0, 1, 0, 0], [0, 0, 0, 1, 1]]))
        NChooseK("b", th, cp, observed=np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0]]))
        OrdinalNChooseK("c", th, count_probs=cpo, observed=np.array([[2, 0, 1, 1, 0]]))
        OrdinalNChooseK("d", th, n_levels=3, observed=np.array([[0, 2, 1, 1, 0]]))
    ip = model.initial_point()
    ip = {k: v + 0.1 * rng.normal(size=v.shape) for k, v in ip.items()}
    outs = [model.logp(), model.dlogp()]
    f_numba = model.compile_fn(outs, mode="NUMBA")
    f_py = model.compile_fn(outs, mode=FAST)
    lp_n, g_n = f_numba(ip)
    lp_p, g_p = f_py(ip)
    assert np.isfinite(lp_n)
    np.testing.assert_allclose(lp_n, lp_p, rtol=1e-12)
    np.testing.assert_allclose(g_n, g_p, rtol=1e-10, atol=1e-12)
