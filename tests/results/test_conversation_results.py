"""Conversation results files: written, read back equal through load_results, and refused when a number was
edited (naming it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.results.conversation_results import ConversationResults
from evret_core.results.files import KINDS, kind_of, load_results
from tests.conversation.test_turn_evaluator import run


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[ConversationResults, Path]:
    results = run(forms=["last_turn", "full_history", "rewrite"])
    path = tmp_path_factory.mktemp("conv") / "conversation.json"
    results.write(path)
    return results, path


def test_round_trip(written: tuple[ConversationResults, Path]) -> None:
    results, path = written
    document = json.loads(path.read_text())
    assert list(document)[:4] == ["schema", "schema_version", "forms", "baseline_form"]
    assert list(document)[-2:] == ["per_turn", "queries"]
    assert kind_of(document) is ConversationResults and KINDS["conversation"] is ConversationResults
    back = load_results(path)
    assert isinstance(back, ConversationResults)
    assert back.json_text() == results.json_text()
    assert back.score_view() == results.score_view()
    assert set(back.score_view().scores) == {f"{f}/{m}" for f in results.forms for m in results.metrics}
    with pytest.raises(EvretError, match="is a conversation results file; retrieval results are needed"):
        load_results(path, kind="retrieval")


def tampered(path: Path, tmp_path: Path, edit: Any) -> Path:
    document = json.loads(path.read_text())
    edit(document)
    out = tmp_path / "tampered.json"
    out.write_text(json.dumps(document))
    return out


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d["scores"]["rewrite"].update({"ndcg@3": 0.99}), r"scores\.rewrite\.ndcg@3 is 0\.99 but the mean"),
    (lambda d: d["n"]["last_turn"].update({"turns": 9}), r"n\.last_turn\.turns is 9 but the per-turn values count 7"),
    (lambda d: d["differences"][1].update({"mean": 0.5}), r"differences\[1\]\.mean is 0\.5 but the mean of b - a"),
    (lambda d: d["differences"][0].update({"n_conversations": 2}), r"differences\[0\]\.n_conversations is 2"),
    (lambda d: d["by_turn_index"]["last_turn"]["1"].update({"n": 4}), r"by_turn_index\.last_turn\.1\.n is 4"),
    (lambda d: d["slices"]["domain"]["govt"]["rewrite"]["scores"].update({"recall@3": 0.1}),
     r"slices\.domain\.govt\.rewrite\.scores\.recall@3 is 0\.1"),
    (lambda d: next(iter(d["queries"].values()))["scores"].update({"recall@3": 1.5}), r"outside \[0, 1\]"),
    (lambda d: d["intervals"]["rewrite"].update({"ndcg@3": [0.9, 0.1]}), r"intervals\.rewrite\.ndcg@3"),
    (lambda d: d["per_turn"]["law:2"]["forms"]["rewrite"].update({"query_id": "nope"}),
     r"per_turn\.law:2\.forms\.rewrite: query 'nope' is not in queries"),
])
def test_a_tampered_file_is_refused_naming_the_number(written: tuple[ConversationResults, Path], tmp_path: Path,
                                                      edit: Any, named: str) -> None:
    _, path = written
    with pytest.raises(EvretError, match=named):
        load_results(tampered(path, tmp_path, edit))
