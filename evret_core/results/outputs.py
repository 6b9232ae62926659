"""Writing output files safely: check the path before any work, never destroy what is not a regular file.

The rules every ``--output`` follows:

- ``-`` is standard output.
- A regular file (or a new name) is replaced atomically: the data goes to a temporary file in the same folder,
  which is renamed over the old one, so a reader never sees half a file and a failed run leaves the old one whole.
  A new file gets the permissions the umask allows (like any other tool's output); a replaced file keeps its mode.
- A symbolic link is followed: its target is written (atomically when it is a regular file) and the link stays.
- A FIFO or a device (``/dev/null``, ``/dev/stdout``, a terminal) is written through, never replaced.
- A folder, a socket, a missing folder, an unwritable folder, a read-only file, or one of the run's own input
  files is refused by :func:`check_output_path` before any work is done.
- An output that is a folder (an MLflow store, ``--mlflow DIR``) is checked by :func:`check_output_folder`: never
  an input, never a file, and writable.

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

from evret_core.errors import EvretError

__all__ = ["STDOUT", "check_output_folder", "check_output_path", "check_outputs", "files_named", "write_output"]

STDOUT = "-"
"""The output name meaning standard output."""


def _target(path: Path) -> Path:
    """The file a write to ``path`` lands in: the final target when ``path`` is a symbolic link."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _fail(option: str, path: str | Path, problem: str) -> EvretError:
    return EvretError(f"{option} {path}: {problem}" if option else f"{path}: {problem}")


def check_output_path(path: str | Path, inputs: Sequence[str | Path] = (), option: str = "--output") -> None:
    """Raise an :class:`EvretError` naming ``option`` when ``path`` cannot be written as :func:`write_output`
    would write it, or when it is one of ``inputs`` (the files the run reads). Writes nothing: call it before
    any work, so a bad path fails in a second instead of after the whole run."""
    if str(path) == STDOUT:
        return
    if not str(path):
        raise _fail(option, "''", "empty file name")
    given = Path(path)
    target = _target(given)
    for source in inputs:
        if str(source) == STDOUT:
            continue
        try:
            same = os.path.samefile(target, source)
        except OSError:  # one of them does not exist
            same = os.path.abspath(target) == os.path.abspath(source)
        if same:
            raise _fail(option, path, f"is also an input of this run ({source}); write the output elsewhere")
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
    MLflow store, ``--mlflow DIR``): it is one of ``inputs`` (a BEIR dataset folder) or an input file, it is a
    file, or neither it nor its parent folder (when it is new) exists and can be written in. Writes nothing that
    stays: call it before any work. Whether an existing folder holds the right kind of files is the caller's check."""
    if not str(path):
        raise _fail(option, "''", "empty folder name")
    target = Path(os.path.realpath(path))
    for source in inputs:
        if str(source) == STDOUT:
            continue
        try:
            same = os.path.samefile(target, source)
        except OSError:
            same = os.path.abspath(target) == os.path.abspath(source)
        if same:
            raise _fail(option, path, f"is also an input of this run ({source}); give another folder")
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
    """The existing files among ``values`` and inside option mappings and lists: the input files a command's options
    name, such as ``--retriever-option corpus=docs.jsonl`` or a precomputed answers file. Folders are not walked
    (an index folder may be large); a command whose input is a folder lists its files itself."""
    found: list[str] = []
    for value in values:
        if isinstance(value, Mapping):
            found += files_named(value.values())
        elif isinstance(value, (list, tuple)):
            found += files_named(value)
        elif isinstance(value, (str, Path)) and str(value) and str(value) != STDOUT:
            try:
                if Path(value).is_file():
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
