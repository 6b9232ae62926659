"""Retrieved results from files: evaluate a RAG system's dumped retrieval without writing Python.

Two formats, both read into a precomputed run that the Evaluator takes as its retriever:

- **Retrieved JSONL** (``--run retrieved.jsonl``): one object per retrieved document,
  ``{"query_id": "q1", "doc_id": "d7", "score": 12.5, "text": "...", "rank": 1}``, or one object per query,
  ``{"query_id": "q1", "results": [{"doc_id": ..., "score": ..., "text": ...}, ...]}``. ``doc_id`` is required;
  ``score``, ``text``, ``rank`` and ``metadata`` are optional. A query's documents are ranked by ``rank`` when every
  one has it, otherwise in file order (the order your system returned them); ranks on some of a query's documents
  only, a document listed twice for a query, a non-finite score or a bad rank is an error naming the file and line.
- **TREC run files** (6 columns, as trec_eval reads them): ranked by score with trec_eval's tie-break; with a
  corpus (``--corpus corpus.jsonl``) each document gets its text and title (as the bm25 retriever gives them),
  which text-labelled queries need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.corpus import read_corpus
from evret_core.io.jsonio import iter_json_lines

_RESULT_KEYS = {"doc_id", "score", "text", "rank", "metadata"}
_LINE_KEYS = _RESULT_KEYS | {"query_id"}


def _is_trec_run(path: Path) -> bool:
    """A TREC run's first non-blank line has 6 whitespace-separated fields or more (the TREC reader refuses a joined
    line, naming it) and is not JSON."""
    try:
        with path.open("rb") as handle:
            for raw in handle:
                line = raw.strip()
                if line:
                    return not line.startswith((b"{", b"[")) and len(line.split()) >= 6
    except OSError:
        return False
    return False


def _result(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = set(record) - _RESULT_KEYS - {"query_id"}
    if unknown:
        raise EvretError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; a retrieved result has "
                         f"{', '.join(sorted(_RESULT_KEYS))}")
    doc_id = record.get("doc_id")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or str(doc_id).strip() == "":
        raise EvretError(f"{where}: 'doc_id' must be a non-empty string or integer")
    out: dict[str, Any] = {"doc_id": str(doc_id)}
    score = record.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise EvretError(f"{where}: 'score' must be a finite number, got {score!r}")
        out["score"] = float(score)
    text = record.get("text")
    if text is not None and not isinstance(text, str):
        raise EvretError(f"{where}: 'text' must be a string")
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise EvretError(f"{where}: 'metadata' must be an object")
    out["metadata"] = dict(metadata or {})
    if text is not None:
        out["metadata"]["text"] = text
    rank = record.get("rank")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= 10**9:
            raise EvretError(f"{where}: 'rank' must be a positive integer, got {rank!r}")
        out["rank"] = rank
    return out


def rank_key(doc_id: Any) -> tuple[int, ...]:
    """The sort key that ranks tied scores as trec_eval does: by document id in descending string order (sort by
    ``(-score, rank_key(doc_id))``)."""
    return tuple(-ord(ch) for ch in str(doc_id)) + (1,)


def read_retrieved_jsonl(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """``{query_id: [{"doc_id", "score", "metadata": {"text": ...}}, ...]}`` ranked, from a retrieved JSONL file."""
    path = Path(path)
    run: dict[str, list[dict[str, Any]]] = {}
    seen: dict[tuple[str, str], str] = {}
    for _lineno, where, record in iter_json_lines(path, what="retrieved results file"):
        if not isinstance(record, dict):
            raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
        qid = record.get("query_id")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid).strip() == "":
            raise EvretError(f"{where}: 'query_id' must be a non-empty string or integer")
        qid = str(qid)
        if "results" in record:
            extra = set(record) - {"query_id", "results"}
            if extra:
                raise EvretError(f"{where}: a per-query line has 'query_id' and 'results' only; got "
                                 f"{', '.join(sorted(extra))}")
            items = record["results"]
            if not isinstance(items, list):
                raise EvretError(f"{where}: 'results' must be a list")
            parsed = [_result(item if isinstance(item, dict) else {"?": item}, f"{where}, result {i + 1}")
                      for i, item in enumerate(items)]
        else:
            unknown = set(record) - _LINE_KEYS
            if unknown:
                raise EvretError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; a line has "
                                 f"{', '.join(sorted(_LINE_KEYS))} (or 'query_id' and 'results')")
            parsed = [_result(record, where)]
        for result in parsed:
            key = (qid, result["doc_id"])
            if key in seen:
                raise EvretError(f"{where}: document {result['doc_id']!r} is listed twice for query {qid!r} "
                                 f"(first at {seen[key]})")
            seen[key] = where
            run.setdefault(qid, []).append(result)
    if not run:
        raise EvretError(f"{path}: the retrieved results file has no results")
    for qid, results in run.items():
        ranks = [r.get("rank") for r in results]
        if all(rank is not None for rank in ranks):
            if len(set(ranks)) != len(ranks):
                raise EvretError(f"{path}: query {qid!r} gives the same rank to two documents")
            results.sort(key=lambda r: r["rank"])
        elif any(rank is not None for rank in ranks):
            # ranking by file order would ignore the ranks given; ranking by them would guess where the rest go
            ranked = next(r for r in results if r.get("rank") is not None)
            unranked = next(r for r in results if r.get("rank") is None)
            raise EvretError(f"{seen[(qid, unranked['doc_id'])]}: document {unranked['doc_id']!r} of query {qid!r} "
                             f"has no 'rank', but {ranked['doc_id']!r} ({seen[(qid, ranked['doc_id'])]}) has one; "
                             f"give every document of a query a rank, or none (then file order ranks them)")
        for r in results:
            r.pop("rank", None)
    return run


def read_retrieved(path: str | Path, corpus: str | Path | None = None) -> Mapping[str, Any]:
    """A precomputed run from a retrieved JSONL file or a TREC run file (texts from ``corpus`` when given).

    A TREC run without a corpus is read as columns (:func:`~evret_core.io.runcolumns.read_run_columns`: about
    20 bytes per line, so a million queries x 100 fit in memory), a ``{qid: {doc_id: score}}`` mapping whose
    dicts are built per query when asked for; with a corpus every document must be in it (a missing one is an
    error naming the run file and the document).
    """
    path = Path(path)
    if not path.exists():
        raise EvretError(f"{path}: no such retrieved results file")
    if _is_trec_run(path):
        from evret_core.io.runcolumns import read_run_columns

        trec = read_run_columns(path)
        if corpus is None:
            return trec
        documents = read_corpus(corpus)
        out: dict[str, Any] = {}
        for qid, scores in trec.items():
            ranked = sorted(scores.items(), key=lambda item: (-item[1], rank_key(item[0])))
            results = []
            for doc_id, score in ranked:
                doc = documents.get(doc_id)
                if doc is None:
                    raise EvretError(f"{path}: query {qid!r} retrieved {doc_id!r}, which is not in the corpus "
                                     f"{corpus}")
                results.append({"doc_id": doc_id, "score": score,
                                "metadata": {"text": doc["text"], "title": doc["title"]}})
            out[qid] = results
        return out
    run = read_retrieved_jsonl(path)
    if corpus is not None:
        documents = read_corpus(corpus)
        for ranked_results in run.values():
            for r in ranked_results:
                doc = documents.get(r["doc_id"])
                if doc is not None and "text" not in r["metadata"]:
                    r["metadata"].update(text=doc["text"], title=doc["title"])
    return run
