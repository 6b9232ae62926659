"""Writing output files safely: check the path before any work, never destroy what is not a regular file.

The rules every ``--output`` follows:

- ``-`` is standard output.
- A regular file (or a new name) is replaced atomically: the data goes to a temporary file in the same folder,
  which is renamed over the old one, so a reader never sees half a file and a failed run leaves the old one whole.
  A new file gets the permissions the umask allows (like any other tool's output); a replaced file keeps its mode.
- A symbolic link is followed: its target is written (atomically when it is a regular file) and the link stays.
- A FIFO or a device (``/dev/null``, ``/dev/stdout``, a terminal) is written through, never replaced.
- A folder, a socket, a missing folder, an unwritable folder, a read-only file, one of the run's own input files
  (or its SQLite companions ``-wal``, ``-shm``, ``-journal``), a file inside a folder that is an input (a BEIR
  folder, a vector store's data folder such as Milvus Lite's, LanceDB's or Chroma's named by an option), or the
  judgment cache in use (``$EVRET_CACHE_DIR/judgments.sqlite3`` and its companions: every paid LLM answer) is
  refused by :func:`check_output_path` before any work is done.
- An output that is a folder (an MLflow store, ``--mlflow DIR``) is checked by :func:`check_output_folder`: never
  an input nor inside one, never a file, and writable.

Every command that writes calls :func:`check_outputs` once, before any work, with all its outputs and all its
inputs: each output is checked as above, against every input and against the command's other outputs.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError

__all__ = ["STDOUT", "check_output_folder", "check_output_path", "check_outputs", "files_named", "write_output"]

STDOUT = "-"
"""The output name meaning standard output."""


def _target(path: Path) -> Path:
    """The file a write to ``path`` lands in: the final target when ``path`` is a symbolic link."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _fail(option: str, path: str | Path, problem: str) -> EvretError:
    return EvretError(f"{option} {path}: {problem}" if option else f"{path}: {problem}")


SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database ``X`` (``X-wal``...): replacing one corrupts or loses ``X``'s data."""


def _same(target: Path, source: str | Path) -> bool:
    try:
        return os.path.samefile(target, source)
    except OSError:  # one of them does not exist
        return os.path.abspath(target) == os.path.abspath(source)


def _inside(target: Path, folder: str | Path) -> bool:
    """Whether ``target`` is ``folder`` or lies under it (links followed), ``folder`` being an existing folder
    other than the file system's root."""
    try:
        if not Path(folder).is_dir():
            return False
        top = os.path.realpath(folder)
    except (OSError, ValueError):
        return False
    if top == os.path.dirname(top):  # "/": an option's value that is no data folder
        return False
    where = os.path.realpath(target)
    return where == top or where.startswith(top.rstrip(os.sep) + os.sep)


def _judgment_cache() -> Path:
    """The judgment cache every LLM part uses by default (``$EVRET_CACHE_DIR/judgments.sqlite3``)."""
    from evret_core.io.paths import default_cache_path

    return default_cache_path()


def _refuse_inputs(target: Path, path: str | Path, inputs: Sequence[str | Path], option: str, what: str) -> None:
    """The checks against what the run reads: an input or its SQLite companions, a file inside an input folder, the
    judgment cache in use. ``what`` ends the message (write the output elsewhere / give another folder)."""
    sources = [source for source in inputs if str(source) != STDOUT and str(source)]
    for source in sources:
        if _same(target, source):
            raise _fail(option, path, f"is also an input of this run ({source}); {what}")
    for source in sources:
        for suffix in SQLITE_COMPANIONS:
            if _same(target, f"{source}{suffix}"):
                raise _fail(option, path, f"is SQLite's {suffix[1:]} file of an input of this run ({source}); "
                                          f"{what}")
    for source in sources:
        if _inside(target, source):
            raise _fail(option, path, f"is inside {source}, a folder this run reads (a dataset or a store named "
                                      f"by an option); {what}")
    cache = _judgment_cache()
    for name in (cache, *(Path(f"{cache}{suffix}") for suffix in SQLITE_COMPANIONS)):
        if _same(target, name) or (target.name == name.name and _same(target.parent, name.parent)):
            raise _fail(option, path, f"is the judgment cache in use ({name}): every stored LLM answer would be "
                                      f"lost; {what}")


