"""PyTensor's compiled graphs call pm_perm's kernels through C symbols (pm_perm.ops.extern), so
no kernel code is compiled into a graph again; the helpers of pm_perm.ops.extern work."""

import os
import re
import subprocess
import sys

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from numba import types

from pm_perm import (
    ConditionalBernoulli,
    NChooseK,
    OrdinalNChooseK,
    PartialRanking,
    PermutationExpFamily,
    PlackettLuce,
)
from pm_perm.ops.bethe import bethe_log_permanent, bethe_marginals
from pm_perm.ops.cardinality import conditional_marginals, log_esp
from pm_perm.ops.extern import StatusError, extern_kernel
from pm_perm.ops.matching import max_weight_matching
from pm_perm.ops.partial_orders import partial_order_loglik, partial_order_loglik_sum
from pm_perm.ops.permanent import log_permanent, permutation_marginals
from pm_perm.ops.plackett_luce import plackett_luce_loglik, plackett_luce_loglik_sum

W = pt.matrix("W")
U = pt.vector("u")
W0 = np.random.default_rng(0).normal(size=(4, 4))
U0 = W0[0]
ORDERS = np.array([[0, 1, -1, -1], [1, 0, 2, 3]])


def _with_grad(x, wrt):
    return [x, pt.grad(x.sum(), wrt)]


# (name, inputs, input values, outputs, C symbols the compiled graph must call)
GRAPHS = [
    ("log_permanent", [W], [W0], _with_grad(log_permanent(W), W) + [permutation_marginals(W)],
     ["pm_perm_log_permanent_kernel"]),
    ("glynn", [W], [W0], _with_grad(log_permanent(W, method="glynn"), W),
     ["pm_perm_log_permanent_glynn_kernel"]),
    ("bethe", [W], [W0], _with_grad(bethe_log_permanent(W), W) + [bethe_marginals(W)],
     ["pm_perm_bethe_kernel"]),
    ("partial_orders", [W], [W0],
     [partial_order_loglik(W, ORDERS), *_with_grad(partial_order_loglik_sum(W, ORDERS, [1, 2]), W)],
     ["pm_perm_partial_orders_kernel"]),
    ("plackett_luce", [U], [U0],
     [plackett_luce_loglik(U, ORDERS),
      *_with_grad(plackett_luce_loglik_sum(U, ORDERS, [1, 2]), U)],
     ["pm_perm_plackett_luce_kernel"]),
    ("log_esp", [U], [U0], [*_with_grad(log_esp(U, 2), U),
                            pytensor.gradient.hessian(log_esp(U, 2), U),
                            conditional_marginals(U, 1)],
     ["pm_perm_log_esp_kernel"]),
    ("matching", [W], [W0], [max_weight_matching(W)], ["pm_perm_matching_kernel"]),
    ("draw exact", [W], [W0], [PermutationExpFamily.dist(W, size=(3,))],
     ["pm_perm_permutation_draw_kernel"]),
    ("draw glynn", [W], [W0], [PermutationExpFamily.dist(W, method="glynn")],
     ["pm_perm_permutation_draw_kernel", "pm_perm_glynn_draw_kernel"]),
    ("draw bethe", [W], [W0], [PermutationExpFamily.dist(W, method="bethe")],
     ["pm_perm_huber_law_draw_kernel"]),
    ("draw PartialRanking", [W], [W0], [PartialRanking.dist(W, length_probs=np.full(5, 0.2))],
     ["pm_perm_permutation_draw_kernel"]),
    ("draw PlackettLuce", [U], [U0], [PlackettLuce.dist(U, length_probs=np.full(5, 0.2))],
     ["pm_perm_plackett_luce_draw_kernel"]),
    ("draw with a pattern", [U], [U0], [PlackettLuce.dist(U, pattern=[0, 0, 2, -1])],
     ["pm_perm_plackett_luce_draw_kernel", "pm_perm_coarsen_kernel"]),
    ("draw cardinality", [U], [U0],
     [ConditionalBernoulli.dist(U, 2), NChooseK.dist(U, np.full(5, 0.2)),
      OrdinalNChooseK.dist(U, counts=[2, 1, 1])],
     ["pm_perm_cardinality_draw_kernel"]),
]


