"""Evret's agent-trace JSONL: one agent run per line (its question, final answer, labels and retrieval hops), read
with every error at ``file:line`` and the field (``hops[1].retrieved[0]``), written back for hand labelling, and the
``--labels`` file that adds labels to traces imported from elsewhere (``docs/traces.md``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.jsonio import iter_json_lines
from evret_core.io.outputs import write_output
from evret_core.io.redact import redact_text

__all__ = ["DEFAULT_METRICS", "HOP_KINDS", "Hop", "Retrieved", "TraceLabels", "TraceRecord", "apply_labels", "fill_texts", "parse_trace",
           "read_labels", "read_traces", "shown", "trace_record", "write_traces"]

DEFAULT_METRICS = ("recall@5", "ndcg@5", "hit_rate@5")
"""The metrics of every hop when none is named (``evret trace --metric``)."""

HOP_KINDS = ("retrieve", "rerank")
"""What a hop did: ``retrieve`` (scored) or ``rerank`` (kept in the record, not scored as a query)."""

TRACE_FIELDS = frozenset({"trace_id", "question", "answer", "expected_answers", "relevant_doc_ids", "tags", "metadata",
                          "conversation_id", "turn_index", "hops"})
HOP_FIELDS = frozenset({"query", "tool", "retrieved", "relevant_doc_ids", "expected_answers", "hop_id", "kind"})
LABEL_FIELDS = frozenset({"trace_id", "question", "expected_answers", "relevant_doc_ids", "hops"})


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as an error quotes it: its repr cut to ``limit`` characters and with credentials masked (span
    attributes hold URLs with keys; a crafted file may hold megabytes in one value)."""
    text = repr(value)
    if len(text) > limit:
        text = text[:limit] + "..."
    if not any(ch in text for ch in ":@= "):  # nothing a credential could hide in: the usual id, cheaply
        return text
    return redact_text(text)


@dataclass(frozen=True)
class Retrieved:
    """One retrieved document of a hop: its id, text (None: to be read from a corpus) and score."""

    id: str
    text: str | None = None
    score: float | None = None


@dataclass(frozen=True)
class Hop:
    """One step of an agent run: the query a tool sent, what came back in rank order, and the hop's own labels
    (None: none given; then the trace's labels apply)."""

    query: str
    retrieved: tuple[Retrieved, ...] = ()
    tool: str | None = None
    kind: str = "retrieve"
    hop_id: str | None = None
    relevant_doc_ids: tuple[str, ...] | None = None
    expected_answers: tuple[tuple[str, ...], ...] | None = None

    @property
    def labelled(self) -> bool:
        return self.relevant_doc_ids is not None or self.expected_answers is not None


@dataclass(frozen=True)
class TraceRecord:
    """One agent run: the user's question, the final answer, the trace's labels, tags and its hops in order."""

    trace_id: str
    hops: tuple[Hop, ...] = ()
    question: str | None = None
    answer: str | None = None
    expected_answers: tuple[tuple[str, ...], ...] | None = None
    relevant_doc_ids: tuple[str, ...] | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    conversation_id: str | None = None
    turn_index: int | None = None

    @property
    def labelled(self) -> bool:
        return self.relevant_doc_ids is not None or self.expected_answers is not None


