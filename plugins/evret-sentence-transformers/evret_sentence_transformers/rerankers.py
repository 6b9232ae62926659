"""The rerankers of this plugin: ``embedding`` (the cosine of the query's and the candidate's embeddings, with the
judges' encoder and embedding cache) and ``cross-encoder`` (a sentence-transformers ``CrossEncoder`` reading each
(query, candidate) pair together). Ties keep the first stage's order, by the contract
(:class:`evret_core.sdk.Reranker`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from evret_core.sdk import EvretError, RankedColumns, Reranker, resolve_model
from evret_sentence_transformers.devices import (
    AUTO,
    check_fp16,
    default_batch_size,
    device_option,
    resolve_device,
)
from evret_sentence_transformers.models import (
    DEFAULT_MODEL,
    EmbeddingTable,
    Encoder,
    paired_cosines,
    quiet_loading,
)

__all__ = ["CrossEncoderReranker", "EmbeddingReranker"]


class EmbeddingReranker(Reranker):
    """Scores a candidate by the cosine of its text's embedding and the query's (the packaged all-MiniLM-L6-v2 by
    default): a bi-encoder re-scorer, so each distinct text is encoded once per reranker, however many queries
    retrieve it, and with ``cache`` (true or a SQLite path, as for the ``semantic`` judge) reruns read the
    embeddings from disk. ``device``, ``batch_size`` and ``fp16`` as for the judge; the ones used are in
    :meth:`config`."""

    name = "embedding"

    def __init__(self, model: str | os.PathLike[str] = DEFAULT_MODEL, device: str = AUTO,
                 batch_size: int | None = None, cache: Any = None, fp16: bool = False) -> None:
        self.encoder = Encoder(model, device=device, batch_size=batch_size, cache=cache,
                               what="embedding reranker: option 'model'", fp16=fp16)
        self.table = EmbeddingTable()
        self.reset_stats()

    def batch_score(self, queries: Sequence[str],
                    candidates: Sequence[RankedColumns]) -> Sequence[Sequence[float] | np.ndarray]:
        self.encoder.check()
        texts = [[str(t) for t in (() if c.texts is None else c.texts)] for c in candidates]
        self.table.ensure([*queries, *(t for row in texts for t in row)], self.encoder)
        left = np.repeat(self.table.rows(list(queries)), [len(row) for row in texts])
        right = self.table.rows([t for row in texts for t in row])
        cosines = paired_cosines(self.table.matrix, left, right).astype(np.float64)
        self._pairs += len(right)
        bounds = np.cumsum([0, *(len(row) for row in texts)])
        return [cosines[bounds[i]:bounds[i + 1]] for i in range(len(texts))]

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.encoder.model_name, **self.encoder.settings()}

    def reset_stats(self) -> None:
        self.encoder.reset_stats()
        self._pairs = 0

    def stats(self) -> dict[str, Any]:
        """Since the last reset: pairs scored, texts encoded and read from the cache, and the device used."""
        return {"pairs": self._pairs, **self.encoder.stats(), **self.encoder.settings()}


_load_lock = threading.Lock()
_loaded: dict[tuple[str, str, bool], Any] = {}


class CrossEncoderReranker(Reranker):
    """Scores each (query, candidate text) pair with a sentence-transformers ``CrossEncoder`` from ``model`` (a
    model folder, or a hub name found in the local cache or on a reachable hub; resolved offline first, as the
    ``semantic`` judge's). The score is the model's raw output (a logit, no sigmoid: a sigmoid rounds clearly
    relevant pairs to 1.0 and would tie them); the model must give one score per pair (``num_labels=1``). A pair
    repeated within one call is scored once. ``max_length`` caps the tokens of a pair (the model's own limit by
    default); ``device``, ``batch_size`` and ``fp16`` as for the ``semantic`` judge."""

    name = "cross-encoder"

    def __init__(self, model: str | os.PathLike[str] | None = None, device: str = AUTO,
                 batch_size: int | None = None, max_length: int | None = None, fp16: bool = False) -> None:
        what = "cross-encoder reranker"
        if model is None or not os.fspath(model).strip():
            raise EvretError(f"{what}: option 'model' is missing: give a cross-encoder model folder or a hub name "
                             "such as cross-encoder/ms-marco-MiniLM-L6-v2")
        self.model_name = os.fspath(model)
        self.resolved = resolve_model(self.model_name, f"{what}: option 'model'")
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                       or max_length < 8):
            raise EvretError(f"{what}: option 'max_length' must be an integer >= 8, got {max_length!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise EvretError(f"{what}: option 'batch_size' must be an integer >= 1, got {batch_size!r}")
        self.max_length = max_length
        self.batch_size_option = batch_size
        self.device_option = device_option(device)
        self.fp16 = check_fp16(fp16, self.device_option, what)
        self._device: str | None = None
        self._model: Any = None
        self.reset_stats()

    @property
    def device(self) -> str:
        if self._device is None:
            self._device = resolve_device(self.device_option, self.fp16, "cross-encoder reranker")
        return self._device

    @property
    def model(self) -> Any:
        """The loaded ``CrossEncoder`` (shared in the process per model, device and precision)."""
        if self._model is None:
            key = (self.resolved.source, self.device, self.fp16)
            with _load_lock:
                model = _loaded.get(key)
                if model is None:
                    model = _loaded[key] = self._load()
            self._model = model
        return self._model

    def _load(self) -> Any:
        from sentence_transformers import CrossEncoder

        try:
            with quiet_loading():
                model = CrossEncoder(self.resolved.source, device=self.device, local_files_only=self.resolved.local)
        except Exception as exc:  # the library raises OSError, ValueError, HF hub errors...
            raise EvretError(f"cross-encoder reranker: {self.model_name!r} could not be loaded from "
                             f"{self.resolved.source}: {exc}") from exc
        labels = getattr(model, "num_labels", 1)
        if labels != 1:
            raise EvretError(f"cross-encoder reranker: {self.model_name!r} gives {labels} scores per pair; a "
                             "reranker needs a model with one relevance score per pair (num_labels=1)")
        if self.fp16:
            model.half()
        return model

    def batch_score(self, queries: Sequence[str],
                    candidates: Sequence[RankedColumns]) -> Sequence[Sequence[float] | np.ndarray]:
        import torch

        rows = [[(query, str(t)) for t in (() if c.texts is None else c.texts)]
                for query, c in zip(queries, candidates, strict=True)]
        distinct = list(dict.fromkeys(pair for row in rows for pair in row))
        model = self.model
        if self.max_length is not None:
            model.max_length = self.max_length
        batch_size = self.batch_size_option or default_batch_size(self.device)
        values = np.asarray(model.predict(distinct, batch_size=batch_size, show_progress_bar=False,
                                          activation_fn=torch.nn.Identity(), convert_to_numpy=True),
                            dtype=np.float64).reshape(len(distinct), -1)[:, 0] if distinct else np.zeros(0)
        self._pairs += len(distinct)
        index = {pair: i for i, pair in enumerate(distinct)}
        return [values[[index[pair] for pair in row]] for row in rows]

    def config(self) -> dict[str, Any]:
        resolved = self._device is not None
        return {"name": self.name, "model": self.model_name, "max_length": self.max_length,
                "device": self._device if resolved else self.device_option,
                "batch_size": self.batch_size_option or (default_batch_size(self.device) if resolved else "auto"),
                "fp16": self.fp16}

    def reset_stats(self) -> None:
        self._pairs = 0

    def stats(self) -> dict[str, Any]:
        """Since the last reset: distinct pairs scored."""
        return {"pairs": self._pairs}
