"""The catalogue of bad inputs and what the user sees, produced by running each case.

``.venv/bin/python scripts/failure_catalogue.py --out docs/guide/failures.md`` regenerates the
docs page from real runs (the path is checked before the cases run, and the page is written
atomically: a failed or interrupted run leaves the old page; without ``--out`` the page is
printed); ``tests/test_failure_catalogue.py`` runs the same cases and checks each outcome
against the ``expect`` column, so the page cannot drift from the code.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import shutil
import tempfile
import warnings
from pathlib import Path

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


_TMP = {}


def _tmp():
    """A scratch folder for the file cases; its path is shown as ``<tmp>`` on the page."""
    if "dir" not in _TMP:
        _TMP["dir"] = Path(tempfile.mkdtemp(prefix="pm_perm_catalogue_"))
        atexit.register(shutil.rmtree, _TMP["dir"], ignore_errors=True)
    return _TMP["dir"]


def _letor(name, first_line=None):
    """A small LETOR file (3 queries of 4 documents) whose first line may be replaced."""
    rng = np.random.default_rng(0)
    lines = []
    for q in range(3):
        for d in range(4):
            x = rng.normal(size=3)
            lines.append(f"{d % 3} qid:{q} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in
                                                        enumerate(x)))
    if first_line is not None:
        lines[0] = first_line
    from pm_perm._io import write_text

    return write_text(_tmp() / name, "\n".join(lines) + "\n")


def _cli(*args):
    """Run ``pm-perm`` and raise ``exit <status>`` with its first stderr line unless it exits 0."""
    from pm_perm.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse refuses a bad setting with exit status 2
            code = stop.code
    if code:
        lines = [line for line in err.getvalue().splitlines() if "error" in line or "warn" in line]
        raise type(f"exit {code}", (Exception,), {})(lines[-1] if lines else "")
    return "ok"


def _json_to_fifo():
    """``--json`` naming a FIFO that ``cat`` reads: the reader gets the whole JSON and the FIFO
    stays a FIFO (it used to be replaced by a regular file, its reader getting nothing)."""
    import json
    import os
    import stat
    import subprocess

    fifo = _tmp() / "results.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"), "--model",
             "ridge", "--json", str(fifo), "--overwrite")
        text = reader.communicate(timeout=60)[0]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    assert "ndcg@1" in json.loads(text)["test"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    return "ok"


def _json_to_stdout():
    """``--json -``: standard output carries the JSON document alone."""
    import json

    from pm_perm.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"),
                     "--model", "ridge", "--json", "-"])
    assert code == 0 and "ndcg@1" in json.loads(out.getvalue())["test"]
    assert "test metrics" in err.getvalue()
    return "ok"


def _output_created_meanwhile():
    """A new output (no overwrite) that another run creates while this one writes it."""
    from pm_perm._io import atomic_path, write_text

    path = _tmp() / "race.json"
    path.unlink(missing_ok=True)
    with atomic_path(path, overwrite=False) as tmp:
        tmp.write_text("{}\n")
        write_text(path, '{"run": "the other run"}\n')  # the other run finishes first
    return "ok"


def _json_nan():
    from pm_perm._io import write_json

    notes = write_json(_tmp() / "nan.json", {"ndcg": float("nan")})
    assert (_tmp() / "nan.json").read_text().count("null") == 1
    raise type("null + warning", (Exception,), {})(notes[0])


def _steep_model():
    """A badly scaled log-posterior whose optimum one L-BFGS-B iteration cannot reach."""
    with pm.Model() as model:
        s = pm.Data("prior_sigma", 1.0)
        theta = pm.Normal("theta", 0.0, sigma=s, shape=2)
        pm.Potential("lik", -1e4 * ((theta - np.array([300.0, -2.0])) ** 2).sum())
    return model


def _map_maxiter():
    from pm_perm.inference import map_path

    return map_path(_steep_model(), [1.0], maxiter=1)


def _find_map_maxiter():
    import warnings

    import pm_perm

    with _steep_model():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyMC's "did not converge" warning
            fit = pm.find_MAP(return_inferencedata=True, jitter=False, progressbar=False,
                              maxiter=1)
    return pm_perm.check_find_map(fit)


def _ranker_outlier():
    from pm_perm.learning_to_rank.data import read_letor
    from pm_perm.learning_to_rank.ordinal import OrdinalRanker

    split = read_letor(_letor("outlier.txt", "2 qid:0 1:1000000 2:0.1 3:-0.2"))
    theta = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(split).theta_
    assert np.all(np.isfinite(theta))
    return theta


def _preflib(name, text):
    """A PrefLib file in the scratch folder (shown as ``<tmp>``)."""
    path = _tmp() / name
    path.write_bytes(text.encode())
    return str(path)


def _preflib_beyond_budget():
    """A ``.soi`` file of 2,000 alternatives and 100 distinct top-1 orders (3.1 MiB as a table)
    read with ``PM_PERM_MEMORY_BUDGET=1M``: the same check refuses, at the default budget of
    2 GiB, a file whose table would pass 2 GiB."""
    import os

    from pm_perm.preferences import read_preflib

    M, n = 2000, 100
    path = _preflib("wide.soi", f"# NUMBER ALTERNATIVES: {M}\n"
                    + "".join(f"# ALTERNATIVE NAME {i}: a{i}\n" for i in range(1, M + 1))
                    + "".join(f"1: {i}\n" for i in range(1, n + 1)))
    old = os.environ.get("PM_PERM_MEMORY_BUDGET")
    os.environ["PM_PERM_MEMORY_BUDGET"] = "1M"
    try:
        return read_preflib(path)
    finally:
        if old is None:
            del os.environ["PM_PERM_MEMORY_BUDGET"]
        else:
            os.environ["PM_PERM_MEMORY_BUDGET"] = old


def _pl_weights_set_to_inf():
    """A PlackettLuce model whose weights (pm.Data) are set to inf after it is built."""
    from pm_perm import PlackettLuce

    with pm.Model() as model:
        w = pm.Data("w", np.array([1.0]))
        PlackettLuce("r", np.zeros(3), weights=w, observed=np.array([[0, 1, 2]]))
    model.set_data("w", np.array([np.inf]))
    return model.compile_logp()({})


def _pl_no_item():
    """PlackettLuce's logp with utilities whose length (0) is known only at run time."""
    from pm_perm import PlackettLuce

    u, y = pt.vector("u"), pt.lvector("y")
    return pm.logp(PlackettLuce.dist(u), y).eval({u: np.zeros(0), y: np.zeros(0, np.int64)})