def check_output_path(path: str | Path, inputs: Sequence[str | Path] = (), option: str = "--output") -> None:
    """Raise an :class:`EvretError` naming ``option`` when ``path`` cannot be written as :func:`write_output`
    would write it, or when it is what the run reads: one of ``inputs`` (files or folders) or its SQLite
    companions, a file inside an input folder, or the judgment cache in use. Writes nothing: call it before any
    work, so a bad path fails in a second instead of after the whole run."""
    if str(path) == STDOUT:
        return
    if not str(path):
        raise _fail(option, "''", "empty file name")
    given = Path(path)
    target = _target(given)
    _refuse_inputs(target, path, inputs, option, "write the output elsewhere")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        raise _fail(option, path, "a part of the path is a file, not a folder") from None
    except OSError as exc:
        raise _fail(option, path, f"cannot be used ({exc.strerror})") from None
    if info is not None:
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise _fail(option, path, "is a folder; give a file name")
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            if not os.access(target, os.W_OK):
                raise _fail(option, path, "is not writable")
            return
        if not stat.S_ISREG(mode):
            raise _fail(option, path, "is not a regular file, a FIFO or a device")
        if not os.access(target, os.W_OK):
            raise _fail(option, path, "is read-only; it is not replaced")
    folder = target.parent
    if not folder.exists():
        raise _fail(option, path, f"folder {folder} does not exist")
    if not folder.is_dir():
        raise _fail(option, path, f"{folder} is not a folder")
    try:  # os.access says yes to root on a read-only mount: only a real file answers for sure
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".check", dir=folder)
    except OSError as exc:
        raise _fail(option, path, f"cannot write in folder {folder} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_folder(path: str | Path, inputs: Sequence[str | Path] = (), option: str = "--output") -> None:
    """Raise an :class:`EvretError` naming ``option`` when folder ``path`` cannot take a command's files (an
    MLflow store, ``--mlflow DIR``): it is one of ``inputs`` (a BEIR dataset folder) or an input file, or inside an
    input folder, it is a file, or neither it nor its parent folder (when it is new) exists and can be written in.
    Writes nothing that stays: call it before any work. Whether an existing folder holds the right kind of files is
    the caller's check."""
    if not str(path):
        raise _fail(option, "''", "empty folder name")
    target = Path(os.path.realpath(path))
    _refuse_inputs(target, path, inputs, option, "give another folder")
    if target.exists() and not target.is_dir():
        raise _fail(option, path, "is a file, not a folder")
    folder = target if target.exists() else target.parent
    if not folder.is_dir():
        raise _fail(option, path, f"folder {folder} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".evret.", suffix=".check", dir=folder)
    except OSError as exc:
        raise _fail(option, path, f"cannot write in folder {folder} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def files_named(values: Iterable[Any]) -> list[str]:
    """The existing files and folders among ``values`` and inside option mappings and lists: the inputs a
    command's options name, such as ``--retriever-option corpus=docs.jsonl``, a precomputed answers file or a vector
    store's folder (``uri=milvus.db``, ``persist_directory=chroma``). Folders are not walked (an index folder may be
    large): an output inside one is refused by :func:`check_output_path`."""
    found: list[str] = []
    for value in values:
        if isinstance(value, Mapping):
            found += files_named(value.values())
        elif isinstance(value, (list, tuple)):
            found += files_named(value)
        elif isinstance(value, (str, Path)) and str(value) and str(value) != STDOUT:
            try:
                if Path(value).is_file() or Path(value).is_dir():
                    found.append(str(value))
            except (OSError, ValueError):  # a prompt, not a path: too long a name, a NUL character
                continue
    return found


def check_outputs(outputs: Mapping[str, str | Path | None], inputs: Iterable[str | Path | None] = (),
                  options: Iterable[Any] = ()) -> None:
    """The output guard of every command that writes: call it once, before any work, with every output (option
    name -> path, None when not given), the input files (paths, given or not yet existing) and the options that
    may name more input files (:func:`files_named`). Each output is checked by :func:`check_output_path` against
    all the inputs; two outputs naming the same file (or both ``-``) are refused too, since the second write
    would destroy the first."""
    given = {option: path for option, path in outputs.items() if path is not None}
    sources = [str(p) for p in inputs if p is not None and str(p)] + files_named(options)
    seen: dict[str, str] = {}
    for option, path in given.items():
        check_output_path(path, inputs=sources, option=option)
        if str(path) == STDOUT:
            key = STDOUT
        else:
            target = _target(Path(path))
            key = str(os.path.realpath(target)) if target.exists() else os.path.abspath(target)
        if key in seen:
            where = "standard output" if key == STDOUT else "the same file"
            raise _fail(option, path, f"{seen[key]} writes to {where}; give each output its own file")
        seen[key] = option


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _chunks(data: str | Iterable[str]) -> Iterable[str]:
    return (data,) if isinstance(data, str) else data


def write_output(path: str | Path, data: str | Iterable[str], option: str = "") -> None:
    """Write ``data`` (a string or an iterable of strings) as UTF-8 to ``path`` by the rules of this module.

    Errors are :class:`EvretError`s naming ``option`` (when given) and the path; a failed write of a regular
    file leaves the old file as it was and no temporary file behind.
    """
    if str(path) == STDOUT:
        for chunk in _chunks(data):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    target = _target(Path(path))
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _fail(option, path, f"cannot be written ({exc.strerror})") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        mode = info.st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
            raise _fail(option, path, "is not a regular file, a FIFO or a device")
        sys.stdout.flush()  # /dev/stdout: what was printed comes first
        try:
            with open(target, "w", encoding="utf-8") as handle:
                for chunk in _chunks(data):
                    handle.write(chunk)
        except OSError as exc:
            raise _fail(option, path, f"cannot be written ({exc.strerror})") from None
        return
    _replace(target, data, info, option, path)


def _replace(target: Path, data: str | Iterable[str], info: os.stat_result | None, option: str,
             shown: str | Path) -> None:
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise _fail(option, shown, f"folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _fail(option, shown, f"cannot write in folder {folder} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # mkstemp makes the file 0600; give it the mode the old file had, or what the umask allows a new one
            os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask())
            for chunk in _chunks(data):
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _fail(option, shown, f"cannot be written ({exc.strerror})") from None
        raise
