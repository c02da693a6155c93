"""Safe output files, shared by every writer of the package (private helpers).

The rules (the promise of ``docs/guide/failures.md``):

* an output is never one of the inputs, not even with ``overwrite=True``
  (:func:`check_outputs`, comparing resolved paths and, for existing files, inode identity);
* an output that already exists is refused unless ``overwrite=True``;
* every output is checked before any work starts (its folder exists and a file can be created
  in it, which is tried; it is not a directory), so a long fit is never lost to a typo in an
  output path;
* every file is written atomically: into a temporary file in the same folder, flushed and
  ``fsync``-ed, then renamed over the target with :func:`os.replace`. A reader, a concurrent
  run or an interrupt sees either the old file or the complete new one, never a partial or
  interleaved file. An interrupted write leaves no temporary file behind. The file gets the
  permissions a plain ``open(path, "w")`` would give it: an existing file's mode is kept, a new
  file's is ``0o666`` less the process's umask (not the ``0o600`` of the temporary file).
* JSON is strict: non-finite floats (NaN, inf, which JSON cannot represent) become ``null``
  and each replacement is reported in the returned warnings (:func:`to_strict_json`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "OutputPathError",
    "atomic_path",
    "check_outputs",
    "file_record",
    "make_folder",
    "same_file",
    "save_figure",
    "to_strict_json",
    "write_json",
    "write_text",
]


class OutputPathError(ValueError):
    """An output path that would overwrite an input or an existing file, or cannot be written."""


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
    files = [(name, Path(p)) for name, p in outputs.items() if p is not None]
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
        if path.is_dir():
            raise OutputPathError(f"{name} {path} is a directory; give a file path")
        if path.exists() and not overwrite:
            raise OutputPathError(
                f"{name} {path} already exists; pass --overwrite (overwrite=True) to replace "
                "it, or choose another path"
            )
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
def atomic_path(path):
    """Context manager yielding a temporary path next to ``path``; on success it replaces
    ``path`` atomically (``os.replace``), on any error (or interrupt) it is removed.

    The temporary file keeps ``path``'s suffix, so writers that choose a format from the
    suffix (matplotlib, numpy) behave as with ``path`` itself. The result has the permissions
    of an existing ``path``, or else those of a new file (``0o666`` less the umask).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                               dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
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


def write_json(path, obj):
    """Write ``obj`` as strict JSON (``allow_nan=False``) atomically.

    Non-finite floats become null; returns the list of warnings about them (see
    :func:`to_strict_json`); the caller records them (the CLI adds them to the JSON itself).
    """
    data, warnings = to_strict_json(obj)
    text = json.dumps(data, indent=2, allow_nan=False)
    write_text(path, text + "\n")
    return warnings


def save_figure(fig, path, **kwargs):
    """``fig.savefig`` into ``path`` atomically; returns ``str(path)``."""
    with atomic_path(path) as tmp:
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