# -- reading --------------------------------------------------------------------------------------------------------
def _text(value: Any, where: str, name: str, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise EvretError(f"{where}: {name} is {shown(value)}, not a string")
    if not empty and not value.strip():
        raise EvretError(f"{where}: {name} is empty")
    return value


def _optional_text(record: Mapping[str, Any], key: str, where: str, name: str) -> str | None:
    value = record.get(key)
    return None if value is None else _text(value, where, name, empty=True)


def _ident(value: Any, where: str, name: str) -> str:
    """An id: a non-empty string, or a whole number written out (never a bool, a float or a structure)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EvretError(f"{where}: {name} is {shown(value)}; an id is a string")
    text = str(value)
    if not text.strip():
        raise EvretError(f"{where}: {name} is empty")
    return text


def _answers(value: Any, where: str, name: str) -> tuple[tuple[str, ...], ...] | None:
    """Expected answers: a text, or a list whose items are texts or lists of aliases (the first canonical)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise EvretError(f"{where}: {name} is {shown(value)}; give a non-empty list of answer texts")
    out = []
    for i, item in enumerate(items):
        aliases = [item] if isinstance(item, str) else item
        if not isinstance(aliases, list) or not aliases:
            raise EvretError(f"{where}: {name}[{i}] is {shown(item)}; an answer is a text or a list of aliases")
        out.append(tuple(_text(a, where, f"{name}[{i}]") for a in aliases))
    return tuple(out)


def _ids(value: Any, where: str, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise EvretError(f"{where}: {name} is {shown(value)}; give a list of document ids")
    ids = tuple(_ident(v, where, f"{name}[{i}]") for i, v in enumerate(value))
    if len(set(ids)) != len(ids):
        twice = next(d for i, d in enumerate(ids) if d in ids[:i])
        raise EvretError(f"{where}: {name} lists {shown(twice)} twice")
    return ids


def _unknown(record: Mapping[str, Any], known: frozenset[str], where: str, what: str) -> None:
    extra = sorted(str(k) for k in record if k not in known)
    if extra:
        raise EvretError(f"{where}: unknown {what} field(s) {', '.join(shown(k) for k in extra)}; a {what} has "
                         f"{', '.join(sorted(known))}")


def _retrieved(value: Any, where: str) -> Retrieved:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return Retrieved(_ident(value, where, "id"))
    if not isinstance(value, dict):
        raise EvretError(f"{where}: is {shown(value)}; a retrieved document is an id or {{\"id\", \"text\", "
                         f"\"score\"}}")
    _unknown(value, frozenset({"id", "text", "score"}), where, "retrieved document")
    if "id" not in value:
        raise EvretError(f"{where}: has no id")
    score = value.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not math.isfinite(score)):
        raise EvretError(f"{where}: score is {shown(score)}, not a finite number")
    text = value.get("text")
    return Retrieved(_ident(value["id"], where, "id"), None if text is None else _text(text, where, "text", True),
                     None if score is None else float(score))


def _hop(value: Any, where: str) -> Hop:
    if not isinstance(value, dict):
        raise EvretError(f"{where}: is {shown(value)}; a hop is an object with a query")
    _unknown(value, HOP_FIELDS, where, "hop")
    if "query" not in value:
        raise EvretError(f"{where}: has no query")
    kind = value.get("kind", "retrieve")
    if kind not in HOP_KINDS:
        raise EvretError(f"{where}: kind is {shown(kind)}; use one of {', '.join(HOP_KINDS)}")
    listed = value.get("retrieved", [])
    if not isinstance(listed, list):
        raise EvretError(f"{where}: retrieved is {shown(listed)}; give a list of documents")
    retrieved = tuple(_retrieved(item, f"{where}.retrieved[{j}]") for j, item in enumerate(listed))
    seen: set[str] = set()
    for j, doc in enumerate(retrieved):
        if doc.id in seen:
            raise EvretError(f"{where}.retrieved[{j}]: document {shown(doc.id)} is retrieved twice in one hop")
        seen.add(doc.id)
    hop_id = value.get("hop_id")
    return Hop(query=_text(value["query"], where, "query"), retrieved=retrieved,
               tool=_optional_text(value, "tool", where, "tool"), kind=kind,
               hop_id=None if hop_id is None else _ident(hop_id, where, "hop_id"),
               relevant_doc_ids=_ids(value.get("relevant_doc_ids"), where, "relevant_doc_ids"),
               expected_answers=_answers(value.get("expected_answers"), where, "expected_answers"))


def parse_trace(record: Any, where: str) -> TraceRecord:
    """One trace from its parsed JSON object; errors name ``where`` (``file:line``) and the field."""
    if not isinstance(record, dict):
        raise EvretError(f"{where}: expected a JSON object (one trace), got {type(record).__name__}")
    _unknown(record, TRACE_FIELDS, where, "trace")
    if "trace_id" not in record:
        raise EvretError(f"{where}: the trace has no trace_id")
    hops = record.get("hops", [])
    if not isinstance(hops, list):
        raise EvretError(f"{where}: hops is {shown(hops)}; give a list of hops (possibly empty)")
    tags = record.get("tags", {})
    if not isinstance(tags, dict) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                             for v in tags.values()):
        raise EvretError(f"{where}: tags is {shown(tags)}; give an object of name -> text")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise EvretError(f"{where}: metadata is {shown(metadata)}, not an object")
    turn = record.get("turn_index")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 0):
        raise EvretError(f"{where}: turn_index is {shown(turn)}; give a whole number from 0")
    conversation = record.get("conversation_id")
    return TraceRecord(
        trace_id=_ident(record["trace_id"], where, "trace_id"),
        hops=tuple(_hop(h, f"{where} hops[{i}]") for i, h in enumerate(hops)),
        question=_optional_text(record, "question", where, "question"),
        answer=_optional_text(record, "answer", where, "answer"),
        expected_answers=_answers(record.get("expected_answers"), where, "expected_answers"),
        relevant_doc_ids=_ids(record.get("relevant_doc_ids"), where, "relevant_doc_ids"),
        tags={str(k): str(v) for k, v in tags.items()}, metadata=metadata,
        conversation_id=None if conversation is None else _ident(conversation, where, "conversation_id"),
        turn_index=turn)


