"""The semantic similarity score, (cos + 1) / 2 in 0..1, and the ``semantic-similarity`` output evaluator."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from evret_core.sdk import EvretError, OutputEvaluator, OutputResults
from evret_sentence_transformers.devices import AUTO
from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingTable, Encoder, paired_cosines

_encoders: dict[tuple[str, str, int | None], Encoder] = {}
_encoders_lock = threading.Lock()


def _shared_encoder(model: str | os.PathLike[str], device: str, batch_size: int | None) -> Encoder:
    key = (os.fspath(model), str(device), None if batch_size is None else int(batch_size))
    with _encoders_lock:
        encoder = _encoders.get(key)
        if encoder is None:
            encoder = _encoders[key] = Encoder(model, device=device, batch_size=batch_size,
                                               what="semantic similarity: option 'model'")
        return encoder


def cosine_to_score(cosines: np.ndarray) -> np.ndarray:
    """Map cosines in [-1, 1] to scores in [0, 1]: (cos + 1) / 2, clipped against rounding."""
    return np.clip((np.asarray(cosines, dtype=np.float64) + 1.0) / 2.0, 0.0, 1.0)


def semantic_similarities(
    a: Sequence[str],
    b: Sequence[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    device: str = AUTO,
    batch_size: int | None = None,
) -> list[float]:
    """Pairwise scores (cos + 1) / 2 of ``a[i]`` and ``b[i]``; each distinct text is encoded once."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise EvretError(f"semantic_similarities: got {len(a)} texts on the left and {len(b)} on the right")
    if not a:
        return []
    table = EmbeddingTable()
    table.ensure([str(t) for t in a + b], _shared_encoder(model, device, batch_size))
    cosines = paired_cosines(table.matrix, table.rows([str(t) for t in a]), table.rows([str(t) for t in b]))
    return cosine_to_score(cosines).tolist()  # type: ignore[no-any-return]


def semantic_similarity(
    a: str, b: str, model: str | os.PathLike[str] = DEFAULT_MODEL, device: str = AUTO
) -> float:
    """How close in meaning two texts are, (cos + 1) / 2 of their normalised embeddings, in 0..1."""
    return semantic_similarities([a], [b], model=model, device=device)[0]


class SemanticSimilarityEvaluator(OutputEvaluator):
    """Scores each record's ``output`` against its ``target`` by :func:`semantic_similarity`, in 0..1.

    ``target`` may be a list of acceptable texts: the record scores its best match. Distinct texts are encoded
    once over all records (and read from ``cache`` when given).
    """

    name = "semantic-similarity"
    needs_target = True

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        device: str = AUTO,
        batch_size: int | None = None,
        cache: Any = None,
        fp16: bool = False,
    ) -> None:
        self.encoder = Encoder(model, device=device, batch_size=batch_size, cache=cache,
                               what="semantic-similarity evaluator: option 'model'", fp16=fp16)

    def validate(self, records: Sequence[Mapping[str, Any]]) -> None:
        super().validate(records)
        for i, record in enumerate(records):
            target = record["target"]
            if isinstance(target, list) and (not target or not all(isinstance(t, str) for t in target)):
                raise EvretError(f"record {i + 1}: field 'target' must be a text or a non-empty list of texts")

    def score_records(self, records: Sequence[Mapping[str, Any]]) -> tuple[list[float | None], list[dict[str, Any]]]:
        outputs: list[str] = []
        targets: list[str] = []
        owner: list[int] = []
        for i, record in enumerate(records):
            wanted = record["target"] if isinstance(record["target"], list) else [record["target"]]
            for target in wanted:
                outputs.append(str(record["output"]))
                targets.append(str(target))
                owner.append(i)
        table = EmbeddingTable()
        table.ensure(outputs + targets, self.encoder)
        cosines = paired_cosines(table.matrix, table.rows(outputs), table.rows(targets))
        best = np.full(len(records), -np.inf)
        best_target = np.zeros(len(records), dtype=np.int64)
        for pair, (i, cosine) in enumerate(zip(owner, cosines.tolist(), strict=True)):
            if cosine > best[i]:
                best[i] = cosine
                best_target[i] = pair
        scores = cosine_to_score(best).tolist()
        details = [{"cosine": float(best[i]), "target": targets[best_target[i]]} for i in range(len(records))]
        self._distinct = len(table)
        return scores, details

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> OutputResults:
        return replace(super().evaluate(records),
                       stats={**self.encoder.stats(), "distinct_texts": getattr(self, "_distinct", 0)})

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.encoder.model_name, **self.encoder.settings()}
