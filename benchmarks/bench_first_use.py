"""First use: compile cost of the demo's matching model against a plain PyMC model, cold and warm.

Run: ``.venv/bin/python benchmarks/bench_first_use.py [--repeats 2]``, or
``.venv/bin/python benchmarks/bench_first_use.py --graphs [--cases exact,bethe,...]``

For each model it runs, each in a FRESH Python subprocess:

* ``cold``: ``NUMBA_CACHE_DIR`` and PyTensor's ``base_compiledir`` point at NEW empty temporary
  folders (nothing compiled by an earlier run can be reused);
* ``warm``: a second subprocess on the same folders (what every later run of the user pays).

and times, in that process, ``import pm_perm`` (matching model only; numba kernels are loaded or
compiled lazily), ``model.compile_logp()`` with one evaluation, ``model.compile_dlogp()`` with
one evaluation, and ``pm.find_MAP()`` (which compiles its own value-and-gradient function).
Wall time and CPU time (user + system of the process) of each step are printed; the machine may be
shared, so the ratios of CPU times measured in the same run are the figures to compare.

With ``--graphs`` it instead times, per distribution, the two graphs every user compiles: the
log-probability with its gradient (``pytensor.function([params], [logp, grad])`` and one call)
and a draw (``pytensor.function([params], rv)`` and one call), small parameters (a (4, 4)
logits matrix, D = 5). Each graph is compiled in a FRESH subprocess with a NEW empty PyTensor
cache and a WARM numba cache (the kernels' own compilation is not counted: one earlier process
compiled them into a numba cache folder made for this run), next to plain PyMC references
(``Dirichlet``, ``Categorical``) measured the same way in the same run. This is the cost that
each new PyTensor graph (logp, dlogp, find_MAP, nutpie, prior / posterior predictive) pays.

Models (same data size, d = 4 parameters):

* ``matching``: ``examples/demo.py``'s model, ``PermutationExpFamily`` over 200 graphs of M = 8
  with ``edge_logits`` of (200, 8, 8, 4) features;
* ``logistic``: a plain PyMC logistic regression, 1,600 rows x 4 features (as many observations
  as the matching model has rows), ``Normal`` prior, ``Bernoulli(logit_p=...)`` likelihood.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from _harness import clock, run_child  # benchmarks/_harness.py

STEPS = ("import", "compile_logp", "compile_dlogp", "find_MAP")


def make_data(path, n_graphs=200, M=8, seed=2026):
    """Data of both models, made in the parent process (so the children compile nothing for it):
    the matching data are exact draws from the model at the true theta, as in the demo."""
    import numpy as np

    from pm_perm.kernels.permutation_sampler import sample_permutations

    rng = np.random.default_rng(seed)
    theta_true = np.array([1.0, -0.7, 0.4, 0.0])
    x = rng.normal(size=(n_graphs, M, M, theta_true.size))
    x[:, np.arange(M), np.arange(M), 0] += 1.5
    y = sample_permutations(x @ theta_true, rng=rng)
    x_lr = rng.normal(size=(n_graphs * M, theta_true.size))
    y_lr = (rng.random(n_graphs * M) < 1 / (1 + np.exp(-(x_lr @ theta_true)))).astype(np.int64)
    np.savez(path, x=x, y=y, x_lr=x_lr, y_lr=y_lr)


def child(model_name, data_path):
    """Runs in the subprocess: time each step, print one JSON line."""
    out = {}
    w0, c0 = clock()
    import numpy as np
    import pymc as pm

    if model_name == "matching":
        import pm_perm
    w1, c1 = clock()
    out["import"] = (w1 - w0, c1 - c0)

    data = np.load(data_path)
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 2.0, shape=data["x"].shape[-1])
        if model_name == "matching":
            W = pm_perm.edge_logits(data["x"], theta)
            pm_perm.PermutationExpFamily("y", logits=W, observed=data["y"])
        else:
            pm.Bernoulli("y", logit_p=pm.math.dot(data["x_lr"], theta), observed=data["y_lr"])
    ip = model.initial_point()

    w0, c0 = clock()
    logp = model.compile_logp()
    logp(ip)
    w1, c1 = clock()
    out["compile_logp"] = (w1 - w0, c1 - c0)

    dlogp = model.compile_dlogp()
    dlogp(ip)
    w2, c2 = clock()
    out["compile_dlogp"] = (w2 - w1, c2 - c1)

    with model:
        pm.find_MAP(progressbar=False, jitter=False)
    w3, c3 = clock()
    out["find_MAP"] = (w3 - w2, c3 - c2)
    print("RESULT " + json.dumps(out))


#: ``--graphs`` cases: name -> (what is built, in the child); references are plain PyMC.
GRAPH_CASES = ("exact", "glynn", "bethe", "PartialRanking", "PlackettLuce",
               "ConditionalBernoulli", "NChooseK", "OrdinalNChooseK")
GRAPH_REFERENCES = ("Dirichlet", "Categorical")
GRAPHS = ("logp+grad", "draw")


def _graph_case(name):
    """``(inputs, values of the inputs, rv, an observed value)`` of one ``--graphs`` case."""
    import numpy as np
    import pymc as pm
    import pytensor.tensor as pt

    W = pt.tensor("W", shape=(4, 4))
    x = pt.tensor("x", shape=(5,))
    if name == "Dirichlet":
        return [x], [np.zeros(5)], pm.Dirichlet.dist(pt.exp(x)), np.full(5, 0.2)
    if name == "Categorical":
        return [x], [np.zeros(5)], pm.Categorical.dist(logit_p=x), np.array(2)
    import pm_perm

    w0, x0 = np.zeros((4, 4)), np.zeros(5)
    if name in ("exact", "glynn", "bethe"):
        rv = pm_perm.PermutationExpFamily.dist(W, method=name)
        return [W], [w0], rv, np.array([0, 1, 2, 3])
    if name == "PartialRanking":
        return [W], [w0], pm_perm.PartialRanking.dist(W), np.array([0, 1, -1, -1])
    u = pt.tensor("u", shape=(4,))
    if name == "PlackettLuce":
        return [u], [np.zeros(4)], pm_perm.PlackettLuce.dist(u), np.array([0, 1, -1, -1])
    y = np.array([0, 1, 1, 0, 0])
    if name == "ConditionalBernoulli":
        return [x], [x0], pm_perm.ConditionalBernoulli.dist(x, 2), y
    if name == "NChooseK":
        p = pt.tensor("p", shape=(6,))
        return [x, p], [x0, np.full(6, 1 / 6)], pm_perm.NChooseK.dist(x, p), y
    if name == "OrdinalNChooseK":
        return ([x], [x0], pm_perm.OrdinalNChooseK.dist(x, counts=[2, 2, 1]),
                np.array([0, 1, 1, 2, 0]))
    raise ValueError(f"unknown case {name!r}")


def graph_child(spec):
    """Runs in the subprocess: compile and call the graphs of ``spec`` (``case:graph,...``),
    timing each; one JSON line."""
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    out = {}
    for item in spec.split(","):
        name, graph = item.split(":")
        inputs, values, rv, value = _graph_case(name)
        w0, c0 = clock()
        if graph == "draw":
            f = pytensor.function(inputs, rv)
        else:
            lp = pm.logp(rv, value).sum()
            f = pytensor.function(inputs, [lp, pt.grad(lp, inputs[0])])
        f(*values)
        w1, c1 = clock()
        out[item] = (w1 - w0, c1 - c0)
    print("RESULT " + json.dumps(out))


def _child_env(numba_dir, pytensor_dir):
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = numba_dir
    flags = env.get("PYTENSOR_FLAGS", "")
    env["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, f"base_compiledir={pytensor_dir}") if f)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def graphs_main(cases, repeats):
    """The ``--graphs`` table: CPU seconds (wall in brackets) per graph, fresh PyTensor cache."""
    names = [*cases, *GRAPH_REFERENCES]
    items = [f"{n}:{g}" for n in names for g in GRAPHS]
    with tempfile.TemporaryDirectory(prefix="pm_perm_first_use_graphs_") as root:
        numba_dir = os.path.join(root, "numba")
        w0, c0 = clock()
        run_child(__file__, ["--graph-child", ",".join(items)],
                  _child_env(numba_dir, os.path.join(root, "warmup")))
        w1, _ = clock()
        print(f"warm-up (numba kernels and every graph, one process): {w1 - w0:.1f} s wall")
        results = {item: [] for item in items}
        for r in range(repeats):
            for item in items:
                pytensor_dir = os.path.join(root, f"pytensor-{r}-{item.replace(':', '-')}")
                res = run_child(__file__, ["--graph-child", item],
                                _child_env(numba_dir, pytensor_dir))
                results[item].append(res[item])
    print(f"{'distribution':22s} " + " ".join(f"{g + ' CPU (wall) s':>24s}" for g in GRAPHS))
    for n in names:
        cells = []
        for g in GRAPHS:
            runs = results[f"{n}:{g}"]
            cells.append(", ".join(f"{c:.2f} ({w:.2f})" for w, c in runs))
        label = n + (" [PyMC]" if n in GRAPH_REFERENCES else "")
        print(f"{label:22s} " + " ".join(f"{c:>24s}" for c in cells))
    return results


def run(model_name, cache_root, data_path):
    env = _child_env(os.path.join(cache_root, "numba"), os.path.join(cache_root, "pytensor"))
    return run_child(__file__, ["--child", model_name, "--data", data_path], env)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=1, help="cold/warm pairs per model")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--models", default="matching,logistic")
    p.add_argument("--graphs", action="store_true",
                   help="per-distribution logp+grad and draw graphs (fresh PyTensor cache)")
    p.add_argument("--cases", default=",".join(GRAPH_CASES), help="--graphs: which cases")
    p.add_argument("--graph-child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args.data)
        return None
    if args.graph_child:
        graph_child(args.graph_child)
        return None
    if args.graphs:
        return graphs_main(args.cases.split(","), args.repeats)
    data_dir = tempfile.TemporaryDirectory(prefix="pm_perm_first_use_data_")
    data_path = os.path.join(data_dir.name, "data.npz")
    make_data(data_path)
    models = args.models.split(",")
    results = {m: {"cold": [], "warm": []} for m in models}
    for _ in range(args.repeats):
        for m in models:  # interleaved, so load changes hit both models alike
            with tempfile.TemporaryDirectory(prefix="pm_perm_first_use_") as root:
                results[m]["cold"].append(run(m, root, data_path))
                results[m]["warm"].append(run(m, root, data_path))

    def total(r, which):  # 0 = wall, 1 = CPU
        return sum(r[s][which] for s in STEPS if s != "import")

    print(f"{'model':10s} {'cache':5s} " + " ".join(f"{s:>20s}" for s in STEPS)
          + f" {'logp+dlogp+MAP':>20s}")
    print(f"{'':16s}" + " ".join(f"{'wall / CPU s':>20s}" for _ in range(len(STEPS) + 1)))
    for m in models:
        for state in ("cold", "warm"):
            for r in results[m][state]:
                cells = [f"{r[s][0]:8.2f} / {r[s][1]:8.2f}" for s in STEPS]
                cells.append(f"{total(r, 0):8.2f} / {total(r, 1):8.2f}")
                print(f"{m:10s} {state:5s} " + " ".join(f"{c:>20s}" for c in cells))
    if "matching" in results and "logistic" in results:
        for state in ("cold", "warm"):
            cpu = [total(a, 1) / total(b, 1)
                   for a, b in zip(results["matching"][state], results["logistic"][state],
                                   strict=True)]
            wall = [total(a, 0) / total(b, 0)
                    for a, b in zip(results["matching"][state], results["logistic"][state],
                                    strict=True)]
            print(f"{state}: matching / logistic (logp + dlogp + find_MAP): CPU "
                  + ", ".join(f"{x:.2f}x" for x in cpu) + "; wall "
                  + ", ".join(f"{x:.2f}x" for x in wall))
    data_dir.cleanup()
    return results


if __name__ == "__main__":
    main()
