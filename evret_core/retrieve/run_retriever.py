"""The built-in retriever ``run``: a precomputed run read from a file: a retrieved-results JSONL dump, a TREC run
file (with a corpus for the texts) or a JSON file ``{qid: {docid: score}}``."""

from __future__ import annotations

from typing import Any


def precomputed_run(path: str | None = None, corpus: str | None = None, **options: Any) -> Any:
    """A run computed elsewhere (``evret evaluate --run FILE [--corpus CORPUS]``):

    - ``.jsonl``: retrieved results, one object per document or per query (see :mod:`evret_core.io.runs`);
    - a TREC run file (``qid Q0 docid rank score tag``); ``corpus`` gives each document its text;
    - ``.json``: ``{qid: {docid: score}}`` or ``{qid: [docid, ...]}``.

    Every query of the dataset must be in it (or pass ``--missing-queries zero``)."""
    from pathlib import Path

    from evret_core.contracts.errors import EvretError
    from evret_core.io.jsonio import loads_json, read_text
    from evret_core.io.runs import read_retrieved
    from evret_core.retrieve.retrievers import PrecomputedRetriever

    options.pop("dataset", None)
    if options:
        raise EvretError(f"retriever run: unknown option(s) {', '.join(sorted(options))}; it takes path=FILE "
                         f"and corpus=FILE")
    if not path:
        raise EvretError("retriever run: option 'path' is missing (--run FILE, or --retriever-option path=FILE)")
    file = Path(path)
    if not file.is_file():
        raise EvretError(f"retriever run: {file}: no such run file")
    if file.suffix.lower() == ".json":
        data = loads_json(read_text(file, "run file"), str(file))
        if not isinstance(data, dict):
            raise EvretError(f"{file}: a JSON run is an object {{query_id: {{doc_id: score}}}}")
        check_json_run(data, str(file))
        return PrecomputedRetriever(data)
    return PrecomputedRetriever(read_retrieved(file, corpus))


def check_json_run(data: dict[str, Any], source: str) -> None:
    """Each query of a ``.json`` run maps to ``{doc_id: score}`` or to a list of distinct doc ids (or result
    objects): a bare string would be read as one-character ids, a repeated id counted twice."""
    from evret_core.contracts.errors import EvretError

    for qid, value in data.items():
        if isinstance(value, dict):
            continue
        if not isinstance(value, list):
            got = f"the string {value!r}" if isinstance(value, str) else repr(value)
            raise EvretError(f"{source}: query {qid!r} maps to {got[:60]}; a JSON run maps each query to "
                             f"{{doc_id: score}} or to a list of doc ids [\"d1\", \"d2\"]")
        ids = [item if isinstance(item, str) else item.get("doc_id") if isinstance(item, dict) else None
               for item in value]
        if any(d is None for d in ids):
            raise EvretError(f"{source}: query {qid!r}: every entry of its list must be a doc id string or an "
                             f"object with 'doc_id'")
        if len(set(ids)) != len(ids):
            seen: set[Any] = set()
            for doc in ids:
                if doc in seen:
                    raise EvretError(f"{source}: query {qid!r} lists document {doc!r} twice")
                seen.add(doc)
