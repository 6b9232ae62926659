"""The ``query-similarity`` judge: a passage graded against the query alone by embedding cosine and thresholds.

The non-LLM baseline of the ``relevance`` judge (docs/relevance.md, "The embedding baseline"): reference-free (it
never reads the expected answer), the score is the cosine of the query's and the passage's embeddings (the
``semantic`` judge's offline all-MiniLM-L6-v2, its encoder and embedding cache), clipped to [0, 1], and the grade is
how many of the non-decreasing ``thresholds`` the score reaches: with ``[t1, t2, t3]``, a 0-3 scale like
``relevance``'s. There are no default thresholds: they depend on the model and the collection, so the judge refuses
to run without them, and they are fitted on human-graded pairs (see the docs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from evret_core.sdk import EvretError, Judge, JudgmentContext, report_progress
from evret_sentence_transformers.devices import AUTO
from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingTable, Encoder, paired_cosines

OWNER = "query-similarity judge"
FIT_HINT = ("fit them on human-graded (query, passage) pairs with `evret calibrate --queries TOPICS.tsv --qrels QRELS "
            "--corpus CORPUS.jsonl --judge query-similarity --judge-option thresholds=[0,0,0] --save-threshold "
            "CONFIG.toml` (docs/relevance.md, 'The embedding baseline')")


def check_thresholds(value: Any) -> tuple[float, ...]:
    """``value`` as the judge's thresholds: a non-empty list of numbers in [0, 1], non-decreasing; an
    :class:`EvretError` naming the option otherwise (``None``: none given, and how to get them)."""
    if value is None:
        raise EvretError(f"{OWNER}: option 'thresholds' is required: [t1, t2, t3], the cosines in [0, 1] from which "
                         f"grades 1, 2 and 3 start; there are no defaults yet: {FIT_HINT}")
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
        raise EvretError(f"{OWNER}: option 'thresholds' must be a list of numbers such as [0.3, 0.5, 0.7], "
                         f"got {value!r}")
    out: list[float] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item) \
                or not 0.0 <= item <= 1.0:
            raise EvretError(f"{OWNER}: option 'thresholds' holds cosine scores in [0, 1], got {item!r} in {value!r}")
        out.append(float(item))
    if any(b < a for a, b in zip(out, out[1:], strict=False)):
        raise EvretError(f"{OWNER}: option 'thresholds' must be non-decreasing (grade g starts at the g-th), "
                         f"got {value!r}")
    return tuple(out)


class QuerySimilarityJudge(Judge):
    """Grades ``(query, retrieved_text)`` by the cosine of their embeddings against ``thresholds``.

    :param thresholds: the non-decreasing cosines ``[t1, ..., tN]`` from which grades 1..N start (required).
    :param cut: the grade from which a passage counts as relevant (default 2); ``threshold`` is ``t_cut``, so
        ``judge(c) == score >= threshold``.
    :param model: the sentence-transformers model (default: the packaged all-MiniLM-L6-v2, offline).
    :param device, batch_size, cache, fp16: as for the ``semantic`` judge (same encoder and embedding cache).
    """

    name = "query-similarity"
    reference_free = True

    def __init__(
        self,
        thresholds: Sequence[float] | None = None,
        cut: int = 2,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        device: str = AUTO,
        batch_size: int | None = None,
        cache: Any = None,
        fp16: bool = False,
    ) -> None:
        self.thresholds = check_thresholds(thresholds)
        self.grades: int = len(self.thresholds)
        if isinstance(cut, bool) or not isinstance(cut, int) or not 1 <= cut <= self.grades:
            raise EvretError(f"{OWNER}: option 'cut' must be a grade from 1 to {self.grades} (the number of "
                             f"thresholds), got {cut!r}")
        self.cut: int = cut
        self.threshold: float = self.thresholds[cut - 1]
        self.encoder = Encoder(model, device=device, batch_size=batch_size, cache=cache,
                               what=f"{OWNER}: option 'model'", fp16=fp16)
        self.table = EmbeddingTable()
        self._seen: set[str] = set()

    @property
    def model(self) -> str:
        return self.encoder.model_name

    @staticmethod
    def _texts(contexts: Sequence[JudgmentContext]) -> list[str]:
        return list(dict.fromkeys(t for c in contexts for t in (c.query, c.retrieved_text)))

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        """Encode every distinct query and passage of ``contexts`` in one pass (progress as stage ``"encode"``)."""
        if contexts:
            self.encoder.check()
        self.table.ensure(self._texts(contexts), self.encoder,
                          lambda done, total: report_progress("encode", done, total))

    def scores(self, contexts: Sequence[JudgmentContext]) -> np.ndarray:
        """cosine(query, passage) per context, clipped to [0, 1], in order (float64)."""
        if not contexts:
            return np.zeros(0, dtype=np.float64)
        self.encoder.check()
        texts = self._texts(contexts)
        self.table.ensure(texts, self.encoder)
        self._seen.update(texts)
        cosines = paired_cosines(self.table.matrix, self.table.rows([c.query for c in contexts]),
                                 self.table.rows([c.retrieved_text for c in contexts]))
        return np.clip(cosines.astype(np.float64), 0.0, 1.0)

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        return self.scores(contexts).tolist()  # type: ignore[no-any-return]

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """How many thresholds each score reaches (0..len(thresholds)), as floats."""
        scores = self.scores(contexts)
        grades = (scores[:, None] >= np.asarray(self.thresholds)[None, :]).sum(axis=1)
        return grades.astype(np.float64).tolist()  # type: ignore[no-any-return]

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        return (self.scores(contexts) >= self.threshold).tolist()  # type: ignore[no-any-return]

    def judge(self, context: JudgmentContext) -> bool:
        return self.batch_judge([context])[0] is True

    def config(self) -> dict[str, Any]:
        """The settings behind the grades, and the device, batch size and precision used (the manifest)."""
        return {"name": self.name, "model": self.model, "thresholds": list(self.thresholds), "cut": self.cut,
                **self.encoder.settings()}

    def reset_stats(self) -> None:
        """Start counting afresh (the evaluator calls this per run); embeddings already made are kept."""
        self.encoder.reset_stats()
        self._seen.clear()

    def stats(self) -> dict[str, Any]:
        """Since the last reset: texts encoded, read from the cache, distinct texts compared, and the device."""
        return {**self.encoder.stats(), "distinct_texts": len(self._seen), **self.encoder.settings()}
