"""Kernels called from PyTensor's compiled graphs through a C symbol, not by inlining their code.

Why: numba links the LLVM code of every function a jitted function calls into the caller's module
and then optimises and compiles that whole module to machine code again. The numba
implementation of an Op is compiled inside every PyTensor function that uses it (``logp``,
``dlogp``, ``find_MAP``'s value-and-gradient, NUTS, draws, posterior predictive, ...), and each
of those layers (Op wrapper, Blockwise loop, graph function) re-compiled the whole kernel,
several times per graph on an empty PyTensor cache (``benchmarks/bench_first_use.py``).

How: the kernel is compiled ONCE (per numba cache; ``cache=True``) as a C callable
(``numba.cfunc``), its address is registered with LLVM under a fixed symbol name, and the Op's
numba implementation calls it as an ``ExternalFunction`` by that name. The graph's module then
holds only a call instruction; PyTensor's on-disk cache of the graph stays valid because the
symbol name (not an address) is what it stores, and the symbol is registered again by the Op's
funcify (which PyTensor runs before it loads or compiles a graph) in every new process.

Arguments are C scalars and pointers: a C-contiguous array is passed as ``a.ctypes`` (numba) or
by :meth:`ExternKernel.__call__` (Python), with its sizes as separate integer arguments, and the
body views it with ``numba.carray``. A random generator is passed as numpy's ``bitgen_t`` view
(:func:`bitgen_of` here, :func:`pm_perm.kernels._bitgen.generator_at` in the body), so the
kernel draws from the caller's own stream.

The callee cannot raise (a C callable has no Python exception channel): kernels exposed here
report bad input by their return value (NaN, or a status code), and the small numba wrapper in
the graph raises. :class:`StatusError` makes that raise cheap to compile. An exception the
kernel raises all the same (a ``ZeroDivisionError``, a ``MemoryError``) is printed by numba's C
wrapper and ignored, the call returning 0; so every kernel is compiled with one more argument,
a pointer to an int64 "done" cell that it sets only when its body returned, and both callers
check it: the Python call (:meth:`ExternKernel.__call__`) raises the exception itself
(:func:`raise_swallowed`), the numba call (``ExternKernel.external``, inside compiled PyTensor
graphs) raises ``RuntimeError`` (:data:`KERNEL_RAISED`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import inspect
import os
import sys
import tempfile
import threading
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import binding as ll
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from pm_perm._numba import cache_folder, cfunc, njit

__all__ = [
    "ExternKernel",
    "StatusError",
    "bitgen_of",
    "c_contiguous_out",
    "copy_back",
    "KERNEL_RAISED",
    "extern_kernel",
    "raise_swallowed",
    "value_errors",
]


#: The message of the ``RuntimeError`` a compiled graph raises when a kernel raised ({} is the
#: kernel's symbol).
KERNEL_RAISED = ("the compiled kernel {} raised an exception (printed above by numba as "
                 "'Exception ignored in ...'); inside a C callback it cannot pass the exception "
                 "on, so its result is not used")


class ExternKernel(NamedTuple):
    """A compiled C kernel: ``external`` is what numba code calls; calling the tuple itself
    runs the kernel from Python (arrays converted to pointers)."""

    compiled: object  #: the ``numba.cfunc`` object (``.ctypes`` calls it from Python)
    external: object  #: what numba code calls (a jitted caller that checks the "done" cell)
    symbol: str  #: the kernel's C symbol
    signature: object  #: the kernel's signature, without the "done" cell

    def __call__(self, *args):
        """Run the kernel from Python. Pointer arguments take C-contiguous NumPy arrays of the
        pointee's dtype (checked: a wrong buffer would be read as another type); others are
        passed as they are."""
        fn = self.compiled.ctypes
        converted = []
        for arg, ty, cty in zip(args, self.signature.args, fn.argtypes[:-1], strict=True):
            if isinstance(ty, types.CPointer):
                dtype = np.dtype(str(ty.dtype))
                if (not isinstance(arg, np.ndarray) or arg.dtype != dtype
                        or not arg.flags.c_contiguous):
                    raise TypeError(f"{self.symbol}: expected a C-contiguous {dtype} "
                                    f"array, got {type(arg).__name__} "
                                    f"{getattr(arg, 'dtype', '')}")
                arg = ctypes.cast(arg.ctypes.data, cty)
            converted.append(arg)
        done = np.zeros(1, dtype=np.int64)
        with raise_swallowed(self.symbol):
            result = fn(*converted, ctypes.cast(done.ctypes.data, fn.argtypes[-1]))
        if not done[0]:  # raised, but not through this thread's unraisable hook
            raise RuntimeError(KERNEL_RAISED.format(self.symbol))
        return result


# ------------------------------------------------------------------ exceptions in C callables
# An exception raised inside a ``numba.cfunc`` (a ZeroDivisionError, a MemoryError, a ``raise``
# in the kernel) cannot cross the C boundary: numba's wrapper prints it through
# ``sys.unraisablehook`` ("Exception ignored in <numba.core.cpu.CPUContext ...>") and returns
# zero, which reads as a valid result (status 0, log-likelihood 0). The Python call of a kernel
# collects what the hook reports on its thread during the call and raises it.

_LOCAL = threading.local()
_LOCK = threading.Lock()
_ACTIVE = [0]  # kernel calls in progress (all threads): the hook is ours only while one runs


def _unraisable_hook(unraisable):
    errors = getattr(_LOCAL, "errors", None)
    if errors is not None:
        errors.append(unraisable.exc_value)
        return
    _unraisable_hook.previous(unraisable)


_unraisable_hook.previous = sys.unraisablehook


@contextlib.contextmanager
def raise_swallowed(what):
    """Raise ``RuntimeError`` (chained to the first exception) if a compiled callback on this
    thread reported an exception through ``sys.unraisablehook`` while the block ran, instead
    of letting it be printed and ignored. ``what`` names the callback in the message.

    The interpreter's hook is replaced only while a kernel call runs (the previous hook gets
    every report from other code meanwhile) and restored after the last one ends: importing or
    using pm_perm leaves ``sys.unraisablehook`` as it was."""
    with _LOCK:
        if _ACTIVE[0] == 0:
            _unraisable_hook.previous = sys.unraisablehook
            sys.unraisablehook = _unraisable_hook
        _ACTIVE[0] += 1
    outer = getattr(_LOCAL, "errors", None)
    _LOCAL.errors = errors = []
    try:
        yield
    finally:
        _LOCAL.errors = outer
        with _LOCK:
            _ACTIVE[0] -= 1
            if _ACTIVE[0] == 0 and sys.unraisablehook is _unraisable_hook:
                sys.unraisablehook = _unraisable_hook.previous
    if errors:
        first = errors[0]
        more = f" ({len(errors) - 1} more after it)" if len(errors) > 1 else ""
        raise RuntimeError(f"the compiled kernel {what} raised {type(first).__name__}: {first}"
                           f"{more}; inside a C callback it cannot pass the exception on, so its "
                           "result is not used") from first


def extern_kernel(symbol: str, signature, py_func):
    """Return a function that compiles ``py_func`` as a C callable with ``signature`` (cached
    on disk by numba), registers it with LLVM as ``symbol`` and returns an
    :class:`ExternKernel`. The compilation happens on the first call, not at import.

    ``py_func`` must not raise (a C callable cannot) and should hold a ``version`` closure
    variable (see :func:`pm_perm.kernels.permanent.make_log_permanent_kernel`): numba's cache
    key sees the file of ``py_func`` only, not the kernels it calls.
    """

    @functools.cache
    def ensure():
        with _one_compiler(symbol, py_func):
            compiled = cfunc(_with_done_cell(signature),
                             _setting_done(py_func, signature, symbol), cache=True)
        ll.add_symbol(symbol, compiled.address)
        external = types.ExternalFunction(symbol, _with_done_cell(signature))
        return ExternKernel(compiled, _checking_done(external, signature, symbol), symbol,
                            signature)

    return ensure


# ------------------------------------------------------------------ the "done" cell of a kernel
# A C callable takes a fixed number of arguments (numba's cfunc accepts no *args), so the two
# wrappers are generated per kernel from the templates below, compiled with this file as their
# file name and named after the kernel's symbol: numba's on-disk cache files a function by file
# and name, and keys it by its code and closure, so each kernel has its own entries, and the
# closure's ``version`` (a digest of ``py_func``'s code and of the numbers and strings of its
# closure, which hold its kernels' code version) makes a changed kernel a cache miss, as for
# ``py_func`` itself. The kernel's
# body is a global of the wrapper, not a closure variable: a jitted function in a closure would
# change the cache key in every process (numba pickles it with a per-process id).

_DONE = types.CPointer(types.int64)


def _with_done_cell(signature):
    return signature.return_type(*signature.args, _DONE)


_SETTING = """
def make(version):
    def {symbol}({args}, done):
        if version is None:  # never: keeps version in the closure (the cache key)
            return body({args})
        result = body({args})
        done[0] = 1
        return result
    return {symbol}
