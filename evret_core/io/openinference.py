"""The OpenInference importer: OpenTelemetry spans as Phoenix stores and exports them, turned into Evret traces
(:class:`~evret_core.io.traces.TraceRecord`, one per ``trace_id``; the mapping is ``docs/traces.md``).

Four file shapes are read the same: a JSON list of Phoenix spans, Phoenix's REST page ``{"data": [...]}``, JSON Lines
of spans (or of OTLP documents, as the collector's file exporter writes), and OTLP JSON
(``resourceSpans[].scopeSpans[].spans[]``, camelCase or snake_case ``AnyValue`` s). Attributes may be flattened
(``retrieval.documents.0.document.id``) or nested and list-valued (dataframe dumps): dot keys are unflattened, integer
parts become positions. Errors name the file, the trace and the span, with values cut short and credentials masked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.jsonio import iter_json_lines, loads_json, read_text
from evret_core.io.traces import Hop, Retrieved, TraceRecord, shown

__all__ = ["SpanRecord", "read_openinference", "spans_of", "traces_from_spans", "unflatten"]

MAX_KEY_PARTS = 32
"""The most dot-separated parts an attribute key may have (a crafted key of a million dots is refused, not nested)."""

_INPUT_KEYS = ("input", "query", "question")
_OUTPUT_KEYS = ("output", "answer", "response", "content")


@dataclass
class SpanRecord:
    """One span, read: its ids, kind (upper case, ``""`` when unknown), start time (seconds) and attributes
    (unflattened)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start: float
    attributes: dict[str, Any]
    where: str