def _llvm(f):
    """LLVM IR of a compiled numba graph function, with every library numba linked into it."""
    return "".join(f.vm.jit_fn.inspect_llvm().values())


@pytest.mark.parametrize("name,inputs,values,outputs,symbols", GRAPHS, ids=[g[0] for g in GRAPHS])
def test_graphs_call_the_kernels_by_symbol_and_do_not_compile_them(
        name, inputs, values, outputs, symbols):
    """The compiled graph declares (calls) each kernel's C symbol and holds no function of
    ``pm_perm.kernels`` (numba's mangled names hold ``7pm_perm7kernels``): before the C symbols,
    the Bethe logp+grad graph held 13 such functions and took 7.5 s to compile."""
    with pytensor.config.change_flags(numba__cache=False):  # compile here, inspectable IR
        f = pytensor.function(inputs, outputs, mode="NUMBA")
    f(*values)
    ir = _llvm(f)
    for symbol in symbols:
        assert re.search(rf"^declare .*@{symbol}\(", ir, flags=re.M), symbol
    kernel_code = [line for line in ir.splitlines() if "7pm_perm7kernels" in line]
    assert kernel_code == [], kernel_code[:3]


def test_the_guard_sees_an_inlined_kernel():
    """The same check on a graph that calls a kernel by inlining it (a numba wrapper calling an
    njit kernel directly) finds the kernel's functions: the test above can fail."""
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.link.numba.dispatch import basic as numba_basic
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    from pm_perm.kernels.permanent import log_permanent_and_marginals_core

    class _Inlined(Op):
        __props__ = ()

        def make_node(self, x):
            return Apply(self, [x], [pt.dscalar()])

        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = np.asarray(0.0)

    @register_funcify_default_op_cache_key(_Inlined)
    def _numba_inlined(op, node, **kwargs):
        @numba_basic.numba_njit
        def inlined(x):
            return np.array(log_permanent_and_marginals_core(np.ascontiguousarray(x))[0])

        return inlined, 1

    with pytensor.config.change_flags(numba__cache=False):
        f = pytensor.function([W], _Inlined()(W), mode="NUMBA")
    assert np.isfinite(f(W0))
    assert any("7pm_perm7kernels" in line for line in _llvm(f).splitlines())


class _Errors(StatusError):
    messages = ((ValueError, ""), (ValueError, "M = {} is beyond {}"), (RuntimeError, "plain {{}}"))


def test_status_error_raises_the_mapped_type_and_message_from_compiled_code():
    from pm_perm._numba import njit

    @njit
    def check(status, m):
        if status != 0:
            raise _Errors(status, m, 26)
        return m

    assert check(0, 3) == 3
    with pytest.raises(ValueError, match=r"^M = 30 is beyond 26$") as info:
        check(1, 30)
    assert type(info.value) is ValueError
    with pytest.raises(RuntimeError, match=r"^plain \{\}$"):
        check(2, 0)


def test_extern_kernel_python_call_checks_its_buffers():
    f64 = types.CPointer(types.float64)

    def body(x, n, out):
        for i in range(n):
            out[i] = 2.0 * x[i]
        return n

    kernel = extern_kernel("pm_perm_test_double", types.intp(f64, types.intp, f64), body)()
    x, out = np.arange(3.0), np.empty(3)
    assert kernel(x, 3, out) == 3 and out.tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(TypeError, match="C-contiguous float64"):
        kernel(np.arange(3), 3, out)  # int64 buffer
    with pytest.raises(TypeError, match="C-contiguous float64"):
        kernel(np.arange(6.0)[::2], 3, out)


