"""The dataset's content hash: SHA-256 over each query's canonical JSON, one line per query.

A query's canonical JSON is ``json.dumps(fields, sort_keys=True, ensure_ascii=False)`` of its fields as
``model_dump()`` gives them (``answer_aliases`` only when some answer has aliases, so a dataset without aliases
hashes as it did before they existed). Results files record this hash, and ``evret compare`` and the regression
gates compare it across runs made by different Evret versions, so its bytes never change.

:func:`canonical_query_json` writes those same bytes directly for the fields' usual types (str ids and texts,
float grades, str tags): 20 to 30% of the cost of the ``json`` encoder, which sorts and encodes every nested
dict through the general machinery. Anything else (a grade set to an int after validation, a non-str key) goes
through ``json.dumps`` itself, so the hash never depends on which path wrote a line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from json.encoder import encode_basestring  # the encoder's own string escaping (ensure_ascii=False)
from typing import Any

__all__ = ["canonical_query_json", "content_hash"]

_float = float.__repr__


def _strings(items: Any) -> str | None:
    """A JSON list of ``items`` when all are exact str, else None."""
    if type(items) is not list or not all(type(s) is str for s in items):
        return None
    return "[" + ", ".join(map(encode_basestring, items)) + "]"


def _fast(query: Any) -> str | None:
    """The canonical JSON of ``query`` for the usual field types, or None (the caller then uses ``json``)."""
    qid, text, tags, rel = query.query_id, query.query_text, query.tags, query.relevant_doc_ids
    if type(qid) is not str or type(text) is not str or type(tags) is not dict:
        return None
    answers = _strings(query.expected_answers)
    if answers is None:
        return None
    parts: list[str] = []
    aliases = query.answer_aliases
    if any(len(a) != 1 for a in aliases):
        written = [_strings(a) for a in aliases]
        if type(aliases) is not list or any(w is None for w in written):
            return None
        parts.append('"answer_aliases": [' + ", ".join(written) + "]")  # type: ignore[arg-type]
    parts.append('"expected_answers": ' + answers)
    parts.append('"query_id": ' + encode_basestring(qid))
    parts.append('"query_text": ' + encode_basestring(text))
    if rel is None:
        grades = "null"
    elif type(rel) is dict:
        items = sorted(rel.items())
        # finite floats only: json writes nan and inf its own way (NaN, Infinity), left to json itself
        if not all(type(k) is str and type(v) is float and v - v == 0.0 for k, v in items):
            return None
        grades = "{" + ", ".join([encode_basestring(k) + ": " + _float(v) for k, v in items]) + "}"
    else:
        listed = _strings(rel)
        if listed is None:
            return None
        grades = listed
    parts.append('"relevant_doc_ids": ' + grades)
    tag_items = sorted(tags.items())
    if not all(type(k) is str and type(v) is str for k, v in tag_items):
        return None
    parts.append('"tags": {' + ", ".join([encode_basestring(k) + ": " + encode_basestring(v)
                                           for k, v in tag_items]) + "}")
    return "{" + ", ".join(parts) + "}"


def canonical_query_json(query: Any) -> str:
    """``json.dumps`` of the query's hashed fields with sorted keys and ``ensure_ascii=False`` (see the module)."""
    fast = _fast(query)
    if fast is not None:
        return fast
    data: dict[str, Any] = {"query_id": query.query_id, "query_text": query.query_text,
                            "expected_answers": query.expected_answers,
                            "relevant_doc_ids": query.relevant_doc_ids, "tags": query.tags}
    if any(len(a) != 1 for a in query.answer_aliases):
        data["answer_aliases"] = query.answer_aliases
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def content_hash(queries: Iterable[Any]) -> str:
    """SHA-256 (hex) over each query's canonical JSON followed by a newline."""
    digest = hashlib.sha256()
    lines: list[str] = []
    for query in queries:
        lines.append(canonical_query_json(query))
        if len(lines) >= 4096:  # bounded memory for millions of queries, few update calls
            digest.update(("\n".join(lines) + "\n").encode("utf-8"))
            lines.clear()
    if lines:
        digest.update(("\n".join(lines) + "\n").encode("utf-8"))
    return digest.hexdigest()
