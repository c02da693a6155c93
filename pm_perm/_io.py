"""Safe output files, shared by every writer of the package (private helpers).

The rules (the promise of ``docs/guide/failures.md``):

* an output is never one of the inputs, not even with ``overwrite=True``
  (:func:`check_outputs`, comparing resolved paths and, for existing files, inode identity);
* an output that already exists is refused unless ``overwrite=True``, both before any work
  (:func:`check_outputs`) and when the file is written: the check and the write are one atomic
  step (the finished temporary file is hard-linked to the target name, which fails if a file of
  that name has appeared meanwhile), so of two runs writing the same new file one succeeds and
  the other is refused, never silently replaced;
* every output is checked before any work starts (its folder exists and a file can be created
  in it, which is tried; it is not a directory), so a long fit is never lost to a typo in an
  output path;
* every file is written atomically: into a temporary file in the same folder, flushed and
  ``fsync``-ed, then renamed over the target with :func:`os.replace` (``overwrite=True``) or
  linked to it (a new file). A reader, a concurrent
  run or an interrupt sees either the old file or the complete new one, never a partial or
  interleaved file. An interrupted write leaves no temporary file behind. The file gets the
  permissions a plain ``open(path, "w")`` would give it: an existing file's mode is kept, a new
  file's is ``0o666`` less the process's umask (not the ``0o600`` of the temporary file). A
  symbolic link is followed (the file it names is written, as ``open`` would), never replaced;
* a path that is not a regular file is never replaced: a character device (``/dev/null``), a
  FIFO or a block device is opened and written directly, once the whole output is ready (a
  block device, whose content is lost, needs ``overwrite=True``; a stream needs nothing), and a
  write error there (``ENOSPC`` from ``/dev/full``, a reader that went away) is raised like
  any other; a socket is refused. ``"-"`` (:data:`STDOUT`) is the standard output;
  :func:`reserve_stdout` keeps everything else printed off it;
* JSON is strict: non-finite floats (NaN, inf, which JSON cannot represent) become ``null``
  and each replacement is reported in the returned warnings (:func:`to_strict_json`).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "STDOUT",
    "OutputPathError",
    "atomic_path",
    "check_outputs",
    "file_record",
    "make_folder",
    "reserve_stdout",
    "same_file",
    "save_figure",
    "to_strict_json",
    "write_json",
    "write_text",
]


#: the output path meaning standard output (``--json -``)
STDOUT = "-"

#: the standard output that ``"-"`` writes to, while :func:`reserve_stdout` is active
_RESULTS_STDOUT = contextvars.ContextVar("pm_perm_results_stdout", default=None)


class OutputPathError(ValueError):
    """An output path that would overwrite an input or an existing file, or cannot be written."""


def _is_stdout(path) -> bool:
    return isinstance(path, str) and path == STDOUT


def _kind(path) -> str:
    """What ``path`` is now: ``"stdout"``, ``"missing"``, ``"file"`` (a regular file, possibly
    through a symbolic link), ``"directory"``, ``"stream"`` (a character device such as
    ``/dev/null``, or a FIFO), ``"block"`` (a block device) or ``"socket"``."""
    if _is_stdout(path):
        return "stdout"
    try:
        mode = os.stat(path).st_mode  # follows symbolic links, as open() does
    except OSError:  # no such file (or a dangling link, or "file/x"): open() will decide
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISBLK(mode):
        return "block"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "stream"  # character device, FIFO


@contextlib.contextmanager
def reserve_stdout():
    """Within this context the standard output carries only the outputs written to ``"-"``
    (:data:`STDOUT`): everything else printed to it (summaries, progress bars) goes to the
    standard error, so that ``--json -`` gives a clean JSON document."""
    token = _RESULTS_STDOUT.set(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _RESULTS_STDOUT.reset(token)


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file, however spelled (``../``, symlinks, hard
    links); a missing path is compared by its resolved name."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(outputs, inputs=(), *, overwrite=False, directories=()):
    """Check every output path before any work; raise :class:`OutputPathError` naming the problem.

    Parameters
    ----------
    outputs : dict
        Option name (for the message, e.g. ``"--json"``) -> file path; None entries are skipped.
        ``"-"`` is the standard output (at most one output may be); a character device or a
        FIFO is written directly, so it needs no ``overwrite`` (a block device does).
    inputs : iterable of path
        Input files: no output may be one of them (even with ``overwrite``).
    overwrite : bool
        Allow replacing outputs that exist (never inputs).
    directories : dict or iterable of (name, (directory, [file names]))
        Output folders (created if missing) and the files that will be written into them; each
        such file is checked like an output.

    An output file's folder must exist; an output folder is created by the writer if its
    parent exists.

    Returns
    -------
    list of Path
        All output files, resolved.
    """
    inputs = [Path(p) for p in inputs if p is not None]
    to_stdout = [name for name, p in outputs.items() if _is_stdout(p)]
    if len(to_stdout) > 1:
        raise OutputPathError(f"{' and '.join(to_stdout)}: only one output can be the "
                              "standard output (-)")
    files = [(name, Path(p)) for name, p in outputs.items()
             if p is not None and not _is_stdout(p)]
    created = set()  # output folders that will be created (their parent exists)
    for name, (folder, names) in dict(directories).items():
        if folder is None:
            continue
        folder = Path(folder)
        if any(same_file(folder, i) for i in inputs):
            raise OutputPathError(f"{name} {folder} is an input file of this run")
        if folder.exists() and not folder.is_dir():
            raise OutputPathError(f"{name} {folder}: exists and is not a directory")
        if not folder.exists():
            if _existing_folder(folder.parent) is None:
                raise OutputPathError(
                    f"{name} {folder}: its parent folder {folder.parent} does not exist")
            created.add(folder)
        files += [(name, folder / n) for n in names]
    seen = {}
    for name, path in files:
        for i in inputs:
            if same_file(path, i):
                raise OutputPathError(
                    f"{name} {path} is an input file of this run; refusing to overwrite it "
                    "(choose another output path)"
                )
        key = path.resolve()
        if key in seen:
            raise OutputPathError(f"{name} and {seen[key]} are the same file {path}")
        seen[key] = name
        kind = _kind(path)
        if kind == "directory":
            raise OutputPathError(f"{name} {path} is a directory; give a file path")
        if kind == "socket":
            raise OutputPathError(f"{name} {path} is a socket, which cannot be written as a "
                                  "file; choose another output path")
        if kind == "stream":  # written directly (never replaced): nothing to lose
            if not os.access(path, os.W_OK):
                raise OutputPathError(f"{name} {path}: permission denied")
            continue
        if kind != "missing" and not overwrite:
            raise OutputPathError(_exists_message(name, path))
        if kind == "block":
            continue  # written in place, never replaced
        if path.is_symlink():  # the writer follows the link (atomic_path)
            path = path.resolve()
        # a folder still to be created must be creatable: its parent must be writable
        parent = (path.parent.parent if path.parent in created
                  else _existing_folder(path.parent))
        if parent is None:
            raise OutputPathError(
                f"{name} {path}: its folder {path.parent} does not exist (create it first)")
        problem = _cannot_write_in(parent)
        if problem is not None:
            raise OutputPathError(
                f"{name} {path}: the folder {parent} is not writable ({problem}); choose "
                "another output path")
    return [p.resolve() for _, p in files]


def _exists_message(name, path, later=False):
    when = " (created by another program while this run worked)" if later else ""
    return (f"{name} {path} already exists{when}; pass --overwrite (overwrite=True) to replace "
            "it, or choose another path")


def _cannot_write_in(folder: Path):
    """None if a file can be created in ``folder`` (tried: a temporary file is created and
    removed), else the reason. A permission test alone (``os.access``) passes for the
    superuser and on file systems that refuse files anyway (``/proc``, ``/sys``, some network
    mounts), and the run would only fail when it writes its results."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".pm_perm_probe.", dir=folder)
    except OSError as err:
        return err.strerror or type(err).__name__
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return None