def read_traces(path: str | Path) -> list[TraceRecord]:
    """Every trace of an Evret trace JSONL, in file order; a repeated ``trace_id`` is an error naming both lines,
    and a file without traces is an error."""
    traces: list[TraceRecord] = []
    first: dict[str, int] = {}
    for lineno, where, record in iter_json_lines(path, what="trace file"):
        trace = parse_trace(record, where)
        if trace.trace_id in first:
            raise EvretError(f"{where}: trace_id {shown(trace.trace_id)} repeats line {first[trace.trace_id]}")
        first[trace.trace_id] = lineno
        traces.append(trace)
    if not traces:
        raise EvretError(f"{path}: the trace file holds no traces")
    return traces


# -- writing --------------------------------------------------------------------------------------------------------
def _answers_record(answers: tuple[tuple[str, ...], ...]) -> list[Any]:
    return [a[0] if len(a) == 1 else list(a) for a in answers]


def trace_record(trace: TraceRecord) -> dict[str, Any]:
    """``trace`` as the JSON object of one line of the trace JSONL (fields that are not set are left out)."""
    out: dict[str, Any] = {"trace_id": trace.trace_id}
    for key in ("question", "answer", "conversation_id", "turn_index"):
        if getattr(trace, key) is not None:
            out[key] = getattr(trace, key)
    if trace.expected_answers is not None:
        out["expected_answers"] = _answers_record(trace.expected_answers)
    if trace.relevant_doc_ids is not None:
        out["relevant_doc_ids"] = list(trace.relevant_doc_ids)
    if trace.tags:
        out["tags"] = dict(trace.tags)
    if trace.metadata:
        out["metadata"] = dict(trace.metadata)
    hops = []
    for hop in trace.hops:
        item: dict[str, Any] = {"query": hop.query}
        if hop.tool is not None:
            item["tool"] = hop.tool
        if hop.kind != "retrieve":
            item["kind"] = hop.kind
        if hop.hop_id is not None:
            item["hop_id"] = hop.hop_id
        item["retrieved"] = [{"id": d.id, **({} if d.text is None else {"text": d.text}),
                              **({} if d.score is None else {"score": d.score})} for d in hop.retrieved]
        if hop.relevant_doc_ids is not None:
            item["relevant_doc_ids"] = list(hop.relevant_doc_ids)
        if hop.expected_answers is not None:
            item["expected_answers"] = _answers_record(hop.expected_answers)
        hops.append(item)
    out["hops"] = hops
    return out


def write_traces(path: str | Path, traces: Iterable[TraceRecord], option: str = "--write-traces") -> None:
    """Write ``traces`` as Evret trace JSONL through the output guard (atomically)."""
    def lines() -> Iterator[str]:
        for trace in traces:
            yield json.dumps(trace_record(trace), ensure_ascii=False) + "\n"

    write_output(path, lines(), option=option)


# -- labels ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceLabels:
    """One line of a ``--labels`` file: the trace it names (by id or by its exact question) and its labels; ``hops``
    holds one entry per hop by position (None: that hop has no labels of its own)."""

    where: str
    trace_id: str | None
    question: str | None
    expected_answers: tuple[tuple[str, ...], ...] | None
    relevant_doc_ids: tuple[str, ...] | None
    hops: tuple[tuple[tuple[str, ...] | None, tuple[tuple[str, ...], ...] | None], ...] = ()