def test_processes_on_an_empty_cache_compile_a_kernel_once(tmp_path):
    """Two processes that need the same kernel at the same time on an empty numba cache: one
    compiles it, the other waits for the lock and loads it from the cache (one cache hit in
    all; without the lock both would compile, as pytest-xdist's workers did)."""
    code = ("import pm_perm.ops.matching as m; "
            "print(m._EXTERN().compiled.cache_hits)")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    hits = sorted(int(p.communicate(timeout=300)[0].split()[-1]) for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert hits == [0, 1]


def test_a_low_priority_process_compiles_without_the_lock(monkeypatch):
    """A process at niceness >= 10 (e.g. `.ci/run`'s packaging check beside the suite) must not
    hold the compile lock: the busy machine starves it while normal processes wait for it."""
    import fcntl

    from pm_perm.ops import extern

    calls = []
    monkeypatch.setattr(fcntl, "flock", lambda handle, op: calls.append(op))

    def body(x):
        return x

    for niceness, locked in ((19, False), (10, False), (0, True)):
        calls.clear()
        monkeypatch.setattr(os, "nice", lambda inc, n=niceness: n)
        with extern._one_compiler("pm_perm_test_priority", body):
            pass
        assert bool(calls) is locked, (niceness, calls)


def test_an_exception_inside_a_c_kernel_is_raised_not_ignored():
    """issue 53, s.7: numba prints an exception raised in a cfunc ("Exception ignored in
    <numba.core.cpu.CPUContext>") and returns 0; the Python call must raise instead."""
    f64 = types.CPointer(types.float64)

    def body(x, n, out):
        total = 0.0
        for i in range(n):
            total += x[i]
        out[0] = 1.0 / total  # ZeroDivisionError for a zero sum (numba's Python error model)
        return 0

    kernel = extern_kernel("pm_perm_test_divide", types.intp(f64, types.intp, f64), body)()
    out = np.empty(1)
    assert kernel(np.array([1.0, 1.0]), 2, out) == 0 and out[0] == 0.5
    with pytest.raises(RuntimeError, match="pm_perm_test_divide raised ZeroDivisionError") as info:
        kernel(np.zeros(2), 2, out)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert kernel(np.array([2.0, 2.0]), 2, out) == 0 and out[0] == 0.25  # and it still works


def test_the_unraisable_hook_is_restored_after_a_kernel_call():
    """pm_perm replaces ``sys.unraisablehook`` only while a kernel call runs (it must not change
    the interpreter's hook for other code); a report from other code meanwhile still reaches the
    previous hook."""
    import sys
    from types import SimpleNamespace

    from pm_perm.ops.extern import raise_swallowed

    before = sys.unraisablehook
    with raise_swallowed("nothing"):
        assert sys.unraisablehook is not before
    assert sys.unraisablehook is before
    with pytest.raises(RuntimeError, match="inner raised ValueError"):
        with raise_swallowed("inner"):
            sys.unraisablehook(SimpleNamespace(exc_value=ValueError("x")))
    assert sys.unraisablehook is before


def _raising_log_permanent_kernel():
    """A kernel of the log-permanent's signature that raises ZeroDivisionError (for a monkeypatch
    of pm_perm.ops.permanent's kernel)."""
    from pm_perm.ops.permanent import _SIGNATURE

    def body(W, M, P, marginals):
        total = 0.0
        for i in range(M):
            total += W[i] - W[i]
        return 1.0 / total  # ZeroDivisionError (numba's Python error model)

    return extern_kernel("pm_perm_test_raising_log_permanent", _SIGNATURE, body)


@pytest.fixture
def raising_permanent(monkeypatch):
    from pm_perm.ops import permanent

    monkeypatch.setitem(permanent._EXTERN, "dp", _raising_log_permanent_kernel())
    permanent._batch_runner.cache_clear()
    yield
    permanent._batch_runner.cache_clear()


# numba's C wrapper prints the exception through sys.unraisablehook (pytest reports that as a
# warning): what matters is that the call raises
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("mode", ["python", "numba"])
def test_an_exception_inside_a_kernel_stops_a_compiled_graph(raising_permanent, mode):
    """issue 53, s.7: numba's C wrapper prints an exception of a kernel and returns 0, which
    read as a valid log-permanent. Through an Op, in PyTensor's Python mode (``perform``) and in
    a graph compiled by numba (the kernel called by its symbol), the call raises instead."""
    from pm_perm._modes import PYTHON_MODE
    from pm_perm.ops.extern import KERNEL_RAISED

    with pytensor.config.change_flags(numba__cache=False):
        f = pytensor.function([W], log_permanent(W),
                              mode=PYTHON_MODE if mode == "python" else "NUMBA")
    if mode == "python":
        with pytest.raises(RuntimeError, match="raised ZeroDivisionError") as info:
            f(W0)
        assert isinstance(info.value.__cause__, ZeroDivisionError)
    else:
        message = KERNEL_RAISED.format("pm_perm_test_raising_log_permanent")
        with pytest.raises(RuntimeError, match=re.escape(message)):
            f(W0)
