"""The dataset's content hash: SHA-256 over each query's canonical JSON, one line per query.

A query's canonical JSON is ``json.dumps(fields, sort_keys=True, ensure_ascii=False)`` of its fields as
``model_dump()`` gives them (``answer_aliases`` only when some answer has aliases, so a dataset without aliases
hashes as it did before they existed). Results files record this hash, and ``evret compare`` and the regression
gates compare it across runs made by different Evret versions, so its bytes never change.

:func:`canonical_query_json` calls the json module's own C encoder once per query, made once with the options
``json.dumps`` would give it (``json.dumps`` builds a new encoder object per call, a third of its time on these
small records). Where that encoder is missing, has another signature, or writes anything but ``json.dumps``'s bytes
for a probe record, and for any record it cannot encode, ``json.dumps`` itself is used: the bytes, and the errors,
are always ``json.dumps``'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["canonical_query_json", "content_hash"]

_OPTIONS: dict[str, Any] = {"sort_keys": True, "ensure_ascii": False}
_MARKERS: dict[int, Any] = {}  # the circular-reference check's table, emptied after a failed call
# lines hashed per update: bounds memory for millions of queries, and each update of this many lines (over 2 KiB)
# lets other threads run (hashlib releases the GIL), e.g. the bootstrap the evaluator runs beside the hash
_LINES_PER_UPDATE = 1024


def _c_encoder() -> Callable[[Any, int], Any] | None:
    """The C encoder as ``json.dumps(..., **_OPTIONS)`` would build it, or None (see the module)."""
    try:
        import json.encoder as encoder_module

        c_make_encoder = getattr(encoder_module, "c_make_encoder", None)
        encode_basestring = encoder_module.encode_basestring
        if c_make_encoder is None:
            return None
        default = json.JSONEncoder(**_OPTIONS).default
        encode = c_make_encoder(_MARKERS, default, encode_basestring, None, ": ", ", ", True, False, True)
        probe = {"b": [1.5, -0.0, float("inf")], "a": {"z": "\u00e9\n\"", "y": None, "x": True}, "c": 10**20}
        if "".join(encode(probe, 0)) != json.dumps(probe, **_OPTIONS):
            return None
        return encode  # type: ignore[no-any-return]
    except Exception:  # an interpreter whose private encoder differs: json.dumps serves
        _MARKERS.clear()
        return None


_ENCODE = _c_encoder()


def canonical_query_json(query: Any) -> str:
    """``json.dumps`` of the query's hashed fields with sorted keys and ``ensure_ascii=False`` (see the module)."""
    data: dict[str, Any] = {"query_id": query.query_id, "query_text": query.query_text,
                            "expected_answers": query.expected_answers,
                            "relevant_doc_ids": query.relevant_doc_ids, "tags": query.tags}
    if any(len(a) != 1 for a in query.answer_aliases):
        data["answer_aliases"] = query.answer_aliases
    if _ENCODE is not None:
        try:
            return "".join(_ENCODE(data, 0))
        except Exception:  # json.dumps raises the error a caller expects (and the table is clean again)
            _MARKERS.clear()
    return json.dumps(data, **_OPTIONS)


def content_hash(queries: Iterable[Any]) -> str:
    """SHA-256 (hex) over each query's canonical JSON followed by a newline."""
    digest = hashlib.sha256()
    lines: list[str] = []
    for query in queries:
        lines.append(canonical_query_json(query))
        if len(lines) >= _LINES_PER_UPDATE:
            digest.update(("\n".join(lines) + "\n").encode("utf-8"))
            lines.clear()
    if lines:
        digest.update(("\n".join(lines) + "\n").encode("utf-8"))
    return digest.hexdigest()
