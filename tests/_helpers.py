"""Helpers the test modules of several folders share: the fake plugin installer's type, the one-line CLI error,
and real evaluations of the bundled honeybee example with two retrievers of different quality (no plugin needed:
the ``good_results`` and ``bad_results`` fixtures of tests/conftest.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ._paths import REPO

if TYPE_CHECKING:
    from evret_core import RetrievalResult
    from evret_core.results.evaluation import EvaluationResults

FakePlugin = Callable[[str, str], Path]
"""The ``fake_plugin`` fixture: ``fake_plugin(dist_name, module_source)`` installs a plugin, returns its folder."""


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a CLI user error prints (``evret: error: ...``), with no traceback; fails the test otherwise."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evret: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


DATASET = REPO / "examples" / "dataset.jsonl"
CORPUS = REPO / "examples" / "corpus.jsonl"
METRICS = ["recall@5", "mrr@10", "hit_rate@1"]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def load_corpus() -> list[dict[str, str]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


class OverlapRetriever:
    """Ranks documents by the words they share with the query; ``damage`` swaps the top results away."""

    def __init__(self, damage: int = 0) -> None:
        self.docs = load_corpus()
        self.damage = damage

    def __call__(self, query: str, k: int) -> list[RetrievalResult]:
        from evret_core import RetrievalResult

        words = _words(query)
        ranked = sorted(self.docs, key=lambda d: (-len(words & _words(d["title"] + " " + d["text"])), d["id"]))
        if self.damage:
            ranked = ranked[self.damage :] + ranked[: self.damage]
        return [RetrievalResult(doc_id=d["id"], score=float(len(ranked) - i), metadata={"text": d["text"]})
                for i, d in enumerate(ranked[:k])]


def evaluate(damage: int = 0) -> EvaluationResults:
    """The honeybee example evaluated with :class:`OverlapRetriever` (``damage`` 0: good; 3: worse)."""
    from evret_core import EvaluationDataset, Evaluator

    return Evaluator(OverlapRetriever(damage), metrics=METRICS, judge="token-overlap").evaluate(
        EvaluationDataset.from_jsonl(DATASET))