"""

_CHECKING = """
def make(external, message):
    def {symbol}_checked({args}):
        done = np.zeros(1, dtype=np.int64)
        result = external({args}, done.ctypes)
        if done[0] == 0:
            raise RuntimeError(message)
        return result
    return {symbol}_checked
"""


def _template(source, symbol, n, namespace):
    args = ", ".join(f"a{i}" for i in range(n))
    namespace["__name__"] = __name__  # the functions' module (numba's cache imports it)
    exec(compile(source.format(symbol=symbol, args=args), __file__, "exec"),  # noqa: S102
         namespace)
    return namespace["make"]


def _setting_done(py_func, signature, symbol):
    """``py_func`` with a last argument, the "done" cell, set to 1 when ``py_func`` returns."""
    cells = tuple(c.cell_contents for c in py_func.__closure__ or ()
                  if isinstance(c.cell_contents, int | float | str | bytes))
    code = py_func.__code__
    version = hashlib.sha1(repr((py_func.__qualname__, code.co_code, code.co_consts,
                                 cells)).encode()).hexdigest()
    namespace = {"body": njit(py_func)}
    return _template(_SETTING, symbol, len(signature.args), namespace)(version)


def _checking_done(external, signature, symbol):
    """A jitted call of the C kernel ``external`` (arguments of ``signature``, plus the "done"
    cell it allocates) that raises ``RuntimeError`` when the kernel did not return."""
    make = _template(_CHECKING, symbol, len(signature.args), {"np": np})
    return njit(make(external, KERNEL_RAISED.format(symbol)))


_LOW_PRIORITY = 10  # niceness from which a process compiles without the lock (below)


@contextlib.contextmanager
def _one_compiler(symbol, py_func):
    """Let one process at a time compile or load the kernel ``symbol`` for a given numba cache.

    Processes that start together on an empty cache (parallel test workers, sampler processes)
    would each compile the same kernel (seconds to tens of seconds of CPU each); under this
    lock the first compiles and saves it, and the others wait and load it from the cache.
    An exclusive ``flock`` on a file in the temporary folder named after the symbol and the cache
    folder (:func:`pm_perm._numba.cache_folder`, which every installed copy of pm_perm shares),
    released once the kernel is compiled or loaded. Where there is no ``fcntl`` (Windows) or the
    file cannot be opened, it does nothing; nor in a process of low CPU priority (niceness 10 or
    more), which would hold the lock while the busy machine starves it, and so keep the
    processes that wait for the lock idle.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    if os.nice(0) >= _LOW_PRIORITY:
        yield  # never make a normal-priority process wait for a starved one: compile alone
        return
    source = inspect.getsourcefile(py_func)
    folder = cache_folder(source)  # the same for every installed copy of pm_perm
    key = f"{symbol}|{folder}" if folder else f"{symbol}|{numba.config.CACHE_DIR}|{source}"
    name = f"pm_perm-{os.getuid()}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.lock"
    try:
        handle = open(os.path.join(tempfile.gettempdir(), name), "a")  # noqa: SIM115
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class StatusError(Exception):
    """Base of the exceptions the numba wrappers raise for a kernel's status code.

    A subclass sets ``messages``, a tuple indexed by status of ``(exception type, template)``;
    compiled code raises ``Subclass(status, *ints)`` and Python receives
    ``exception type(template.format(*ints))``: the same type and message as the Python path
    raises, not an instance of the subclass. Why: numba compiles a message built at run time
    (``"M = " + str(m)``) into the graph, about a second of compilation in EVERY PyTensor function
    that uses the Op, while a raise with integer arguments costs nearly nothing (numba keeps the
    class and boxes the integers; the class builds the message when Python re-raises it).
    Compiled code must pass integers only (strings are boxed at run time too, and cost as much
    to compile as the concatenation). Subclasses must be module-level names (numba's cache
    pickles the class by reference).
    """

    messages: tuple = ()

    def __new__(cls, status, *args):
        exc_type, template = cls.messages[status]
        return exc_type(template.format(*args))