# -- attributes -----------------------------------------------------------------------------------------------------
def unflatten(value: Any, where: str) -> Any:
    """``value`` with every dict's dot keys split into nested dicts (``{"a.b": 1}`` -> ``{"a": {"b": 1}}``), lists
    walked; a key that is both a value and a prefix (``"x": 1`` and ``"x.y": 2``) is an error naming it."""
    if isinstance(value, list):
        return [unflatten(v, where) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if "." not in key and key not in out:  # the usual plain key: no nesting to do
            out[key] = unflatten(item, where) if isinstance(item, (dict, list)) else item
            continue
        parts = str(key).split(".")
        if len(parts) > MAX_KEY_PARTS:
            raise EvretError(f"{where}: attribute key {shown(key)} has more than {MAX_KEY_PARTS} parts")
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise EvretError(f"{where}: attribute {shown('.'.join(parts[:i + 1]))} is both a value and a prefix of "
                                 f"{shown(key)}")
            node = child
        leaf = unflatten(item, where) if isinstance(item, (dict, list)) else item
        if parts[-1] in node:
            if isinstance(node[parts[-1]], dict) and isinstance(leaf, dict):
                _merge(node[parts[-1]], leaf, key, where)
                continue
            if isinstance(node[parts[-1]], dict) or isinstance(leaf, dict):
                raise EvretError(f"{where}: attribute {shown(key)} is both a value and a prefix of other keys")
            raise EvretError(f"{where}: attribute {shown(key)} is given twice")
        node[parts[-1]] = leaf
    return out


def _merge(into: dict[str, Any], other: dict[str, Any], key: Any, where: str) -> None:
    for k, v in other.items():
        if k in into:
            if isinstance(into[k], dict) and isinstance(v, dict):
                _merge(into[k], v, key, where)
                continue
            raise EvretError(f"{where}: attribute {shown(f'{key}.{k}')} is given twice")
        into[k] = v


def _get(attributes: Mapping[str, Any], path: str) -> Any:
    node: Any = attributes
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _indexed(value: Any, where: str, name: str) -> list[tuple[int, Any]]:
    """The items of a flattened sequence (``{"0": a, "2": b}``) or a list, as ``(position, item)`` in order."""
    if value is None:
        return []
    if isinstance(value, list):
        return list(enumerate(value))
    if isinstance(value, dict) and all(isinstance(k, str) and k.isdigit() for k in value):
        return sorted(((int(k), v) for k, v in value.items()), key=lambda kv: kv[0])
    raise EvretError(f"{where}: {name} is {shown(value)}; expected a list or {name}.0, {name}.1, ...")


def _any_value(value: Any, where: str) -> Any:
    """An OTLP ``AnyValue`` (camelCase or snake_case) as a plain value."""
    if not isinstance(value, dict):
        raise EvretError(f"{where}: attribute value {shown(value)} is not an OTLP AnyValue")
    for camel, snake in (("stringValue", "string_value"), ("boolValue", "bool_value"), ("bytesValue", "bytes_value")):
        for key in (camel, snake):
            if key in value:
                return value[key]
    for key in ("intValue", "int_value"):
        if key in value:
            try:
                return int(value[key])  # int64 is a JSON string in OTLP JSON
            except (TypeError, ValueError):
                raise EvretError(f"{where}: intValue {shown(value[key])} is not a whole number") from None
    for key in ("doubleValue", "double_value"):
        if key in value:
            try:
                return float(value[key])
            except (TypeError, ValueError):
                raise EvretError(f"{where}: doubleValue {shown(value[key])} is not a number") from None
    for key in ("arrayValue", "array_value"):
        if key in value:
            items = value[key].get("values", []) if isinstance(value[key], dict) else None
            if not isinstance(items, list):
                raise EvretError(f"{where}: arrayValue {shown(value[key])} has no list of values")
            return [_any_value(v, where) for v in items]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            items = value[key].get("values", []) if isinstance(value[key], dict) else None
            if not isinstance(items, list):
                raise EvretError(f"{where}: kvlistValue {shown(value[key])} has no list of values")
            return _otlp_attributes(items, where)
    if not value:
        return None
    raise EvretError(f"{where}: attribute value {shown(value)} is not an OTLP AnyValue")


def _otlp_attributes(items: Any, where: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise EvretError(f"{where}: attributes is {shown(items)}; OTLP attributes are a list of {{key, value}}")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise EvretError(f"{where}: attribute {shown(item)} is not {{\"key\", \"value\"}}")
        if item["key"] in out:
            raise EvretError(f"{where}: attribute {shown(item['key'])} is given twice")
        out[item["key"]] = _any_value(item.get("value", {}), where)
    return out


# -- spans ----------------------------------------------------------------------------------------------------------
def _first(span: Mapping[str, Any], *paths: str) -> Any:
    for path in paths:
        value = _get(span, path)
        if value is not None:
            return value
    return None


def _span_ident(value: Any, where: str, name: str, optional: bool = False) -> str | None:
    if value is None or (optional and value == ""):
        if optional:
            return None
        raise EvretError(f"{where}: the span has no {name}")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise EvretError(f"{where}: {name} is {shown(value)}; a span id is a non-empty string")
    return str(value)


def _start(value: Any, where: str) -> float:
    """Seconds since the epoch from an ISO time (Phoenix) or Unix nanoseconds (OTLP, a string or a number)."""
    if value is None:
        return 0.0
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            return datetime.fromisoformat(value.strip()).timestamp()
        except ValueError:
            raise EvretError(f"{where}: start_time {shown(value)} is not an ISO time") from None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise EvretError(f"{where}: start time {shown(value)} is not a time")
    seconds = float(value) / 1e9
    if not math.isfinite(seconds):
        raise EvretError(f"{where}: start time {shown(value)} is not a time")
    return seconds


def _span(raw: Any, where: str, otlp: bool) -> SpanRecord:
    if not isinstance(raw, dict):
        raise EvretError(f"{where}: a span is an object, got {shown(raw)}")
    if otlp:
        attributes = unflatten(_otlp_attributes(raw.get("attributes", []), where), where)
        span: dict[str, Any] = {k: v for k, v in raw.items() if k != "attributes"}
    else:
        span = unflatten(raw, where)  # dataframe dumps flatten the span itself: context.span_id, attributes.input...
        attributes = span.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise EvretError(f"{where}: attributes is {shown(attributes)}, not an object")
    trace_id = _span_ident(_first(span, "context.trace_id", "trace_id", "traceId"), where, "trace_id")
    span_id = _span_ident(_first(span, "context.span_id", "span_id", "spanId"), where, "span_id")
    at = f"{where} (trace {shown(trace_id)} span {shown(span_id)})"
    parent = _span_ident(_first(span, "parent_id", "parent_span_id", "parentSpanId"), at, "parent_id", optional=True)
    kind = span.get("span_kind") or _get(attributes, "openinference.span.kind") or ""
    if not isinstance(kind, str):
        raise EvretError(f"{at}: span kind is {shown(kind)}, not a string")
    name = span.get("name")
    assert trace_id is not None and span_id is not None
    return SpanRecord(trace_id, span_id, parent, name if isinstance(name, str) else "", kind.upper(),
                      _start(_first(span, "start_time", "start_time_unix_nano", "startTimeUnixNano"), at),
                      attributes, at)


def _otlp_spans(document: Mapping[str, Any], where: str) -> Iterator[SpanRecord]:
    resources = document.get("resourceSpans", document.get("resource_spans"))
    if not isinstance(resources, list):
        raise EvretError(f"{where}: resourceSpans is {shown(resources)}, not a list")
    for r, resource in enumerate(resources):
        scopes = resource.get("scopeSpans", resource.get("scope_spans")) if isinstance(resource, dict) else None
        if not isinstance(scopes, list):
            raise EvretError(f"{where}: resourceSpans[{r}] has no list of scopeSpans")
        for s, scope in enumerate(scopes):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                raise EvretError(f"{where}: resourceSpans[{r}].scopeSpans[{s}] has no list of spans")
            for i, raw in enumerate(spans):
                yield _span(raw, f"{where}: resourceSpans[{r}].scopeSpans[{s}].spans[{i}]", otlp=True)


def _document_spans(document: Any, where: str) -> Iterator[SpanRecord]:
    if isinstance(document, list):
        for i, raw in enumerate(document):
            yield _span(raw, f"{where}: span {i}", otlp=False)
    elif isinstance(document, dict) and ("resourceSpans" in document or "resource_spans" in document):
        yield from _otlp_spans(document, where)
    elif isinstance(document, dict) and isinstance(document.get("data"), list):
        for i, raw in enumerate(document["data"]):
            yield _span(raw, f"{where}: data[{i}]", otlp=False)
    elif isinstance(document, dict):
        yield _span(document, where, otlp=False)
    else:
        raise EvretError(f"{where}: expected spans (a list, {{\"data\": [...]}} or OTLP resourceSpans), got "
                         f"{type(document).__name__}")


def spans_of(path: str | Path) -> list[SpanRecord]:
    """Every span of an OpenInference export in any of the four shapes (see the module docs), in file order."""
    text = read_text(path, "span file")
    try:
        document = loads_json(text, path)
    except EvretError:
        if len([line for line in text.split("\n") if line.strip()]) < 2:
            raise
        spans: list[SpanRecord] = []
        for _lineno, where, record in iter_json_lines(path, what="span file"):
            spans.extend(_document_spans(record, where))
        return spans
    return list(_document_spans(document, str(path)))


# -- traces ---------------------------------------------------------------------------------------------------------
def _json_rule(attributes: Mapping[str, Any], side: str, keys: Sequence[str]) -> str | None:
    """``input.value`` / ``output.value``: the raw string, or, when its mime type is JSON (or it is a JSON object),
    its first of ``keys`` or its last message's content."""
    value = _get(attributes, f"{side}.value")
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    mime = _get(attributes, f"{side}.mime_type")
    if mime == "application/json" or value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, dict):
            for key in keys:
                if isinstance(parsed.get(key), str):
                    return str(parsed[key])
            messages = parsed.get("messages")
            if isinstance(messages, list) and messages and isinstance(messages[-1], dict) and isinstance(
                    messages[-1].get("content"), str):
                return str(messages[-1]["content"])
        elif isinstance(parsed, str):
            return parsed
    return value


def _documents(span: SpanRecord, prefix: str) -> tuple[Retrieved, ...]:
    out = []
    seen: set[str] = set()
    for i, item in _indexed(_get(span.attributes, prefix), span.where, prefix):
        name = f"{prefix}.{i}"
        doc = item.get("document") if isinstance(item, dict) else None
        if not isinstance(doc, dict):
            raise EvretError(f"{span.where}: {name} has no document")
        doc_id = doc.get("id")
        if doc_id is None or doc_id == "":
            raise EvretError(f"{span.where}: {name} has no document.id")
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise EvretError(f"{span.where}: {name}.document.id is {shown(doc_id)}; an id is a string")
        if str(doc_id) in seen:
            raise EvretError(f"{span.where}: {name}.document.id {shown(doc_id)} is retrieved twice in one span")
        seen.add(str(doc_id))
        content = doc.get("content")
        if content is not None and not isinstance(content, str):
            raise EvretError(f"{span.where}: {name}.document.content is {shown(content)}, not a string")
        score = doc.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                  or not math.isfinite(score)):
            raise EvretError(f"{span.where}: {name}.document.score is {shown(score)}, not a finite number")
        out.append(Retrieved(str(doc_id), content, None if score is None else float(score)))
    return tuple(out)