def make_folder(name, folder) -> Path:
    """Create the output folder ``folder`` with its missing parents, before any work; raise
    :class:`OutputPathError` naming the option ``name`` when it cannot be (a file in the way,
    no permission). Check its files with :func:`check_outputs` after."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputPathError(f"{name} {folder}: cannot create this folder ({err})") from err
    return folder


def _existing_folder(folder: Path):
    """``folder`` if it is an existing directory, else None."""
    return folder if folder.is_dir() else None


def _mode_for(path: Path) -> int:
    """Permission bits a plain write of ``path`` would leave: an existing file's, else
    ``0o666`` less the process's umask."""
    with contextlib.suppress(OSError):
        return path.stat().st_mode & 0o777
    return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux: the umask is in /proc (no process-wide change to read it)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)  # elsewhere: set and restore (a brief process-wide change)
    os.umask(old)
    return old


@contextlib.contextmanager
def atomic_path(path, *, overwrite=True):
    """Context manager yielding a temporary path to write the output ``path`` into; on success
    the finished file becomes ``path`` atomically, on any error (or interrupt) it is removed.

    Parameters
    ----------
    path : path or ``"-"``
        The output. A regular file (or a new name) gets the temporary file from the same folder
        by :func:`os.replace` (``overwrite=True``) or by :func:`os.link`, which fails if a file
        of that name exists (``overwrite=False``: :class:`OutputPathError`, the other file is
        kept). A symbolic link is followed, never replaced. A character device, a FIFO or a
        block device is opened and written directly with the finished content (never
        replaced; a block device only with ``overwrite``); ``"-"`` is the standard output.
    overwrite : bool
        Whether an existing file may be replaced.

    The temporary file keeps ``path``'s suffix, so writers that choose a format from the
    suffix (matplotlib, numpy) behave as with ``path`` itself. The result has the permissions
    of an existing ``path``, or else those of a new file (``0o666`` less the umask).
    """
    direct = _kind(path) in ("stdout", "stream", "block")
    if not direct:
        path = Path(path)
        if path.is_symlink():  # write the file it names, as open() would; keep the link
            path = path.resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
    name, suffix = Path(path).name, Path(path).suffix
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=f".tmp{suffix}",
                               dir=None if direct else path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        if direct or _kind(path) in ("stream", "block"):
            _write_directly(path, Path(tmp).read_bytes(), overwrite=overwrite)
            return
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(path))
        if overwrite:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _link_new(tmp, path):
    """Give the finished ``tmp`` the new name ``path`` in one step that fails if ``path``
    exists (:class:`OutputPathError`); ``tmp`` stays (the caller removes it)."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise OutputPathError(_exists_message("the output", path, later=True)) from None
    except OSError as err:  # a file system without hard links: claim the name, then rename
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS,
                             errno.EMLINK):
            raise
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        raise OutputPathError(_exists_message("the output", path, later=True)) from None
    try:
        os.replace(tmp, path)
    except BaseException:  # leave no empty claim behind
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _write_directly(path, data: bytes, *, overwrite):
    """Write ``data`` to the standard output (``"-"``) or into the device or FIFO ``path``
    (opened for writing, never created, truncated or replaced); every write error is raised."""
    if _is_stdout(path):
        out = _RESULTS_STDOUT.get() or sys.stdout
        out.flush()
        buffer = getattr(out, "buffer", None)
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:  # a text stream without bytes underneath (io.StringIO)
            out.write(data.decode("utf-8"))
        out.flush()
        return
    kind = _kind(path)
    if kind == "block" and not overwrite:
        raise OutputPathError(_exists_message("the output", path))
    if kind not in ("stream", "block"):
        raise OutputPathError(f"{path} is no longer a device or FIFO; not written")
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_text(path, text, *, overwrite=True):
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`; ``"-"`` is the
    standard output); ``overwrite=False`` refuses a file that exists when it is written."""
    with atomic_path(path, overwrite=overwrite) as tmp:
        tmp.write_bytes(text.encode("utf-8"))
    return str(path)


