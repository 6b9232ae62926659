"""The ``semantic`` judge: the expected answer against the retrieved text's windows, by embedding cosine."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from evret_core.sdk import (
    FALSE_WORDS,
    TRUE_WORDS,
    EvretError,
    Judge,
    JudgmentContext,
    check_bool,
    contains_tokens,
    normalized,
    report_progress,
)
from evret_sentence_transformers import prefilter as lexical
from evret_sentence_transformers.devices import AUTO
from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingTable, Encoder, paired_cosines
from evret_sentence_transformers.windows import text_windows

#: Chosen on human-labelled data (benchmarks/judges.py; docs/benchmarks.md, "Choosing the semantic threshold").
DEFAULT_THRESHOLD = 0.94

# One (expected variant, retrieved text) pair: None when the variant is in the text verbatim, else the variant,
# its windows, those the prefilter's trigram rule keeps, and those both its rules keep (the ones encoded).
_Windows = tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]
_Pair = _Windows | None
_ALL, _TRIGRAMS, _KEPT = 1, 2, 3  # which of a pair's window tuples


class SemanticJudge(Judge):
    """A retrieved text matches when the expected answer (or an alias) is in it verbatim, or when the cosine of
    the answer's embedding and the best of the text's windows is >= ``threshold``.

    - **Verbatim first.** An answer whose normalised tokens occur in the text as a whole-word sequence (the
      ``contains`` rule) matches with score 1.0 and nothing is encoded for it.
    - **Windows.** Otherwise the answer is compared with windows of the text about its own size (sentences for
      answers of 8 words or more, sliding windows of the answer's length for shorter ones, the whole text for an
      answer as long as the text; :mod:`evret_sentence_transformers.windows`), and the best window's cosine is the
      score. ``windows=False`` compares with the whole text (the judge's behaviour before windows).
    - **Prefilter.** At a threshold of 0.93 or more, ``batch_judge`` encodes only the windows that hold at least
      a quarter of the answer's character trigrams (:mod:`evret_sentence_transformers.prefilter`, a heuristic
      checked on real data); for answers of 8 words or more, a window must also hold 0.4 of the answer's word
      stems. A pair with no such window does not match and costs no encode. ``prefilter=False`` encodes every
      window; a number sets the trigram share (and applies at any threshold; the stem rule only from 0.93).
    - **Each distinct text is encoded once** per judge (answers and windows), however many contexts and
      ``batch_judge`` calls it appears in; :meth:`prepare` encodes them all in one pass, longest first, reporting
      its progress as stage ``"encode"``; with ``cache`` (true or a SQLite path) reruns read embeddings from
      disk. torch loads on the first encode, not before.
    - **Device.** ``device="auto"`` uses CUDA, then MPS, then the CPU; ``batch_size=None`` chooses one for the
      device (512 on CUDA, 64 elsewhere); ``fp16=True`` halves precision on CUDA (an error elsewhere). The device
      and batch size used are in :meth:`config`, so in the results' manifest.

    ``batch_score`` gives the best cosine over every window clipped to [0, 1] (1.0 for a verbatim match); ``judge(c)``
    is ``score >= threshold``.
    """

    name = "semantic"

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        device: str = AUTO,
        batch_size: int | None = None,
        cache: Any = None,
        windows: bool = True,
        prefilter: bool | float = True,
        fp16: bool = False,
    ) -> None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise EvretError(f"semantic judge: threshold must be a number, got {threshold!r}") from None
        if not 0.0 <= threshold <= 1.0 or math.isnan(threshold):
            raise EvretError(f"semantic judge: threshold is a cosine score and must be in [0, 1], got {threshold}")
        self.threshold: float = threshold
        self.windows = check_bool(windows, "semantic judge: option 'windows'")
        self.prefilter = self._min_cover(prefilter, threshold)
        # the stem rule for long answers, with the prefilter and only at the thresholds it was measured for
        self.prefilter_stems = lexical.MIN_STEM_COVER if self.prefilter > 0.0 and threshold >= lexical.MIN_THRESHOLD \
            else 0.0
        self.encoder = Encoder(model, device=device, batch_size=batch_size, cache=cache,
                               what="semantic judge: option 'model'", fp16=fp16)
        self.table = EmbeddingTable()
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._seen: set[str] = set()  # distinct texts compared since the last reset_stats()
        self._verbatim = 0
        self._skipped = {"trigrams": 0, "stems": 0}

    @staticmethod
    def _min_cover(prefilter: Any, threshold: float) -> float:
        """The trigram share a window needs (0.0: no prefilter) from the ``prefilter`` option."""
        if isinstance(prefilter, str):
            text = prefilter.strip().lower()
            prefilter = True if text in TRUE_WORDS else False if text in FALSE_WORDS else text
        if prefilter is True:
            return lexical.MIN_COVER if threshold >= lexical.MIN_THRESHOLD else 0.0
        if prefilter is False or prefilter is None:
            return 0.0
        try:
            share = float(prefilter)
        except (TypeError, ValueError):
            raise EvretError(f"semantic judge: prefilter must be true, false or a share in [0, 1], got {prefilter!r}") \
                from None
        if not 0.0 <= share <= 1.0 or math.isnan(share):
            raise EvretError(f"semantic judge: prefilter is a share of the answer's trigrams in [0, 1], got {share}")
        return share

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
        else:
            windows = (text_windows(retrieved, len(variant.split())) or (retrieved,)) if self.windows else (retrieved,)
            by_trigrams = kept = windows
            if self.prefilter > 0.0:
                by_trigrams, kept = lexical.screen(variant, retrieved, windows, self.prefilter, self.prefilter_stems)
            pair = (variant, windows, by_trigrams, kept)
        self._pairs[key] = pair
        return pair

    def texts_to_encode(self, contexts: Sequence[JudgmentContext], exact: bool = False) -> list[str]:
        """The distinct texts judging ``contexts`` needs embeddings of (answers and windows), in first-seen order;
        answers found verbatim need none. ``exact=False`` (verdicts): the windows the prefilter keeps, and an
        answer only when one of its windows is kept; ``exact=True`` (scores): every window."""
        return self._texts(contexts, _ALL if exact else _KEPT)

    def _texts(self, contexts: Sequence[JudgmentContext], which: int) -> list[str]:
        texts: dict[str, None] = {}
        for c in contexts:
            pairs = self._pairs_of(c)
            for pair in pairs or ():
                windows = pair[which]
                if windows:
                    texts[pair[0]] = None
                    texts.update(dict.fromkeys(windows))
        return list(texts)

    def _pairs_of(self, context: JudgmentContext) -> list[_Windows] | None:
        """The (variant, windows) pairs to compare for ``context``; None when some variant is in it verbatim."""
        pairs = []
        for variant in context.expected_variants:
            pair = self._pair(variant, context.retrieved_text)
            if pair is None:
                return None
            pairs.append(pair)
        return pairs

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        """Encode every text judging ``contexts`` needs in one pass (tighter batches than chunk by chunk), with
        its progress reported as stage ``"encode"`` (:func:`evret_core.sdk.report_progress`)."""
        if contexts:
            self.encoder.check()
        texts = self.texts_to_encode(contexts)
        if self.prefilter > 0.0:  # the texts each rule saved (a text the trigram rule keeps and stems don't: stems)
            needed = set(texts)
            by_trigrams = set(self._texts(contexts, _TRIGRAMS))
            for t in self.texts_to_encode(contexts, exact=True):
                if t not in needed and t not in self.table:
                    self._skipped["stems" if t in by_trigrams else "trigrams"] += 1
        self.table.ensure(texts, self.encoder, lambda done, total: report_progress("encode", done, total))

    # -- judging --------------------------------------------------------------------------------------------------
    def similarities(self, contexts: Sequence[JudgmentContext], exact: bool = True) -> np.ndarray:
        """Each context's best cosine over its variants and windows (1.0 for a verbatim match), in order.
        ``exact=False``: over the windows the prefilter keeps only (-1.0 for a pair with none)."""
        if contexts:
            self.encoder.check()
        texts = self.texts_to_encode(contexts, exact)
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
                windows = pair[_ALL if exact else _KEPT]
                left.extend([pair[0]] * len(windows))
                right.extend(windows)
                owner.extend([i] * len(windows))
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
        if not contexts:
            return []
        scores = np.clip(self.similarities(contexts, exact=self.prefilter == 0.0), 0.0, 1.0)
        return (scores >= self.threshold).tolist()  # type: ignore[no-any-return]

    def config(self) -> dict[str, Any]:
        """The settings behind the verdicts, and the device, batch size and precision used (the results' manifest
        records them; ``device`` is ``"auto"`` until the first encode resolves it)."""
        return {"name": self.name, "model": self.model, "threshold": self.threshold, "windows": self.windows,
                "prefilter": self.prefilter, "prefilter_stems": self.prefilter_stems, **self.encoder.settings()}

    def reset_stats(self) -> None:
        """Start counting afresh (the evaluator calls this per run); embeddings already made are kept."""
        self.encoder.reset_stats()
        self._seen.clear()
        self._verbatim = 0
        self._skipped = {"trigrams": 0, "stems": 0}

    def stats(self) -> dict[str, Any]:
        """Since the last reset: texts encoded, read from the cache, distinct texts compared, judgments settled
        verbatim without an encode, distinct windows (and answers) the prefilter saved from encoding (in all, and
        per rule: ``prefilter_skipped_trigrams`` + ``prefilter_skipped_stems``), and the device and batch size used
        (``results.stats["judge"]``)."""
        return {**self.encoder.stats(), "distinct_texts": len(self._seen), "verbatim_matches": self._verbatim,
                "prefilter_skipped": sum(self._skipped.values()),
                "prefilter_skipped_trigrams": self._skipped["trigrams"],
                "prefilter_skipped_stems": self._skipped["stems"], **self.encoder.settings()}
