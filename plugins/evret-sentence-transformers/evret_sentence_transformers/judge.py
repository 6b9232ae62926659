"""The ``semantic`` judge: cosine similarity of sentence embeddings against a threshold."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from evret_core.errors import EvretError
from evret_core.judges import Judge
from evret_core.models import JudgmentContext
from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingTable, Encoder, paired_cosines


class SemanticJudge(Judge):
    """A retrieved text matches when the cosine of its and the expected text's normalised embeddings >= threshold.

    Over a whole evaluation each distinct text (expected or retrieved) is encoded once, however many contexts
    and ``batch_judge`` calls it appears in; with ``cache`` (true or a SQLite path) reruns read embeddings from
    disk and encode nothing. torch loads on the first judgment, not before.
    """

    name = "semantic"

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        threshold: float = 0.75,
        device: str = "cpu",
        batch_size: int = 64,
        cache: Any = None,
    ) -> None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise EvretError(f"semantic judge: threshold must be a number, got {threshold!r}") from None
        if not -1.0 <= threshold <= 1.0:
            raise EvretError(f"semantic judge: threshold is a cosine and must be in [-1, 1], got {threshold}")
        self.threshold = threshold
        self.encoder = Encoder(model, device=device, batch_size=batch_size, cache=cache,
                               what="semantic judge: model")
        self.table = EmbeddingTable()
        self._seen: set[str] = set()  # distinct texts judged since the last reset_stats()

    @property
    def model(self) -> str:
        return self.encoder.model_name

    def similarities(self, contexts: Sequence[JudgmentContext]) -> np.ndarray:
        """The cosine of each context's expected and retrieved texts, in order."""
        expected = [c.expected_text for c in contexts]
        retrieved = [c.retrieved_text for c in contexts]
        self.table.ensure(expected + retrieved, self.encoder)
        self._seen.update(expected)
        self._seen.update(retrieved)
        return paired_cosines(self.table.matrix, self.table.rows(expected), self.table.rows(retrieved))

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        """Encode every distinct text of the evaluation in one pass (tighter batches than chunk by chunk)."""
        texts = [c.expected_text for c in contexts] + [c.retrieved_text for c in contexts]
        self.table.ensure(texts, self.encoder)

    def judge(self, context: JudgmentContext) -> bool:
        return self.batch_judge([context])[0]

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool]:
        if not contexts:
            return []
        return (self.similarities(contexts) >= self.threshold).tolist()  # type: ignore[no-any-return]

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "threshold": self.threshold}

    def reset_stats(self) -> None:
        """Start counting afresh (the evaluator calls this per run); embeddings already made are kept."""
        self.encoder.reset_stats()
        self._seen.clear()

    def stats(self) -> dict[str, Any]:
        """Since the last reset: texts encoded, read from the cache, and distinct texts judged (``stats["judge"]``)."""
        return {**self.encoder.stats(), "distinct_texts": len(self._seen)}