def _swap_step_bad_start():
    """The swap step built at a start value that is not a permutation (as ``pm.sample`` with
    ``initvals={"y": [0, 0, 1]}`` builds it)."""
    from pm_perm import PermutationExpFamily
    from pm_perm.inference.step_methods import PermutationSwapMetropolis

    with pm.Model() as model:
        y = PermutationExpFamily("y", logits=np.zeros((3, 3)))
    with model:
        return PermutationSwapMetropolis([y], initial_point={"y": np.array([0, 0, 1])})


def _mixture_point_without_weights():
    from pm_perm.preferences.fitting import posterior_params

    return posterior_params({"W": np.zeros((2, 3, 3)), "length_probs": np.full(4, 0.25)},
                            "full")


def _cases():
    from pm_perm import (
        ConditionalBernoulli,
        NChooseK,
        OrdinalNChooseK,
        PartialRanking,
        PermutationExpFamily,
        PlackettLuce,
    )
    from pm_perm._io import check_outputs
    from pm_perm.kernels.bethe import bethe_log_permanent as bethe_kernel
    from pm_perm.kernels.esp import log_esp
    from pm_perm.kernels.permanent import log_permanent
    from pm_perm.kernels.permutation_sampler import sample_permutations
    from pm_perm.learning_to_rank.metrics import ndcg_at_k
    from pm_perm.ops.bethe import bethe_log_permanent as bethe_op
    from pm_perm.ops.cardinality import expected_topk_gain, log_expected_topk_gain
    from pm_perm.ops.permanent import log_permanent as log_permanent_op
    from pm_perm.preferences import read_preflib

    W3 = np.zeros((3, 3))
    infeasible = np.array([[-np.inf, -np.inf, 0.0], [-np.inf, -np.inf, 0.0], [0.0, 0.0, 0.0]])
    nan3 = W3.copy()
    nan3[0, 1] = np.nan
    theta = np.array([0.5, -1.0, 2.0, 0.0])
    huge3 = W3.copy()
    huge3[0, 0] = 1.5e308  # finite, but sums of such logits overflow float64
    u3 = np.array([0.5, -1.0, 2.0])
    theta_inf = np.array([0.5, -np.inf, 1.0, -np.inf])  # 2 finite logits of 4
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
        # issue 19: outputs, fits, draws, budgets, extreme inputs, messages
        ("pm-perm learn-to-rank", "--json naming the --train file",
         lambda: _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"),
                      "--model",
                      "ridge", "--json", _letor("a.txt")), "exit 2"),
        ("pm-perm learn-to-rank", "--predictions naming an input, even with --overwrite",
         lambda: _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"),
                      "--model",
                      "ridge", "--predictions", _letor("b.txt"), "--overwrite"), "exit 2"),
        ("pm-perm learn-to-rank", "--json naming an existing file (no --overwrite)",
         lambda: _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"),
                      "--model",
                      "ridge", "--json", _letor("c.txt")), "exit 2"),
        ("pm-perm learn-to-rank",
         "--json in a folder that does not exist (checked before any work)",
         lambda: _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"),
                      "--model",
                      "ridge", "--json", str(_tmp() / "missing" / "out.json")), "exit 2"),
        ("pm-perm learn-to-rank", "a directory given as --train",
         lambda: _cli("learn-to-rank", "--train", str(_tmp()), "--test",
                      _letor("b.txt")), "exit 2"),
        ("pm-perm learn-to-rank", "a relevance label of 1000000",
         lambda: _cli("learn-to-rank", "--train", _letor("h.txt",
                                                         "1000000 qid:0 1:0.1 2:0.2 3:0.3"),
                      "--test", _letor("b.txt")), "exit 2"),
        ("pm-perm learn-to-rank",
         "feature id 2000000000 (a dense matrix of 12 x 2e9 float64: 179 GiB)",
         lambda: _cli("learn-to-rank", "--train", _letor("f.txt", "1 qid:0 1:0.1 2000000000:1"),
                      "--test", _letor("b.txt")), "exit 2"),
        ("pm-perm learn-to-rank", "a feature value of 1e300",
         lambda: _cli("learn-to-rank", "--train", _letor("v.txt", "1 qid:0 1:1e300 2:0.2 3:0.3"),
                      "--test", _letor("b.txt")), "exit 2"),
        ("strict JSON", "a NaN result (NaN is not JSON)", _json_nan, "null + warning"),
        ("MAP fit", "L-BFGS-B stopped by its iteration limit", _map_maxiter, "MapFitError"),
        ("check_find_map", "pm.find_MAP stopped by its iteration limit (PyMC only warns)",
         _find_map_maxiter, "MapFitError"),
        ("MAP fit", "ordinal ranker, a training feature value of 1e6 (standardised)",
         _ranker_outlier, "ok"),
        ("NChooseK", "draw with count_probs [-0.5, 1, 0.5, 0, 0]",
         lambda: pm.draw(NChooseK.dist(theta, [-0.5, 1, 0.5, 0, 0]), random_seed=0),
         "ValueError"),
        ("OrdinalNChooseK", "draw with counts [1, 1, 1] (not summing to D = 4)",
         lambda: pm.draw(OrdinalNChooseK.dist(theta, counts=[1, 1, 1]), random_seed=0),
         "ValueError"),
        ("PermutationExpFamily", "logp of the non-integer float value [0.4, 1, 2]",
         lambda: pm.logp(PermutationExpFamily.dist(logits=W3),
                         pt.as_tensor(np.array([0.4, 1, 2]))).eval(), "-inf"),
        ("OrdinalNChooseK", "logp of the float label 0.5",
         lambda: pm.logp(OrdinalNChooseK.dist(theta, counts=[2, 1, 1]),
                         pt.as_tensor(np.array([0.5, 0, 1, 2]))).eval(), "-inf"),
        ("PermutationExpFamily", "method='bethe' draw beyond its work budget (M = 200)",
         lambda: pm.draw(PermutationExpFamily.dist(
             np.random.default_rng(0).normal(size=(200, 200)), method="bethe",
             max_work=4_000_000), random_seed=0), "RuntimeError"),
        ("permanent Op", "symbolic shape, M = 30 at run time",
         lambda: (lambda W: log_permanent_op(W).eval({W: np.zeros((30, 30))}))(pt.matrix("W")),
         "ValueError"),
        ("PermutationExpFamily", "observed of batch shape (5,), logits of batch shape (2,)",
         lambda: _observed(PermutationExpFamily, logits=np.zeros((2, 3, 3)),
                           observed=np.tile(np.arange(3), (5, 1))), "ValueError"),
        ("PlackettLuce", "draw with a NaN utility",
         lambda: pm.draw(PlackettLuce.dist([0.5, np.nan, 2.0]), random_seed=0), "ValueError"),
        ("PlackettLuce", "length_probs with M entries (not M + 1)",
         lambda: PlackettLuce.dist(u3, length_probs=[0.2, 0.3, 0.5]), "ValueError"),
        ("PlackettLuce", "weights 1.5 (not a count)",
         lambda: PlackettLuce.dist(u3, weights=1.5), "ValueError"),
        ("PlackettLuce", "logp of the non-integer float value [0.4, 1, -1]",
         lambda: pm.logp(PlackettLuce.dist(u3), pt.as_tensor(np.array([0.4, 1, -1]))).eval(),
         "-inf"),
        ("PartialRanking", "draw with logits admitting no permutation",
         lambda: pm.draw(PartialRanking.dist(infeasible), random_seed=0), "ValueError"),
        ("PartialRanking", "draw with a NaN logit",
         lambda: pm.draw(PartialRanking.dist(nan3), random_seed=0), "ValueError"),
        ("PartialRanking", "length_probs summing to 2",
         lambda: pm.logp(PartialRanking.dist(W3, length_probs=[0.2, 0.4, 0.6, 0.8]),
                         np.array([0, 1, -1])).eval(), "ParameterValueError"),
        ("PartialRanking", "weights 1.5 (not a count)",
         lambda: PartialRanking.dist(W3, weights=1.5), "ValueError"),
        ("PartialRanking", "logp of the non-integer float value [0.4, 1, -1]",
         lambda: pm.logp(PartialRanking.dist(W3), pt.as_tensor(np.array([0.4, 1, -1]))).eval(),
         "-inf"),
        # adversarial review, 2026-11-27
        ("top-K gain", "target class 4 of 4 classes (0..3)",
         lambda: expected_topk_gain(theta, 4, 2), "ValueError"),
        ("top-K gain", "K = 3 with only 2 finite logits (gain 0, not NaN)",
         lambda: log_expected_topk_gain(np.array([0.5, 1.0, -np.inf, -np.inf]), 0, 3).eval(),
         "-inf"),
        ("NChooseK", "draw with most mass on more items than there are finite logits",
         lambda: pm.draw(NChooseK.dist(theta_inf, [0.1, 0.1, 0.2, 0.6, 0.0]), random_seed=0),
         "ok"),
        ("NChooseK", "count_probs with mass only on counts no value has",
         lambda: pm.logp(NChooseK.dist(theta_inf, [0, 0, 0, 0.5, 0.5]),
                         np.array([1, 0, 1, 0])).eval(), "ParameterValueError"),
        ("ConditionalBernoulli", "draw of k = 3 with only 2 finite logits",
         lambda: pm.draw(ConditionalBernoulli.dist(theta_inf, 3), random_seed=0), "ValueError"),
        ("NChooseK", "observed labels of width 3 for 4 logits",
         lambda: _observed(NChooseK, logits=theta, count_probs=np.full(5, 0.2),
                           observed=np.array([[1, 1, 0]])), "ValueError"),
        ("PlackettLuce", "weights (pm.Data) set to inf after the model is built",
         _pl_weights_set_to_inf, "-inf"),
        ("Bethe kernel", "logits admitting no permutation, no row or column all -inf",
         lambda: bethe_kernel(infeasible), "ValueError"),
        ("PermutationExpFamily", "method='bethe', logits admitting no permutation",
         lambda: pm.logp(PermutationExpFamily.dist(infeasible, method="bethe"),
                         np.array([2, 0, 1])).eval(), "ParameterValueError"),
        ("PermutationExpFamily", "logits of shape (0, 0)",
         lambda: PermutationExpFamily.dist(np.zeros((0, 0))), "ValueError"),
        ("PlackettLuce", "utilities of length 0 known only at run time (a symbolic vector)",
         _pl_no_item, "ParameterValueError"),
        ("PrefLib reader", "a header declaring 1000000000 alternatives and naming 3",
         lambda: read_preflib(_preflib("huge.soc", "# NUMBER ALTERNATIVES: 1000000000\n"
                                       + "".join(f"# ALTERNATIVE NAME {i}: {c}\n"
                                                 for i, c in enumerate("ABC", 1))
                                       + "1: 1,2,3\n")), "ValueError"),
        ("PrefLib reader", "a count of 10^23 (beyond int64)",
         lambda: read_preflib(_preflib("count.soc", "".join(
             f"# ALTERNATIVE NAME {i}: {c}\n" for i, c in enumerate("ABC", 1))
             + "# NUMBER ALTERNATIVES: 3\n100000000000000000000000: 1,2,3\n")), "ValueError"),
        ("PrefLib reader", "distinct orders whose dense table passes the memory budget "
         "(2,000 alternatives, PM_PERM_MEMORY_BUDGET=1M)", _preflib_beyond_budget, "ValueError"),
        ("pm-perm preferences", "--prior-sigma -1 (a prior scale)",
         lambda: _cli("preferences", _preflib("b.soc", "".join(
             f"# ALTERNATIVE NAME {i}: {c}\n" for i, c in enumerate("ABC", 1))
             + "# NUMBER ALTERNATIVES: 3\n2: 1,2,3\n1: 2,1,3\n"), "--prior-sigma", "-1"),
         "exit 2"),
        ("pm-perm learn-to-rank", "--test naming the --train file",
         lambda: _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("a.txt"),
                      "--model",
                      "ridge"), "exit 2"),
        ("output path", "a folder that refuses new files even to root (/proc)",
         lambda: check_outputs({"--json": "/proc/result.json"}), "OutputPathError"),
        # issue 53: devices, FIFOs, the standard output, two runs writing one new file
        ("pm-perm learn-to-rank",
         "--json /dev/full (a device is written directly, never replaced; the disk is full)",
         lambda: _cli("learn-to-rank", "--train", _letor("a.txt"), "--test", _letor("b.txt"),
                      "--model", "ridge", "--json", "/dev/full"), "exit 1"),
        ("pm-perm learn-to-rank", "--json naming a FIFO read by another program",
         _json_to_fifo, "ok"),
        ("pm-perm learn-to-rank", "--json - (the JSON alone on standard output, the table on "
         "standard error)", _json_to_stdout, "ok"),
        ("output path", "a new output that another run creates before this one writes it "
         "(no --overwrite)", _output_created_meanwhile, "OutputPathError"),
        ("swap MCMC step", "a start value that is not a permutation, [0, 0, 1]",
         _swap_step_bad_start, "ValueError"),
        ("ranking metrics", "NDCG with a relevance label of 2000 (2^2000 overflows)",
         lambda: ndcg_at_k(np.array([1.0, 0.0]), np.array([2000, 0]), np.array([0, 2]), k=1),
         "ValueError"),
        ("rankings analysis", "a K = 2 point without its mixture weights",
         _mixture_point_without_weights, "ValueError"),
    ]


