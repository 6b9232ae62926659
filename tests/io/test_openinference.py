"""The OpenInference importer (issue 36): one 2-hop agent written by hand in each shape Phoenix and the OTel
collector export (a span list, the REST page, JSON Lines, OTLP JSON in camelCase and snake_case, a dataframe dump
with nested attributes) reads as the same traces; and crafted span files are refused with one clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.openinference import MAX_KEY_PARTS, read_openinference, unflatten
from evret_core.io.traces import Hop, Retrieved, TraceRecord

QUESTION = "Which company makes the Model 3, and who founded it?"
ANSWER = "Tesla, founded by Martin Eberhard and Marc Tarpenning."


def _attrs_hop(query: str, docs: list[tuple[str, str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"input.value": query, "input.mime_type": "text/plain"}
    for i, (d, text, score) in enumerate(docs):
        out[f"retrieval.documents.{i}.document.id"] = d
        out[f"retrieval.documents.{i}.document.content"] = text
        out[f"retrieval.documents.{i}.document.score"] = score
    return out


HOP1 = ("Model 3 manufacturer", [("d17", "The Model 3 is made by Tesla.", 12.5), ("d2", "Cars.", 1.0)])
HOP2 = ("Tesla founders", [("d4", "Tesla was founded by Martin Eberhard and Marc Tarpenning.", 9.0)])

# (span id, parent, kind, name, start second, attributes)
SPANS: list[tuple[str, str | None, str, str, int, dict[str, Any]]] = [
    ("s1", None, "AGENT", "agent", 0, {"input.value": QUESTION, "output.value": ANSWER, "session.id": "chat-1"}),
    ("s2", "s1", "TOOL", "search", 1, {"tool.name": "web_search"}),
    ("s3", "s2", "RETRIEVER", "retrieve", 2, _attrs_hop(*HOP1)),
    ("s4", "s1", "TOOL", "search", 3, {"tool.name": "web_search"}),
    ("s5", "s4", "RETRIEVER", "retrieve", 4, _attrs_hop(*HOP2)),
    ("s6", "s1", "LLM", "llm", 5, {"llm.output_messages.0.message.content": "draft"}),
]

EXPECTED = [TraceRecord(
    trace_id="tr1", question=QUESTION, answer=ANSWER, conversation_id="chat-1",
    hops=(Hop(query=HOP1[0], tool="web_search", hop_id="s3",
              retrieved=tuple(Retrieved(d, t, s) for d, t, s in HOP1[1])),
          Hop(query=HOP2[0], tool="web_search", hop_id="s5",
              retrieved=tuple(Retrieved(d, t, s) for d, t, s in HOP2[1]))))]


def phoenix_spans() -> list[dict[str, Any]]:
    """The spans as Phoenix's REST API and `get_spans` return them (flattened attributes, kind in span_kind)."""
    return [{"id": f"U3Bhbjo{i}", "name": name, "context": {"trace_id": "tr1", "span_id": sid}, "span_kind": kind,
             "parent_id": parent, "start_time": f"2026-11-20T10:00:0{start}.000000+00:00",
             "end_time": f"2026-11-20T10:00:0{start}.500000+00:00", "status_code": "OK", "status_message": "",
             "attributes": dict(attrs), "events": []}
            for i, (sid, parent, kind, name, start, attrs) in enumerate(SPANS)]


def _any(value: Any, camel: bool) -> dict[str, Any]:
    if isinstance(value, str):
        return {"stringValue" if camel else "string_value": value}
    if isinstance(value, float):
        return {"doubleValue" if camel else "double_value": value}
    return {"intValue" if camel else "int_value": str(value)}


def otlp(camel: bool) -> dict[str, Any]:
    """The spans as OTLP JSON (the collector's file exporter writes camelCase, Phoenix's otlpv1 snake_case)."""
    def key(c: str, s: str) -> str:
        return c if camel else s

    spans = []
    for sid, parent, kind, name, start, attrs in SPANS:
        attributes = [{"key": "openinference.span.kind", "value": _any(kind, camel)}]
        attributes += [{"key": k, "value": _any(v, camel)} for k, v in attrs.items()]
        span = {key("traceId", "trace_id"): "tr1", key("spanId", "span_id"): sid, "name": name, "kind": 1,
                key("startTimeUnixNano", "start_time_unix_nano"): str(1_700_000_000_000_000_000 + start * 10**9),
                "attributes": attributes}
        if parent is not None:
            span[key("parentSpanId", "parent_span_id")] = parent
        spans.append(span)
    return {key("resourceSpans", "resource_spans"): [
        {key("scopeSpans", "scope_spans"): [{"scope": {"name": "openinference"}, "spans": spans}]}]}