def value_errors(messages):
    """``StatusError.messages`` raising ``ValueError(message)`` for each of ``messages`` (plain
    strings, no format fields)."""
    return tuple((ValueError, m.replace("{", "{{").replace("}", "}}")) for m in messages)


# ----------------------------------------------------------------------------- output buffers
# A numba implementation that returns an array makes PyTensor's Blockwise / random-variable loop
# copy it into the output with numba's array assignment, whose shape-mismatch message (built from
# the shapes at run time) costs seconds of compilation in every graph (a large share of a draw
# graph's compile time). Writing into the output buffers
# PyTensor hands over (``fn.handles_out = True``) avoids it; the kernels write them directly
# when they are C-contiguous (always, for the buffers PyTensor allocates).


@njit(cache=True)
def c_contiguous_out(out):
    """``out`` when it is C-contiguous, else a C-contiguous scratch array of its shape for the
    kernel to write, copied back by :func:`copy_back`."""
    if out.flags.c_contiguous:
        return out
    return np.empty(out.shape, dtype=out.dtype)


@njit(cache=True)
def copy_back(out, buffer):
    """Copy ``buffer`` of :func:`c_contiguous_out` into ``out`` if they differ; returns
    ``out``."""
    if not out.flags.c_contiguous:
        for idx in np.ndindex(out.shape):
            out[idx] = buffer[idx]
    return out


