"""Quality filters of generated questions, each counted: what a filter drops is reported, never silently lost.

- ``degenerate``: the text is a model's looping or runaway output rather than one question: a three-word run
  repeated three times or more, or more than :data:`MAX_QUESTION_WORDS` words (what a broken or tiny model
  writes; no single question of the shared datasets comes close). Short noise that does not repeat passes it.
- ``answer_in_source``: an acceptable answer string occurs in a source document (the judge, ``contains`` by
  default: the answer's normalised words as a contiguous whole-word run), so the label is really in the corpus.
- ``answer_leak``: the question itself holds the answer (same judge), so it tests nothing.
- ``near_duplicate``: the question's normalised content words overlap an earlier kept question's by at least
  ``dedupe_threshold`` (Jaccard); the later one is dropped.
- ``closed_book``: a model asked *without* the sources answers correctly (the answer occurs in its reply), so the
  question does not need retrieval; run by :class:`~evret_core.testsets.testset.TestsetGenerator`, which has the
  LLM, and recorded here.

Questions expected to be refused (unanswerable from the corpus) have no answer: only the degenerate and duplicate
filters apply.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evret_core.contracts.errors import EvretError

FILTERS = ("degenerate", "answer_in_source", "answer_leak", "near_duplicate", "closed_book")
MAX_QUESTION_WORDS = 100
"""More words than this is not one question (the longest single question of the shared datasets has 43)."""
_WORD = re.compile(r"\w+", re.UNICODE)
# function words, but not the question words: "When was X sold?" and "Who sold X?" ask different things
_STOP = frozenset("a an the of in on at to for by and or is was were are be been did does do that this these "
                  "those with from as it its".split())


@dataclass
class FilterReport:
    """How many questions each filter saw and dropped, and the ids it dropped."""

    seen: int = 0
    kept: int = 0
    dropped: dict[str, list[str]] = field(default_factory=lambda: {f: [] for f in FILTERS})

    def counts(self) -> dict[str, Any]:
        return {"seen": self.seen, "kept": self.kept, "dropped": {k: len(v) for k, v in self.dropped.items()}}


def content_words(text: str) -> frozenset[str]:
    """Case-folded NFKC words minus a few function words (question words stay): what two questions must share to
    be duplicates."""
    norm = unicodedata.normalize("NFKC", text).casefold()
    return frozenset(w for w in _WORD.findall(norm) if w not in _STOP)


def degenerate(question: str) -> bool:
    """Whether ``question`` is looping or runaway model output: a three-word run repeated three times or more, or
    more than :data:`MAX_QUESTION_WORDS` words."""
    words = _WORD.findall(unicodedata.normalize("NFKC", question).casefold())
    if len(words) > MAX_QUESTION_WORDS:
        return True
    runs = Counter(zip(words, words[1:], words[2:], strict=False))  # the shorter tails end it
    return bool(runs) and max(runs.values()) >= 3


def _matches(judge: Any, query: str, answers: Sequence[str], text: str) -> bool:
    from evret_core.contracts.judge import JudgmentContext

    context = JudgmentContext(query=query, expected_text=answers[0], retrieved_text=text,
                              aliases=tuple(a for a in answers[1:] if a != answers[0]))
    verdict = judge.batch_judge([context])[0]
    return bool(verdict)


def apply_filters(questions: Sequence[Mapping[str, Any]], sources: Mapping[str, str], judge: Any = "contains",
                  dedupe_threshold: float = 0.8, report: FilterReport | None = None) -> list[dict[str, Any]]:
    """The questions (RAG question-set records) that pass the degenerate, answer, leak and duplicate filters, in
    order.

    ``sources`` maps doc id -> text for the records' ``gold_doc_ids``; ``judge`` is a judge or a registered name.
    """
    from evret_core.plugins.registry import create_judge

    if not 0.0 < dedupe_threshold <= 1.0:
        raise EvretError(f"dedupe_threshold must be in (0, 1], got {dedupe_threshold}")
    judge = create_judge(judge) if isinstance(judge, str) else judge
    report = report if report is not None else FilterReport()
    kept: list[dict[str, Any]] = []
    kept_words: list[frozenset[str]] = []
    for record in questions:
        report.seen += 1
        qid, question = str(record["question_id"]), str(record["question"])
        if degenerate(question):
            report.dropped["degenerate"].append(qid)
            continue
        answers = [a for variants in record.get("answers") or [] for a in variants]
        if answers:
            texts = [sources.get(d, "") for d in record.get("gold_doc_ids") or []]
            if not any(_matches(judge, question, answers, t) for t in texts if t):
                report.dropped["answer_in_source"].append(qid)
                continue
            if _matches(judge, question, answers, question):
                report.dropped["answer_leak"].append(qid)
                continue
        words = content_words(question)
        if any(len(words & other) / max(1, len(words | other)) >= dedupe_threshold for other in kept_words):
            report.dropped["near_duplicate"].append(qid)
            continue
        kept.append(dict(record))
        kept_words.append(words)
    report.kept += len(kept)
    return kept