def dataframe_dump() -> list[dict[str, Any]]:
    """`get_spans_dataframe().to_dict("records")`: the span itself flattened under dot keys, the documents a list."""
    rows = []
    for sid, parent, kind, name, start, attrs in SPANS:
        row: dict[str, Any] = {"name": name, "context.span_id": sid, "context.trace_id": "tr1", "parent_id": parent,
                               "span_kind": kind, "start_time": f"2026-11-20T10:00:0{start}+00:00"}
        docs: dict[int, dict[str, Any]] = {}
        for k, v in attrs.items():
            if k.startswith("retrieval.documents."):
                _, _, i, rest = k.split(".", 3)
                docs.setdefault(int(i), {})[rest] = v
            else:
                row[f"attributes.{k}"] = v
        if docs:
            row["attributes.retrieval.documents"] = [docs[i] for i in sorted(docs)]
        rows.append(row)
    return rows


def _write(tmp_path: Path, name: str, data: Any, lines: bool = False) -> Path:
    path = tmp_path / name
    text = "".join(json.dumps(x) + "\n" for x in data) if lines else json.dumps(data)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("shape", ["list", "rest", "jsonl", "otlp-camel", "otlp-snake", "otlp-jsonl", "dataframe"])
def test_every_shape_reads_as_the_same_traces(tmp_path: Path, shape: str) -> None:
    files = {
        "list": lambda: _write(tmp_path, "s.json", phoenix_spans()),
        "rest": lambda: _write(tmp_path, "s.json", {"data": phoenix_spans(), "next_cursor": None}),
        "jsonl": lambda: _write(tmp_path, "s.jsonl", phoenix_spans(), lines=True),
        "otlp-camel": lambda: _write(tmp_path, "s.json", otlp(camel=True)),
        "otlp-snake": lambda: _write(tmp_path, "s.json", otlp(camel=False)),
        "otlp-jsonl": lambda: _write(tmp_path, "s.jsonl", [otlp(camel=True), {"resourceSpans": []}], lines=True),
        "dataframe": lambda: _write(tmp_path, "s.json", dataframe_dump()),
    }
    assert read_openinference(files[shape]()) == EXPECTED


def test_documents_out_of_index_order_are_read_by_index(tmp_path: Path) -> None:
    spans = phoenix_spans()
    attrs = spans[2]["attributes"]
    spans[2]["attributes"] = dict(reversed(list(attrs.items())))  # retrieval.documents.1.* before .0.*
    hop = read_openinference(_write(tmp_path, "s.json", spans))[0].hops[0]
    assert [d.id for d in hop.retrieved] == ["d17", "d2"]


def test_json_input_value_gives_the_question_and_the_hop_query(tmp_path: Path) -> None:
    spans = phoenix_spans()
    spans[0]["attributes"] = {"input.value": json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                                     {"role": "user", "content": QUESTION}]}),
                              "input.mime_type": "application/json"}
    spans[2]["attributes"]["input.value"] = json.dumps({"query": "Model 3 maker"})
    spans[2]["attributes"]["input.mime_type"] = "application/json"
    trace = read_openinference(_write(tmp_path, "s.json", spans))[0]
    # no output.value on the root: the answer is the last LLM span's last output message
    assert (trace.question, trace.answer, trace.hops[0].query) == (QUESTION, "draft", "Model 3 maker")


def test_a_reranker_span_is_a_rerank_hop(tmp_path: Path) -> None:
    spans = phoenix_spans()
    spans.append({"name": "rerank", "context": {"trace_id": "tr1", "span_id": "s7"}, "span_kind": "RERANKER",
                  "parent_id": "s1", "start_time": "2026-11-20T10:00:02.500000+00:00",
                  "attributes": {"reranker.query": "Model 3 manufacturer", "reranker.top_k": 1,
                                 "reranker.input_documents.0.document.id": "d2",
                                 "reranker.input_documents.1.document.id": "d17",
                                 "reranker.output_documents.0.document.id": "d17",
                                 "reranker.output_documents.0.document.score": 0.9}})
    hops = read_openinference(_write(tmp_path, "s.json", spans))[0].hops
    assert [(h.kind, h.query) for h in hops] == [("retrieve", HOP1[0]), ("rerank", "Model 3 manufacturer"),
                                                 ("retrieve", HOP2[0])]
    assert hops[1].retrieved == (Retrieved("d17", None, 0.9),) and hops[1].tool is None


