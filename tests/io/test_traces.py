"""Evret's trace JSONL (issue 36): read with errors at ``file:line`` and the field, written back as read, labels
from a ``--labels`` file by trace id or question, texts from a corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.traces import (
    Hop,
    Retrieved,
    TraceRecord,
    apply_labels,
    fill_texts,
    read_labels,
    read_traces,
    write_traces,
)

TRACE = {"trace_id": "run-42", "question": "Which company makes the Model 3, and who founded it?",
         "answer": "Tesla, founded by Martin Eberhard and Marc Tarpenning.",
         "expected_answers": [["Martin Eberhard"], ["Marc Tarpenning", "M. Tarpenning"]], "tags": {"agent": "v2"},
         "hops": [{"query": "Model 3 manufacturer", "tool": "search",
                   "retrieved": [{"id": "d17", "text": "The Model 3 is made by Tesla...", "score": 12.3}],
                   "relevant_doc_ids": ["d17"]},
                  {"query": "Tesla founders", "tool": "search", "retrieved": ["d4", {"id": 7, "score": 9}]}]}


def _file(tmp_path: Path, *records: Any, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_documented_trace_reads_field_by_field(tmp_path: Path) -> None:
    [trace] = read_traces(_file(tmp_path, TRACE))
    assert trace == TraceRecord(
        trace_id="run-42", question=TRACE["question"], answer=TRACE["answer"],
        expected_answers=(("Martin Eberhard",), ("Marc Tarpenning", "M. Tarpenning")), tags={"agent": "v2"},
        hops=(Hop(query="Model 3 manufacturer", tool="search", relevant_doc_ids=("d17",),
                  retrieved=(Retrieved("d17", "The Model 3 is made by Tesla...", 12.3),)),
              Hop(query="Tesla founders", tool="search", retrieved=(Retrieved("d4"), Retrieved("7", None, 9.0)))))
    assert trace.hops[0].labelled and not trace.hops[1].labelled


def test_writing_and_reading_back_gives_the_same_traces(tmp_path: Path) -> None:
    traces = read_traces(_file(tmp_path, TRACE, {"trace_id": "t2", "hops": [], "turn_index": 3,
                                                 "conversation_id": "c1", "metadata": {"model": "m"}}))
    write_traces(tmp_path / "back.jsonl", traces)
    assert read_traces(tmp_path / "back.jsonl") == traces


@pytest.mark.parametrize(("record", "message"), [
    ({**TRACE, "hops": [{"query": "q", "retrieved": [{"id": "d1"}, {"text": "no id"}]}]},
     r"t\.jsonl:2 hops\[0\]\.retrieved\[1\]: has no id"),
    ({**TRACE, "hops": [TRACE["hops"][0], {"query": "q", "retrieved": [{"id": "d1", "score": "high"}]}]},
     r"t\.jsonl:2 hops\[1\]\.retrieved\[0\]: score is 'high', not a finite number"),
    ({**TRACE, "hops": [{"query": "q", "retrieved": ["d1", "d1"]}]},
     r"t\.jsonl:2 hops\[0\]\.retrieved\[1\]: document 'd1' is retrieved twice"),
    ({**TRACE, "hops": [{"query": "  "}]}, r"t\.jsonl:2 hops\[0\]: query is empty"),
    ({**TRACE, "hops": [{"retrieved": []}]}, r"t\.jsonl:2 hops\[0\]: has no query"),
    ({**TRACE, "hops": [{"query": "q", "kind": "search"}]}, "kind is 'search'; use one of retrieve, rerank"),
    ({**TRACE, "hops": [{"query": "q", "retrieved": [[1]]}]}, r"retrieved\[0\]: is \[1\]"),
    ({**TRACE, "hops": [{"query": "q", "relevant_doc_ids": "d1"}]}, "give a list of document ids"),
    ({**TRACE, "hops": [{"query": "q", "expected_answers": []}]}, "non-empty list of answer texts"),
    ({**TRACE, "trace_id": ["x"]}, r"t\.jsonl:2: trace_id is \['x'\]; an id is a string"),
    ({**TRACE, "trace_id": True}, "trace_id is True"),
    ({k: v for k, v in TRACE.items() if k != "trace_id"}, "the trace has no trace_id"),
    ({**TRACE, "hop": []}, r"unknown trace field\(s\) 'hop'"),
    ({**TRACE, "tags": {"a": [1]}}, "tags is"),
    ({**TRACE, "turn_index": -1}, "turn_index is -1"),
    ({**TRACE, "question": "see https://u:SECRET-PASS-99@host/x?token=TOKEN-123456 " + "x" * 10_000, "answer": 3},
     "answer is 3, not a string"),
    ("[1, 2]", "expected a JSON object"),
])
def test_errors_name_the_line_and_the_field(tmp_path: Path, record: Any, message: str) -> None:
    with pytest.raises(EvretError, match=message):
        read_traces(_file(tmp_path, {"trace_id": "first", "hops": []}, record))


def test_secrets_and_huge_values_are_not_echoed(tmp_path: Path) -> None:
    bad = {**TRACE, "hops": [{"query": "q", "retrieved": [{"id": {"url": "https://u:SECRET-PASS-99@host/x"}}]}]}
    with pytest.raises(EvretError) as caught:
        read_traces(_file(tmp_path, bad))
    assert "SECRET-PASS-99" not in str(caught.value)
    with pytest.raises(EvretError) as caught:
        read_traces(_file(tmp_path, {**TRACE, "tags": "y" * 100_000}))
    assert len(str(caught.value)) < 300


def test_a_repeated_trace_id_and_an_empty_file_are_errors(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"t\.jsonl:3: trace_id 'run-42' repeats line 1"):
        read_traces(_file(tmp_path, TRACE, {"trace_id": "x"}, TRACE))
    with pytest.raises(EvretError, match="holds no traces"):
        read_traces(_file(tmp_path, "", "  "))


def test_labels_by_trace_id_and_by_question(tmp_path: Path) -> None:
    traces = read_traces(_file(tmp_path, TRACE, {"trace_id": "t2", "question": "Who?", "hops": [{"query": "q"}]}))
    labels = read_labels(_file(tmp_path, {"trace_id": "run-42", "relevant_doc_ids": ["d4"],
                                          "hops": [None, {"relevant_doc_ids": ["d4"]}]},
                               {"question": "Who?", "expected_answers": ["Ann"]}, name="l.jsonl"))
    run, t2 = apply_labels(traces, labels)
    assert run.relevant_doc_ids == ("d4",) and run.expected_answers == traces[0].expected_answers
    assert run.hops[0].relevant_doc_ids == ("d17",) and run.hops[1].relevant_doc_ids == ("d4",)
    assert t2.expected_answers == (("Ann",),)


@pytest.mark.parametrize(("label", "message"), [
    ({"trace_id": "nope", "expected_answers": ["x"]}, r"l\.jsonl:1: no trace has trace_id 'nope'"),
    ({"question": "Same?", "expected_answers": ["x"]}, "2 traces have the question 'Same\\?'; name it by trace_id"),
    ({"trace_id": "a", "hops": [{"relevant_doc_ids": ["d"]}, {"relevant_doc_ids": ["d"]}]},
     "2 hop labels, but trace 'a' has 1 hops"),
    ({"trace_id": "a"}, "gives no labels"),
    ({"trace_id": "a", "question": "Same?", "expected_answers": ["x"]}, "by trace_id or by question"),
    ({"trace_id": "a", "relevant_doc_ids": ["d"], "extra": 1}, r"unknown label field\(s\) 'extra'"),
])
def test_bad_labels_are_refused_at_their_line(tmp_path: Path, label: dict[str, Any], message: str) -> None:
    traces = read_traces(_file(tmp_path, {"trace_id": "a", "question": "Same?", "hops": [{"query": "q"}]},
                               {"trace_id": "b", "question": "Same?"}))
    with pytest.raises(EvretError, match=message):
        apply_labels(traces, read_labels(_file(tmp_path, label, name="l.jsonl")))


def test_a_trace_labelled_twice_is_an_error(tmp_path: Path) -> None:
    traces = read_traces(_file(tmp_path, {"trace_id": "a", "question": "Q?"}))
    labels = read_labels(_file(tmp_path, {"trace_id": "a", "expected_answers": ["x"]},
                               {"question": "Q?", "expected_answers": ["y"]}, name="l.jsonl"))
    with pytest.raises(EvretError, match=r"l\.jsonl:2: trace 'a' is labelled twice \(also at .*l\.jsonl:1\)"):
        apply_labels(traces, labels)


def test_texts_come_from_the_corpus_and_a_missing_document_is_named() -> None:
    trace = TraceRecord("t", hops=(Hop("q", retrieved=(Retrieved("d1"), Retrieved("d2", "given"))),))
    [filled] = fill_texts([trace], {"d1": {"title": "", "text": "from corpus"}}, "c.jsonl")
    assert [d.text for d in filled.hops[0].retrieved] == ["from corpus", "given"]
    with pytest.raises(EvretError, match=r"c\.jsonl: has no document 'd1' \(trace 't' hops\[0\]\.retrieved\[0\]\)"):
        fill_texts([trace], {}, "c.jsonl")