def _check_tree(spans: Sequence[SpanRecord], source: str) -> None:
    """No span id twice in one trace, no span its own parent, no circle of parents."""
    by_id: dict[str, SpanRecord] = {}
    for span in spans:
        if span.span_id in by_id:
            raise EvretError(f"{span.where}: span id {shown(span.span_id)} repeats in trace {shown(span.trace_id)} "
                             f"(first at {by_id[span.span_id].where})")
        if span.parent_id == span.span_id:
            raise EvretError(f"{span.where}: the span is its own parent")
        by_id[span.span_id] = span
    done: set[str] = set()
    for span in spans:
        path: list[str] = []
        on_path: set[str] = set()
        node: SpanRecord | None = span
        while node is not None and node.span_id not in done:
            if node.span_id in on_path:
                raise EvretError(f"{source}: trace {shown(span.trace_id)}: the parents of span "
                                 f"{shown(node.span_id)} form a circle")
            on_path.add(node.span_id)
            path.append(node.span_id)
            node = by_id.get(node.parent_id) if node.parent_id is not None else None
        done.update(path)


def _trace(spans: list[SpanRecord], source: str) -> TraceRecord:
    _check_tree(spans, source)
    by_id = {s.span_id: s for s in spans}
    ordered = sorted(spans, key=lambda s: (s.start, s.span_id))
    roots = [s for s in ordered if s.parent_id is None or s.parent_id not in by_id]
    root = next((s for s in roots if s.parent_id is None), roots[0] if roots else ordered[0])
    question = _json_rule(root.attributes, "input", _INPUT_KEYS)
    answer = _json_rule(root.attributes, "output", _OUTPUT_KEYS)
    if answer is None:
        for span in reversed(ordered):
            if span.kind == "LLM":
                messages = _indexed(_get(span.attributes, "llm.output_messages"), span.where, "llm.output_messages")
                content = _get(messages[-1][1], "message.content") if messages else None
                if isinstance(content, str):
                    answer = content
                    break
    hops = []
    for span in ordered:
        if span.kind not in ("RETRIEVER", "RERANKER"):
            continue
        parent = by_id.get(span.parent_id) if span.parent_id is not None else None
        tool = None
        if parent is not None and parent.kind == "TOOL":
            name = _get(parent.attributes, "tool.name")
            tool = name if isinstance(name, str) else parent.name or None
        if span.kind == "RETRIEVER":
            query = _json_rule(span.attributes, "input", _INPUT_KEYS)
            retrieved = _documents(span, "retrieval.documents")
            kind = "retrieve"
        else:
            rerank_query = _get(span.attributes, "reranker.query")
            query = rerank_query if isinstance(rerank_query, str) else _json_rule(span.attributes, "input",
                                                                                 _INPUT_KEYS)
            retrieved = _documents(span, "reranker.output_documents")
            kind = "rerank"
        if query is None or not query.strip():
            raise EvretError(f"{span.where}: the {span.kind} span has no query (input.value"
                             f"{' or reranker.query' if kind == 'rerank' else ''})")
        hops.append(Hop(query=query, retrieved=retrieved, tool=tool, kind=kind, hop_id=span.span_id))
    session = _get(root.attributes, "session.id")
    tags: dict[str, str] = {}
    metadata = _get(root.attributes, "metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except (ValueError, RecursionError):
            metadata = None
    if isinstance(metadata, dict):
        tags = {str(k): str(v) for k, v in metadata.items()
                if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
    return TraceRecord(trace_id=root.trace_id, hops=tuple(hops), question=question, answer=answer, tags=tags,
                       conversation_id=str(session) if isinstance(session, (str, int)) and not isinstance(
                           session, bool) and str(session) else None)


def traces_from_spans(spans: Sequence[SpanRecord], source: str) -> list[TraceRecord]:
    """One trace per ``trace_id``, in order of each trace's first span in the file."""
    groups: dict[str, list[SpanRecord]] = {}
    for span in spans:
        groups.setdefault(span.trace_id, []).append(span)
    if not groups:
        raise EvretError(f"{source}: the file holds no spans")
    return [_trace(group, source) for group in groups.values()]


def read_openinference(path: str | Path) -> list[TraceRecord]:
    """The traces of an OpenInference / Phoenix span export (any of the four shapes of the module docs)."""
    return traces_from_spans(spans_of(path), str(path))