def test_a_document_without_id_is_an_error_naming_trace_span_and_attribute(tmp_path: Path) -> None:
    spans = phoenix_spans()
    del spans[4]["attributes"]["retrieval.documents.0.document.id"]
    with pytest.raises(EvretError, match=r"s\.json: span 4 \(trace 'tr1' span 's5'\): retrieval\.documents\.0 has no "
                                         r"document\.id"):
        read_openinference(_write(tmp_path, "s.json", spans))


def test_an_orphan_parent_makes_a_root_and_a_trace_without_retriever_has_no_hops(tmp_path: Path) -> None:
    spans = phoenix_spans()
    spans[0]["parent_id"] = "not-exported"
    lonely = {"name": "chat", "context": {"trace_id": "tr2", "span_id": "x1"}, "span_kind": "LLM", "parent_id": None,
              "start_time": "2026-11-20T11:00:00+00:00",
              "attributes": {"input.value": "hello", "output.value": "hi there"}}
    traces = read_openinference(_write(tmp_path, "s.json", [*spans, lonely]))
    assert traces[0] == EXPECTED[0]
    assert traces[1] == TraceRecord(trace_id="tr2", question="hello", answer="hi there")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda s: s[3].update(parent_id="s4"), r"span 3 \(trace 'tr1' span 's4'\): the span is its own parent"),
    (lambda s: (s[1].update(parent_id="s4"), s[3].update(parent_id="s2")), "form a circle"),
    (lambda s: s[4]["context"].update(span_id="s3"), r"span id 's3' repeats in trace 'tr1'"),
    (lambda s: s[2]["context"].update(span_id=["s", 3]), r"span_id is \['s', 3\]; a span id is a non-empty string"),
    (lambda s: s[0]["context"].update(trace_id=True), "trace_id is True"),
    (lambda s: s[2]["attributes"].update({"retrieval.documents.1.document.id": {"a": 1}}),
     r"retrieval\.documents\.1\.document\.id is \{'a': 1\}; an id is a string"),
    (lambda s: s[2]["attributes"].update({"retrieval.documents.1.document.id": "d17"}), "retrieved twice"),
    (lambda s: s[2]["attributes"].update({"x" + ".y" * MAX_KEY_PARTS: 1}), f"more than {MAX_KEY_PARTS} parts"),
    (lambda s: s[2]["attributes"].update({"input": "a value and a prefix"}), "is both a value and a prefix"),
    (lambda s: s[2]["attributes"].update({"retrieval.documents.0.document.score": "high"}), "not a finite number"),
    (lambda s: s[2].update(start_time="yesterday"), "is not an ISO time"),
    (lambda s: s[2]["attributes"].pop("input.value"), "the RETRIEVER span has no query"),
])
def test_crafted_span_files_are_refused_with_one_error(tmp_path: Path, edit: Any, message: str) -> None:
    spans = phoenix_spans()
    edit(spans)
    with pytest.raises(EvretError, match=message):
        read_openinference(_write(tmp_path, "s.json", spans))


def test_errors_do_not_echo_credentials_or_huge_values(tmp_path: Path) -> None:
    spans = phoenix_spans()
    secret = "https://user:HUNTER2-PASSWORD@vector.example.com/q?api_key=SK-TOPSECRET-1"
    spans[2]["attributes"]["retrieval.documents.1.document.id"] = [secret + "x" * 100_000]
    with pytest.raises(EvretError) as caught:
        read_openinference(_write(tmp_path, "s.json", spans))
    text = str(caught.value)
    assert "HUNTER2-PASSWORD" not in text and "SK-TOPSECRET" not in text and len(text) < 400


def test_unflatten_nests_dot_keys_and_keeps_positions() -> None:
    assert unflatten({"a.0.b": 1, "a.1.b": 2, "c": [{"d.e": 3}]}, "x") == {
        "a": {"0": {"b": 1}, "1": {"b": 2}}, "c": [{"d": {"e": 3}}]}


def test_a_file_that_is_not_spans_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match="expected spans"):
        read_openinference(_write(tmp_path, "s.json", 42))
    with pytest.raises(EvretError, match="holds no spans"):
        read_openinference(_write(tmp_path, "s.json", []))
    with pytest.raises(EvretError, match=r"s\.jsonl:2"):
        (tmp_path / "s.jsonl").write_text(json.dumps(phoenix_spans()[0]) + "\n{oops\n", encoding="utf-8")
        read_openinference(tmp_path / "s.jsonl")
