"""Every PyTensor Op that pm_perm defines has a numba and a JAX implementation.

The Ops are discovered, not listed: every subclass of ``pytensor.graph.op.Op`` defined in a module
of :mod:`pm_perm.ops` or :mod:`pm_perm.distributions` (RandomVariables included), found by
importing the modules and walking their classes. An Op has an implementation on a backend when
its OWN class is registered with that backend's dispatch:

* numba: ``numba_funcify``, ``numba_funcify_default_op_cache_key`` or
  ``numba_funcify_and_cache_key`` (:mod:`pytensor.link.numba.dispatch.basic`; pm_perm registers
  with ``register_funcify_default_op_cache_key``); a RandomVariable: ``numba_core_rv_funcify``
  (:mod:`pytensor.link.numba.dispatch.random`, the core draw PyTensor's RandomVariable
  implementation calls).
* JAX: ``jax_funcify`` (the registrations of :mod:`pm_perm.backends.jax.dispatch`); a
  RandomVariable: ``jax_sample_fn`` (:mod:`pytensor.link.jax.dispatch.random`, the sampler
  PyTensor's JAX RandomVariable implementation calls).

Its own class, not a parent's: an inherited registration would silently run the parent's
kernel (``PermutationExpFamilyBetheRV`` and ``PermutationExpFamilyGlynnRV`` subclass
``PermutationExpFamilyRV`` but draw differently). Ops that genuinely lack an implementation are
listed below, each with its reason; an entry that no longer applies (the class is gone, or it
has the implementation now) fails as well, so the lists stay current.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.random.op import RandomVariable

import pm_perm.distributions
import pm_perm.ops
from tests._jax import require_jax, shared_rng_copied

PACKAGES = (pm_perm.ops, pm_perm.distributions)

# --------------------------------------------------------------------------- documented exceptions

#: Op subclasses that are never an Op of a graph, on any backend: shared bases.
NOT_IN_GRAPHS = {
    "pm_perm.ops.permanent._PermanentOp": "abstract base of LogPermanent, PermutationMarginals "
    "and LogPermanentAndMarginals (the props max_m, method and the runtime checks)",
    "pm_perm.ops.partial_orders._PartialOrderOp": "abstract base of the four PartialOrderLoglik* "
    "Ops (the prop max_m and the runtime checks)",
    "pm_perm.ops.top_k._TopKOp": "abstract base of the four TopKLoglik* Ops (the prop max_k "
    "and the runtime checks)",
    "pm_perm.ops.bethe._BetheOp": "abstract base of BetheLogPermanent, BetheMarginals and "
    "BetheLogPermanentAndMarginals (the props tol and max_iter)",
    "pm_perm.ops.plackett_luce._PlackettLuceOp": "abstract base of the four PlackettLuceLoglik* "
    "Ops (their inputs, runtime checks and kernel)",
    "pm_perm.ops.linear_extensions._LinearExtensionOp": "abstract base of LinearExtensionLoglik "
    "and LinearExtensionLoglikGrad (the props family and max_cells)",
    "pm_perm.distributions._values.IntegerRV": "abstract base of pm_perm's RandomVariables (the "
    "int64 dtype and the printed name from dist_name)",
}

#: Ops compiled on purpose by their parent's implementation, on both backends.
INHERITED = {
    "pm_perm.ops._blockwise.EmptyBatchBlockwise": "PyTensor's Blockwise with a Python-linker "
    "perform for empty batches: numba (through BlockwiseWithCoreShape) and JAX (jax_funcify of "
    "Blockwise) compile it as any Blockwise, with the core Op's own implementation",
    "pm_perm.ops.permanent._KernelBlockwise": "PyTensor's Blockwise with a Python-linker perform "
    "that loops in compiled code: numba and JAX compile it as any Blockwise, with the core Op's "
    "own implementation",
    "pm_perm.ops.latent.LatentPermutationGuard": "a ViewOp (identity) marking a latent "
    "permutation's value: PyTensor's rewrites remove it before compiling, and numba and JAX "
    "compile any ViewOp left as the identity (their ViewOp registrations)",
}

#: SymbolicRandomVariables: PyTensor inlines their inner graph before compiling on either backend
#: (the rewrite ``inline_SymbolicRandomVariable``), so they run on the implementations of the Ops
#: inside it; test_the_symbolic_random_variables_compile_on_both_backends checks them.
SYMBOLIC = {
    "pm_perm.distributions.mixture.RankingMixtureRV": "a uniform for the component index, the "
    "components' RandomVariables and take_along_axis",
}

#: Ops without a JAX implementation (pm_perm's RandomVariables draw through a host callback to
#: their CPU samplers: pm_perm.backends.jax.random).
NO_JAX: dict[str, str] = {
    "pm_perm.ops.pl_tilted.PLTiltedLoglik": "experimental (issue 53, variant V3 of "
    "benchmarks/bench_small_data.py), MAP fits only; a JAX version (host callback to the numba "
    "kernel, as the partial-order Ops) follows if the variant is adopted",
    "pm_perm.ops.pl_tilted.PLTiltedLoglikSumAndGrad": "as PLTiltedLoglik",
    "pm_perm.ops.pl_tilted.PLTiltedLoglikAndGrad": "as PLTiltedLoglik",
}

#: Ops without a numba implementation: none.
NO_NUMBA: dict[str, str] = {}


# --------------------------------------------------------------------------- discovery


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def discover_ops(packages=PACKAGES):
    """``{name: class}`` of every ``Op`` subclass defined in a module of ``packages``."""
    ops = {}
    for package in packages:
        modules = [package.__name__] + [
            info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        ]
        for module_name in modules:
            module = importlib.import_module(module_name)
            for cls in vars(module).values():
                if (inspect.isclass(cls) and issubclass(cls, Op)
                        and cls.__module__ == module_name):
                    ops[_name(cls)] = cls
    return ops


OPS = discover_ops()


def _has_numba(cls):
    if issubclass(cls, RandomVariable):
        return cls in numba_core_rv_funcify.registry
    dispatchers = (numba_basic.numba_funcify, numba_basic.numba_funcify_default_op_cache_key,
                   numba_basic.numba_funcify_and_cache_key)
    return any(cls in d.registry for d in dispatchers)


def _has_jax(cls):
    from pytensor.link.jax.dispatch import jax_funcify
    from pytensor.link.jax.dispatch.random import jax_sample_fn

    import pm_perm.backends.jax.dispatch  # noqa: F401  (registers pm_perm's JAX implementations)

    if issubclass(cls, RandomVariable):
        return cls in jax_sample_fn.registry
    return cls in jax_funcify.registry


def _missing(has, exceptions):
    skip = {**NOT_IN_GRAPHS, **INHERITED, **SYMBOLIC, **exceptions}
    return sorted(name for name, cls in OPS.items() if name not in skip and not has(cls))


def _stale(has, exceptions):
    """Exception entries that no longer apply: the class is gone or has the implementation."""
    return sorted(name for name in exceptions if name not in OPS or has(OPS[name]))


# --------------------------------------------------------------------------- tests


def test_discovery_finds_the_ops_and_random_variables():
    """Not vacuous: the walk finds Ops of every kind (core Ops of each ops module, Blockwise
    subclasses, RandomVariables of each distribution module)."""
    for name in ("pm_perm.ops.permanent.LogPermanent", "pm_perm.ops.bethe.BetheLogPermanent",
                 "pm_perm.ops.cardinality.LogESP", "pm_perm.ops.matching.MaxWeightMatching",
                 "pm_perm.ops.partial_orders.PartialOrderLoglik",
                 "pm_perm.ops.plackett_luce.PlackettLuceLoglik",
                 "pm_perm.ops._blockwise.EmptyBatchBlockwise",
                 "pm_perm.distributions.permutation.PermutationExpFamilyBetheRV",
                 "pm_perm.distributions.plackett_luce.PlackettLuceRV",
                 "pm_perm.distributions.n_choose_k.NChooseKRV"):
        assert name in OPS


def test_every_op_has_a_numba_implementation():
    missing = _missing(_has_numba, NO_NUMBA)
    assert not missing, (
        f"Ops without a numba implementation of their own: {missing}. Register one (pm_perm "
        "uses register_funcify_default_op_cache_key; RandomVariables numba_core_rv_funcify) or "
        "list the Op in NO_NUMBA with the reason"
    )


def test_every_op_has_a_jax_implementation():
    require_jax()
    missing = _missing(_has_jax, NO_JAX)
    assert not missing, (
        f"Ops without a JAX implementation of their own: {missing}. Register one in "
        "pm_perm.backends.jax.dispatch (jax_funcify; RandomVariables jax_sample_fn) or list the "
        "Op in NO_JAX with the reason"
    )


def test_the_numba_exceptions_are_current():
    assert not _stale(_has_numba, NO_NUMBA)
    assert not _stale(_has_numba, NOT_IN_GRAPHS)


def test_the_jax_exceptions_are_current():
    require_jax()
    assert not _stale(_has_jax, NO_JAX)
    assert not _stale(_has_jax, NOT_IN_GRAPHS)


def test_the_inherited_implementations_are_blockwise():
    """The INHERITED Ops are Blockwise (or ViewOp) subclasses without a registration of their
    own, so that both backends compile them as PyTensor's Blockwise (or ViewOp)."""
    from pytensor.compile.ops import ViewOp

    def parent(cls):
        return Blockwise if issubclass(cls, Blockwise) else ViewOp

    for name in INHERITED:
        assert name in OPS
        cls = OPS[name]
        assert issubclass(cls, (Blockwise, ViewOp)) and not _has_numba(cls)
    require_jax()
    from pytensor.link.jax.dispatch import jax_funcify

    for name in INHERITED:
        assert not _has_jax(OPS[name])
        assert jax_funcify.dispatch(OPS[name]) is jax_funcify.dispatch(parent(OPS[name]))