# ----------------------------------------------------------------------------- random streams

_BITGEN_TYPE = types.NumPyRandomBitGeneratorType("bit_generator")


@intrinsic
def _bitgen_fields(typingctx, rng):
    """``(state, next_uint64, next_uint32, next_double)`` of a numba ``Generator``: the first
    four fields of numpy's ``bitgen_t`` (numpy/random/bitgen.h), as numba keeps them."""
    if not isinstance(rng, types.NumPyRandomGeneratorType):
        return None
    sig = types.UniTuple(types.uintp, 4)(rng)

    def codegen(context, builder, sig, args):
        gen = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0])
        bitgen = cgutils.create_struct_proxy(_BITGEN_TYPE)(context, builder,
                                                           value=gen.bit_generator)
        fields = [bitgen.state, bitgen.fnptr_next_uint64, bitgen.fnptr_next_uint32,
                  bitgen.fnptr_next_double]
        return context.make_tuple(builder, sig.return_type, fields)

    return sig, codegen


@njit(cache=True)
def bitgen_of(rng):
    """numpy's ``bitgen_t`` view of the numba ``Generator`` ``rng`` (a uint64 array of 4: state
    and the next_uint64 / next_uint32 / next_double function pointers), for a C kernel that
    draws from ``rng``'s own stream (its ``.ctypes`` is the kernel's argument; keep the array
    alive during the call). The kernel advances ``rng``'s state as ``rng.random()`` would."""
    fields = _bitgen_fields(rng)
    out = np.empty(4, dtype=np.uint64)
    for i in range(4):
        out[i] = fields[i]
    return out