def run_case(call):
    """Return ``(kind, message)``: the exception's class name and text, or the value's class."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call()
    except Exception as err:  # noqa: BLE001 - the catalogue records whatever is raised
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        if "dir" in _TMP:
            msg = msg.replace(str(_TMP["dir"]), "<tmp>")
        return type(err).__name__, msg
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
        "**The promise.** pm_perm never writes over your inputs: an output path that is an",
        "input is refused even with `--overwrite`, an output that exists is refused without it,",
        "and every output path is checked before any work starts. Outputs are written",
        "atomically (a temporary file in the same folder, then a rename, with the permissions",
        "a plain write gives: an existing file keeps its mode), so an interrupt, a full disk or",
        "a concurrent run leaves the old file or the complete new one, never a partial one;",
        "of two runs writing the same new file without `--overwrite`, one is refused (the",
        "check and the write are one step), never silently replaced. A device or FIFO",
        "(`--json /dev/null`) is written directly, never replaced (a write error there, such",
        "as `/dev/full`'s, is an output failure), and `--json -` writes the JSON to standard",
        "output (the summary then goes to standard error);",
        "when one output fails the others are still written (exit status 1). A",
        "fit that failed (an optimiser that did not converge, a sampler that was interrupted or",
        "returned NaN draws) is an error (exit status 3; 130 for Ctrl-C), never a number (in your",
        "own models, `pm_perm.check_find_map(fit)` raises `MapFitError` for a `pm.find_MAP` whose",
        "optimiser stopped early, where PyMC only warns); the",
        "JSON is strict (non-finite values become `null` with a recorded warning) and records",
        "what reproduces the run: pm_perm and library versions, command line, settings, seed,",
        "draws/chains, each input's path, size and sha256, and every warning. Every",
        "distribution's draws refuse exactly the parameters its logp refuses, and values",
        "outside the support (including non-integer floats) get `logp = -inf` (a literal list",
        "given to `pm.logp` is first converted to the integer dtype by PyMC itself, as for every",
        "discrete PyMC distribution: pass a float tensor to have it checked). Bad or extreme input",
        "gets an error saying what is wrong, where (file and line) and what to do; long-running",
        "methods have a budget that fails in seconds naming the alternative.",
        "",
        "**Environment.** numba caches pm_perm's compiled kernels in `~/.cache/pm_perm/numba`",
        "(`$NUMBA_CACHE_DIR/pm_perm` when `NUMBA_CACHE_DIR` is set), else next to the package",
        "(`__pycache__`) or in `~/.cache/numba`. If none is writable (a",
        "read-only installation and no writable HOME), `import pm_perm` still works: it",
        "compiles without a cache and warns once (`NumbaCacheWarning`); set `NUMBA_CACHE_DIR`",
        "to a writable folder to keep compiled code between runs. PyTensor's cache",
        "(`~/.pytensor`) is then moved to a temporary folder (one warning; choose it with",
        "`PYTENSOR_FLAGS=base_compiledir=<folder>`).",
        "",
        "Each row below was produced by running the case (`scripts/failure_catalogue.py`);",
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", metavar="PATH",
                   help="write the page to PATH (e.g. docs/guide/failures.md), atomically; "
                   "default: print it")
    args = p.parse_args(argv)
    from pm_perm._io import check_output_option, write_text

    check_output_option(p, "--out", args.out)  # before the cases run
    page = render()
    if args.out:
        write_text(args.out, page)
    else:
        print(page, end="")


if __name__ == "__main__":
    main()
