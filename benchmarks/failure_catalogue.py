"""The catalogue of bad inputs and what the user sees, produced by running each case.

``python benchmarks/failure_catalogue.py > docs/guide/failures.md`` regenerates the docs page
from real runs; ``tests/test_failure_catalogue.py`` runs the same cases and checks each outcome
against the ``expect`` column, so the page cannot drift from the code.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt


def _perm_logp(W, y):
    from pm_perm import PermutationExpFamily

    return pm.logp(PermutationExpFamily.dist(logits=np.asarray(W, float)), np.asarray(y)).eval()


def _observed(dist, **kw):
    with pm.Model():
        return dist("y", **kw)


def _observed_data(dist, value, **kw):
    with pm.Model():
        return dist("y", observed=pm.Data("y_obs", value), **kw)


def _bethe_op_two_sweeps(W):
    """The Bethe Op limited to two sweeps, compiled by the numba backend (the default)."""
    import pytensor
    from pytensor.tensor.blockwise import Blockwise

    from pm_perm.ops.bethe import BetheLogPermanentAndMarginals

    x = pt.matrix("W")
    out = Blockwise(BetheLogPermanentAndMarginals(max_iter=2))(x)[0]
    return pytensor.function([x], out, mode="NUMBA")(W)


def _cases():
    from pm_perm import ConditionalBernoulli, NChooseK, OrdinalNChooseK, PermutationExpFamily
    from pm_perm.kernels.bethe import bethe_log_permanent as bethe_kernel
    from pm_perm.kernels.cardinality import log_esp
    from pm_perm.kernels.permanent import log_permanent, sample_permutations
    from pm_perm.ops.bethe import bethe_log_permanent as bethe_op
    from pm_perm.ops.permanent import log_permanent as log_permanent_op

    W3 = np.zeros((3, 3))
    infeasible = np.array([[-np.inf, -np.inf, 0.0], [-np.inf, -np.inf, 0.0], [0.0, 0.0, 0.0]])
    nan3 = W3.copy()
    nan3[0, 1] = np.nan
    theta = np.array([0.5, -1.0, 2.0, 0.0])
    huge3 = W3.copy()
    huge3[0, 0] = 1.5e308  # finite, but sums of such logits overflow float64
    return [
        # (area, input, call, expect) ; expect: an exception name, or "-inf" / "nan" / "ok"
        ("permanent kernel", "logits with NaN", lambda: log_permanent(nan3), "ValueError"),
        ("permanent kernel", "logits with +inf",
         lambda: log_permanent(np.where(np.eye(3) > 0, np.inf, 0.0)), "ValueError"),
        ("permanent kernel", "a finite logit of 1.5e308 (beyond 1e300)",
         lambda: log_permanent(huge3), "ValueError"),
        ("permanent kernel", "non-square logits (2, 3)",
         lambda: log_permanent(np.zeros((2, 3))), "ValueError"),
        ("permanent kernel", "a 1-d array", lambda: log_permanent(np.zeros(3)), "ValueError"),
        ("permanent kernel", "M = 32 (beyond EXACT_MAX_M = 26)",
         lambda: log_permanent(np.zeros((32, 32))), "ValueError"),
        ("permanent kernel", "every permutation forbidden by -inf",
         lambda: log_permanent(infeasible), "-inf"),
        ("permanent kernel", "sampling when every permutation is forbidden",
         lambda: sample_permutations(infeasible, rng=0), "ValueError"),
        ("permanent kernel", "a string", lambda: log_permanent("abc"), "TypeError"),
        ("permanent Op", "NaN logits at run time",
         lambda: log_permanent_op(pt.as_tensor(nan3)).eval(), "nan"),
        ("permanent Op", "a finite logit of 1.5e308 at run time",
         lambda: log_permanent_op(pt.as_tensor(huge3)).eval(), "nan"),
        ("permanent Op", "integer-typed logits",
         lambda: log_permanent_op(pt.lmatrix("L")), "TypeError"),
        ("permanent Op", "static shape (32, 32)",
         lambda: log_permanent_op(pt.tensor("W", shape=(32, 32))), "ValueError"),
        ("Bethe kernel", "logits with NaN",
         lambda: bethe_kernel(nan3), "ValueError"),
        ("Bethe kernel", "a logit spread of 1e10 nats (exp underflows)",
         lambda: bethe_kernel(np.array([[0.0, 1e10], [-1e10, 0.0]])), "ok"),
        ("Bethe Op", "NaN logits at run time",
         lambda: bethe_op(pt.as_tensor(nan3)).eval(), "nan"),
        ("Bethe Op", "a finite logit of 1.5e308 at run time",
         lambda: bethe_op(pt.as_tensor(huge3)).eval(), "nan"),
        ("Bethe Op", "no convergence in max_iter = 2 sweeps (numba mode)",
         lambda: _bethe_op_two_sweeps(np.random.default_rng(5).normal(size=(8, 8)) * 3.0),
         "BetheConvergenceError"),
        ("PermutationExpFamily", "a value that is not a permutation, [0, 0, 2]",
         lambda: _perm_logp(W3, [0, 0, 2]), "-inf"),
        ("PermutationExpFamily", "a value out of range, [0, 1, 3]",
         lambda: _perm_logp(W3, [0, 1, 3]), "-inf"),
        ("PermutationExpFamily", "NaN logits in pm.logp",
         lambda: _perm_logp(nan3, [0, 1, 2]), "ParameterValueError"),
        ("PermutationExpFamily", "a finite logit of 1.5e308 in pm.logp",
         lambda: _perm_logp(huge3, [0, 1, 2]), "ParameterValueError"),
        ("PermutationExpFamily", "logits admitting no permutation",
         lambda: _perm_logp(infeasible, [2, 0, 1]), "ParameterValueError"),
        ("PermutationExpFamily", "observed floats 0.5",
         lambda: _observed(PermutationExpFamily, logits=W3, observed=np.array([[0.5, 1, 2]])),
         "ValueError"),
        ("PermutationExpFamily", "observed of the wrong length",
         lambda: _observed(PermutationExpFamily, logits=W3, observed=np.array([[0, 1]])),
         "ValueError"),
        ("PermutationExpFamily", "observed row that is not a permutation",
         lambda: _observed(PermutationExpFamily, logits=W3, observed=np.array([[0, 0, 1]])),
         "ValueError"),
        ("PermutationExpFamily", "observed pm.Data holding a row that is not a permutation",
         lambda: _observed_data(PermutationExpFamily, np.array([[0, 0, 1]]), logits=W3),
         "ValueError"),
        ("PermutationExpFamily", "observed with NaN",
         lambda: _observed(PermutationExpFamily, logits=W3, observed=np.array([[0, 1, np.nan]])),
         "ValueError"),
        ("PermutationExpFamily", "logits (30, 30) with method='exact'",
         lambda: PermutationExpFamily.dist(logits=np.zeros((30, 30))), "ValueError"),
        ("PermutationExpFamily", "unknown method",
         lambda: PermutationExpFamily.dist(logits=W3, method="fast"), "ValueError"),
        ("cardinality kernel", "log e_k with NaN logits",
         lambda: log_esp(np.array([0.0, np.nan]), 1), "ValueError"),
        ("cardinality kernel", "log e_k with a finite logit of 1.5e308",
         lambda: log_esp(np.array([1.5e308, 1.5e308, 0.0]), 2), "ValueError"),
        ("cardinality kernel", "k > D", lambda: log_esp(theta, 5), "-inf"),  # e_k = 0 for k > D
        ("ConditionalBernoulli", "a value with the wrong number of ones",
         lambda: pm.logp(ConditionalBernoulli.dist(theta, 2), np.array([1, 0, 0, 0])).eval(),
         "-inf"),
        ("ConditionalBernoulli", "a non-binary value",
         lambda: pm.logp(ConditionalBernoulli.dist(theta, 2), np.array([2, 0, 0, 0])).eval(),
         "-inf"),
        ("ConditionalBernoulli", "observed non-binary data",
         lambda: _observed(ConditionalBernoulli, logits=theta, k=2,
                           observed=np.array([[2, 0, 0, 0]])),
         "ValueError"),
        ("NChooseK", "count_probs not a simplex",
         lambda: pm.logp(NChooseK.dist(theta, np.full(5, 0.5)), np.array([1, 0, 0, 0])).eval(),
         "ParameterValueError"),
        ("NChooseK", "count_probs of the wrong length",
         lambda: pm.logp(NChooseK.dist(theta, np.full(4, 0.25)), np.array([1, 0, 0, 0])).eval(),
         "ValueError"),
        ("OrdinalNChooseK", "label out of range",
         lambda: pm.logp(OrdinalNChooseK.dist(theta, counts=[2, 1, 1]),
                         np.array([3, 0, 1, 2])).eval(),
         "-inf"),
        ("OrdinalNChooseK", "labels whose counts differ from counts=",
         lambda: pm.logp(OrdinalNChooseK.dist(theta, counts=[2, 1, 1]),
                         np.array([2, 2, 0, 1])).eval(),
         "-inf"),
    ]


def run_case(call):
    """Return ``(kind, message)``: the exception's class name and text, or the value's class."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call()
    except Exception as err:  # noqa: BLE001 - the catalogue records whatever is raised
        return type(err).__name__, str(err).strip().splitlines()[0]
    if isinstance(out, np.ndarray | float | np.floating) and np.ndim(out) <= 1:
        arr = np.atleast_1d(np.asarray(out, dtype=float))
        if np.all(np.isneginf(arr)):
            return "-inf", "-inf"
        if np.all(np.isnan(arr)):
            return "nan", "nan"
    return "ok", "returned normally"


def render():
    lines = [
        "# Bad input: what you see",
        "",
        "Each row below was produced by running the case (`benchmarks/failure_catalogue.py`);",
        "`tests/test_failure_catalogue.py` re-runs them, so this page matches the code. Errors",
        "name what was wrong and how to fix it; values outside a distribution's support get",
        "`logp = -inf`; invalid parameters inside `pm.logp` raise `ParameterValueError`",
        "(in compiled models, such as `pm.sample`, PyMC turns them into `-inf`).",
        "",
        "| where | input | result | message |",
        "|---|---|---|---|",
    ]
    for area, what, call, _ in _cases():
        kind, msg = run_case(call)
        msg = msg.replace("|", "\\|")
        if len(msg) > 220:
            msg = msg[:217] + "..."
        lines.append(f"| {area} | {what} | `{kind}` | {msg} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
