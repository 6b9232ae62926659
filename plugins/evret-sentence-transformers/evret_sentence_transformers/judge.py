"""The ``semantic`` judge: the expected answer against the retrieved text's windows, by embedding cosine."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from evret_core.sdk import EvretError, Judge, JudgmentContext, contains_tokens, normalized
from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingTable, Encoder, paired_cosines
from evret_sentence_transformers.windows import text_windows

#: Chosen on human-labelled data (benchmarks/judges.py; docs/benchmarks.md, "Choosing the semantic threshold").
DEFAULT_THRESHOLD = 0.94

# One (expected variant, retrieved text) pair: None when the variant is in the text verbatim, else its windows.
_Pair = tuple[str, tuple[str, ...]] | None


class SemanticJudge(Judge):
    """A retrieved text matches when the expected answer (or an alias) is in it verbatim, or when the cosine of
    the answer's embedding and the best of the text's windows is >= ``threshold``.

    - **Verbatim first.** An answer whose normalised tokens occur in the text as a whole-word sequence (the
      ``contains`` rule) matches with score 1.0 and nothing is encoded for it.
    - **Windows.** Otherwise the answer is compared with windows of the text about its own size (sentences for
      answers of 8 words or more, sliding windows of the answer's length for shorter ones, the whole text for an
      answer as long as the text; :mod:`evret_sentence_transformers.windows`), and the best window's cosine is the
      score. ``windows=False`` compares with the whole text (the judge's behaviour before windows).
    - **Each distinct text is encoded once** per judge (answers and windows), however many contexts and
      ``batch_judge`` calls it appears in; :meth:`prepare` encodes them all in one pass; with ``cache`` (true or a
      SQLite path) reruns read embeddings from disk. torch loads on the first encode, not before.

    ``batch_score`` gives the best cosine clipped to [0, 1] (1.0 for a verbatim match); ``judge(c)`` is
    ``score >= threshold``.
    """

    name = "semantic"

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        device: str = "cpu",
        batch_size: int = 64,
        cache: Any = None,
        windows: bool = True,
    ) -> None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise EvretError(f"semantic judge: threshold must be a number, got {threshold!r}") from None
        if not 0.0 <= threshold <= 1.0 or math.isnan(threshold):
            raise EvretError(f"semantic judge: threshold is a cosine score and must be in [0, 1], got {threshold}")
        self.threshold: float = threshold
        self.windows = windows.strip().lower() in ("1", "true", "yes", "on") if isinstance(windows, str) \
            else bool(windows)
        self.encoder = Encoder(model, device=device, batch_size=batch_size, cache=cache,
                               what="semantic judge: model")
        self.table = EmbeddingTable()
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._seen: set[str] = set()  # distinct texts compared since the last reset_stats()
        self._verbatim = 0

    @property
    def model(self) -> str:
        return self.encoder.model_name

    # -- planning: which texts each context needs ----------------------------------------------------------------
    def _pair(self, variant: str, retrieved: str) -> _Pair:
        key = (variant, retrieved)
        if key in self._pairs:
            return self._pairs[key]
        pair: _Pair
        if contains_tokens(normalized(retrieved), normalized(variant)):
            pair = None
        elif self.windows:
            windows = text_windows(retrieved, len(variant.split())) or (retrieved,)
            pair = (variant, windows)
        else:
            pair = (variant, (retrieved,))
        self._pairs[key] = pair
        return pair

    def texts_to_encode(self, contexts: Sequence[JudgmentContext]) -> list[str]:
        """The distinct texts judging ``contexts`` needs embeddings of (answers and windows), in first-seen order;
        answers found verbatim need none."""
        texts: dict[str, None] = {}
        for c in contexts:
            pairs = self._pairs_of(c)
            for pair in pairs or ():
                texts[pair[0]] = None
                texts.update(dict.fromkeys(pair[1]))
        return list(texts)

    def _pairs_of(self, context: JudgmentContext) -> list[tuple[str, tuple[str, ...]]] | None:
        """The (variant, windows) pairs to compare for ``context``; None when some variant is in it verbatim."""
        pairs = []
        for variant in context.expected_variants:
            pair = self._pair(variant, context.retrieved_text)
            if pair is None:
                return None
            pairs.append(pair)
        return pairs

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        """Encode every text the evaluation needs in one pass (tighter batches than chunk by chunk)."""
        self.table.ensure(self.texts_to_encode(contexts), self.encoder)

    # -- judging --------------------------------------------------------------------------------------------------
    def similarities(self, contexts: Sequence[JudgmentContext]) -> np.ndarray:
        """Each context's best cosine over its variants and windows (1.0 for a verbatim match), in order."""
        texts = self.texts_to_encode(contexts)
        self.table.ensure(texts, self.encoder)
        self._seen.update(texts)
        best = np.full(len(contexts), -1.0, dtype=np.float64)
        left: list[str] = []
        right: list[str] = []
        owner: list[int] = []
        for i, c in enumerate(contexts):
            pairs = self._pairs_of(c)
            if pairs is None:
                best[i] = 1.0
                self._verbatim += 1
                continue
            for pair in pairs:
                left.extend([pair[0]] * len(pair[1]))
                right.extend(pair[1])
                owner.extend([i] * len(pair[1]))
        if left:
            cosines = paired_cosines(self.table.matrix, self.table.rows(left), self.table.rows(right))
            np.maximum.at(best, np.asarray(owner, dtype=np.int64), cosines.astype(np.float64))
        return best

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        if not contexts:
            return []
        return np.clip(self.similarities(contexts), 0.0, 1.0).tolist()  # type: ignore[no-any-return]

    def judge(self, context: JudgmentContext) -> bool:
        return self.batch_judge([context])[0] is True

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        return [s is not None and s >= self.threshold for s in self.batch_score(contexts)]

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "threshold": self.threshold, "windows": self.windows}

    def reset_stats(self) -> None:
        """Start counting afresh (the evaluator calls this per run); embeddings already made are kept."""
        self.encoder.reset_stats()
        self._seen.clear()
        self._verbatim = 0

    def stats(self) -> dict[str, Any]:
        """Since the last reset: texts encoded, read from the cache, distinct texts compared, and judgments settled
        verbatim without an encode (``results.stats["judge"]``)."""
        return {**self.encoder.stats(), "distinct_texts": len(self._seen), "verbatim_matches": self._verbatim}