def to_strict_json(obj, *, where="$"):
    """``(clean, warnings)``: ``obj`` with numpy scalars/arrays as Python values and every
    non-finite float replaced by None, and one warning string per replacement (its JSON path)."""
    warnings = []

    def clean(x, at):
        if isinstance(x, dict):
            return {str(k): clean(v, f"{at}.{k}") for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v, f"{at}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, np.ndarray):
            return clean(x.tolist(), at)
        if isinstance(x, np.generic):
            x = x.item()
        if isinstance(x, float) and not math.isfinite(x):
            warnings.append(f"{at} was {x} (not representable in JSON), written as null")
            return None
        if x is None or isinstance(x, bool | int | float | str):
            return x
        return str(x)

    return clean(obj, where), warnings


def write_json(path, obj, *, overwrite=True):
    """Write ``obj`` as strict JSON (``allow_nan=False``) atomically (:func:`write_text`).

    Non-finite floats become null; returns the list of warnings about them (see
    :func:`to_strict_json`); the caller records them (the CLI adds them to the JSON itself).
    """
    data, warnings = to_strict_json(obj)
    text = json.dumps(data, indent=2, allow_nan=False)
    write_text(path, text + "\n", overwrite=overwrite)
    return warnings


def save_figure(fig, path, *, overwrite=True, **kwargs):
    """``fig.savefig`` into ``path`` atomically (:func:`atomic_path`); returns ``str(path)``."""
    with atomic_path(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, **kwargs)
    return str(path)


def file_record(path, *, chunk=1 << 20):
    """``{"path", "size", "sha256"}`` of an input file (to make a run reproducible)."""
    path = Path(path)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return {"path": str(path.resolve()), "size": path.stat().st_size, "sha256": h.hexdigest()}


def check_output_option(parser, option, path, inputs=()):
    """Check the output file ``path`` of a command-line ``option`` before any work; a bad path
    ends the run with ``parser.error`` (one line, exit status 2).

    For scripts whose outputs are results (benchmarks, docs generators): missing folders are
    created (with their parents); an older result file may be replaced, one of ``inputs`` never.
    Nothing is checked when ``path`` is None or empty.
    """
    if not path:
        return
    try:
        make_folder(option, Path(path).parent)
        check_outputs({option: path}, inputs, overwrite=True)
    except OutputPathError as err:
        parser.error(str(err))
