"""pm_perm._modes: the Python-linker mode of MAP fits and of the tests compiles no C code."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.graph.op import HasInnerGraph

from pm_perm._modes import PYTHON_MODE
from pm_perm.inference import CompiledMAP


def _inner_graph_ops(fn):
    return [node.op for node in fn.maker.fgraph.toposort() if isinstance(node.op, HasInnerGraph)]


def test_symbolic_ops_are_inlined():
    """softmax and log_softmax (and their gradients) are Ops with an inner graph, which PyTensor
    links with C thunks even under the Python linker; PYTHON_MODE inlines them."""
    x = pt.vector("x")
    out = pt.special.softmax(x) + pt.special.log_softmax(x)
    fn = pytensor.function([x], [out, pytensor.grad(out.sum(), x)], mode=PYTHON_MODE)
    assert _inner_graph_ops(fn) == []
    v = np.array([0.5, -1.0, 2.0])
    sm = np.exp(v - v.max()) / np.exp(v - v.max()).sum()
    value, grad = fn(v)
    np.testing.assert_allclose(value, sm + np.log(sm), rtol=1e-14)
    # sum(out) = 1 + sum(x) - D logsumexp(x): gradient 1 - D softmax(x)
    np.testing.assert_allclose(grad, 1.0 - v.size * sm, rtol=1e-13, atol=1e-15)


def test_map_functions_of_a_simplex_model_hold_no_inner_graph():
    """A Dirichlet's simplex transform (softmax) in CompiledMAP's value-and-gradient and its
    untransformed values: no node left that would compile C code on a new machine."""
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=np.ones(4))
        pm.Categorical("y", p=p, observed=np.array([0, 1, 1, 2, 2, 2]))
    fitted = CompiledMAP(model)
    assert _inner_graph_ops(fitted._f) == [] and _inner_graph_ops(fitted._values) == []
    values = fitted.fit(seed=0)
    assert values["_info"]["converged"]
    np.testing.assert_allclose(values["p"], [1 / 6, 2 / 6, 3 / 6, 0], atol=1e-4)