def read_labels(path: str | Path) -> list[TraceLabels]:
    """The lines of a labels JSONL: each names a trace by ``trace_id`` or ``question`` and gives
    ``expected_answers``, ``relevant_doc_ids`` and/or ``hops: [{"relevant_doc_ids", "expected_answers"}]``."""
    out = []
    for _lineno, where, record in iter_json_lines(path, what="labels file"):
        if not isinstance(record, dict):
            raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
        _unknown(record, LABEL_FIELDS, where, "label")
        if ("trace_id" in record) == ("question" in record):
            raise EvretError(f"{where}: name the trace by trace_id or by question (one of them)")
        hops = record.get("hops", [])
        if not isinstance(hops, list):
            raise EvretError(f"{where}: hops is {shown(hops)}; give a list with one object per hop")
        hop_labels: list[tuple[tuple[str, ...] | None, tuple[tuple[str, ...], ...] | None]] = []
        for i, hop in enumerate(hops):
            at = f"{where} hops[{i}]"
            if hop is None:
                hop_labels.append((None, None))
                continue
            if not isinstance(hop, dict):
                raise EvretError(f"{at}: is {shown(hop)}; give an object with relevant_doc_ids or expected_answers")
            _unknown(hop, frozenset({"relevant_doc_ids", "expected_answers"}), at, "hop label")
            hop_labels.append((_ids(hop.get("relevant_doc_ids"), at, "relevant_doc_ids"),
                               _answers(hop.get("expected_answers"), at, "expected_answers")))
        labels = TraceLabels(
            where, None if "trace_id" not in record else _ident(record["trace_id"], where, "trace_id"),
            None if "question" not in record else _text(record["question"], where, "question"),
            _answers(record.get("expected_answers"), where, "expected_answers"),
            _ids(record.get("relevant_doc_ids"), where, "relevant_doc_ids"), tuple(hop_labels))
        if labels.expected_answers is None and labels.relevant_doc_ids is None and not any(
                ids is not None or answers is not None for ids, answers in labels.hops):
            raise EvretError(f"{where}: the line gives no labels (expected_answers, relevant_doc_ids or hops)")
        out.append(labels)
    return out


def apply_labels(traces: Sequence[TraceRecord], labels: Sequence[TraceLabels]) -> list[TraceRecord]:
    """``traces`` with the labels of ``labels`` set (a label replaces what the trace had). A label that names no
    trace, names one twice, or a question several traces share, and hop labels beyond a trace's hops are errors at
    the label's line."""
    by_id = {t.trace_id: i for i, t in enumerate(traces)}
    by_question: dict[str, list[int]] = {}
    for i, t in enumerate(traces):
        if t.question is not None:
            by_question.setdefault(t.question, []).append(i)
    out = list(traces)
    labelled: dict[int, str] = {}
    for label in labels:
        if label.trace_id is not None:
            if label.trace_id not in by_id:
                raise EvretError(f"{label.where}: no trace has trace_id {shown(label.trace_id)}")
            index = by_id[label.trace_id]
        else:
            assert label.question is not None
            found = by_question.get(label.question, [])
            if len(found) != 1:
                problem = "no trace has" if not found else f"{len(found)} traces have"
                raise EvretError(f"{label.where}: {problem} the question {shown(label.question)}"
                                 f"{'; name it by trace_id' if found else ''}")
            index = found[0]
        if index in labelled:
            raise EvretError(f"{label.where}: trace {shown(traces[index].trace_id)} is labelled twice (also at "
                             f"{labelled[index]})")
        labelled[index] = label.where
        trace = out[index]
        if len(label.hops) > len(trace.hops):
            raise EvretError(f"{label.where}: {len(label.hops)} hop labels, but trace {shown(trace.trace_id)} has "
                             f"{len(trace.hops)} hops")
        hops = list(trace.hops)
        for i, (ids, answers) in enumerate(label.hops):
            if ids is not None or answers is not None:
                hops[i] = replace(hops[i], relevant_doc_ids=ids, expected_answers=answers)
        out[index] = replace(
            trace, hops=tuple(hops),
            expected_answers=label.expected_answers if label.expected_answers is not None else trace.expected_answers,
            relevant_doc_ids=label.relevant_doc_ids if label.relevant_doc_ids is not None else trace.relevant_doc_ids)
    return out


def fill_texts(traces: Sequence[TraceRecord], corpus: Mapping[str, Mapping[str, Any]], source: str) -> list[TraceRecord]:
    """``traces`` with every retrieved document that has no text given its text from ``corpus`` (id -> record);
    a document the corpus lacks is an error naming the trace and the hop (``source``: the corpus file)."""
    out = []
    for trace in traces:
        hops = []
        for i, hop in enumerate(trace.hops):
            docs = []
            for j, doc in enumerate(hop.retrieved):
                if doc.text is None:
                    record = corpus.get(doc.id)
                    if record is None:
                        raise EvretError(f"{source}: has no document {shown(doc.id)} (trace {shown(trace.trace_id)} "
                                         f"hops[{i}].retrieved[{j}])")
                    doc = replace(doc, text=str(record["text"]))
                docs.append(doc)
            hops.append(replace(hop, retrieved=tuple(docs)))
        out.append(replace(trace, hops=tuple(hops)))
    return out