def test_the_symbolic_random_variables_compile_on_both_backends():
    """The SYMBOLIC Ops are SymbolicRandomVariables without a registration of their own, whose
    draws compile on numba and JAX (the draws' distribution: tests/distributions)."""

    import numpy as np
    import pymc as pm
    from pymc.distributions.distribution import SymbolicRandomVariable

    import pm_perm

    for name in SYMBOLIC:
        assert name in OPS
        assert issubclass(OPS[name], SymbolicRandomVariable) and not _has_numba(OPS[name])
    y = pm_perm.distributions.RankingMixture.dist(
        w=[0.5, 0.5], comp_dists=[pm_perm.PlackettLuce.dist([1.0, 0.0, -1.0]),
                                  pm_perm.PartialRanking.dist(np.eye(3))], size=4)
    assert type(y.owner.op).__module__ + "." + type(y.owner.op).__qualname__ in SYMBOLIC
    modes = ["NUMBA"]
    try:
        import jax  # noqa: F401
        modes.append("JAX")
    except ImportError:
        pass
    for mode in modes:
        with shared_rng_copied():
            draws = np.asarray(pm.draw(y, random_seed=1, mode=mode))
        assert draws.shape == (4, 3)
        assert np.array_equal(np.sort(draws, axis=1), np.tile(np.arange(3), (4, 1)))
