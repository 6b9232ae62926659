"""The search engine of the OpenSearch stub (``opensearch_stub.py``): indices with OpenSearch's dynamic mapping,
Lucene's BM25, OpenSearch's k-NN scores, the query DSL the stub answers, source filtering; no HTTP here.
The scoring rules are described in ``opensearch_stub.py``'s docs."""

from __future__ import annotations

import copy
import fnmatch
import math
import re
from collections import Counter
from typing import Any

import numpy as np

K1, B = 1.2, 0.75
_WORD = re.compile(r"\w+(?:['’.]\w+)*")


class Failure(Exception):
    """An error answer: HTTP status, OpenSearch's error type and reason."""

    def __init__(self, status: int, kind: str, reason: str, index: str | None = None) -> None:
        super().__init__(reason)
        cause: dict[str, Any] = {"type": kind, "reason": reason}
        if index is not None:
            cause.update({"index": index, "resource.id": index, "resource.type": "index_or_alias"})
        self.status, self.body = status, {"error": {"root_cause": [cause], **cause}, "status": status}


def analyze(text: Any) -> list[str]:
    """The standard analyzer, as described in the module docs."""
    return [w.lower() for w in _WORD.findall(str(text))]


def _int4(i: int) -> int:
    bits = i.bit_length()
    return i if bits < 4 else ((i >> (bits - 4)) & 0x07) | ((bits - 3) << 3)


def _from_int4(i: int) -> int:
    shift = (i >> 3) - 1
    return i & 0x07 if shift == -1 else ((i & 0x07) | 0x08) << shift


_FREE = 255 - _int4(2**31 - 1)  # 24: lengths below it are stored exactly


def stored_length(length: int) -> int:
    """A field length as Lucene's norms keep it (``SmallFloat.byte4ToInt(intToByte4(length))``)."""
    return length if length < _FREE else _FREE + _from_int4(_int4(length - _FREE))


def _values(source: Any, path: str) -> list[Any]:
    """The values at a dotted path of a source document, lists flattened."""
    if isinstance(source, dict) and path in source:
        value = source[path]
    else:
        value = source
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return []
            value = value[part]
    if isinstance(value, list) and not (value and all(isinstance(v, (int, float)) for v in value)):
        return [v for v in value if v is not None]
    return [] if value is None else [value]


def _dynamic(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "long"}
    if isinstance(value, float):
        return {"type": "float"}
    if isinstance(value, dict):
        return {"properties": {k: _dynamic(v) for k, v in value.items() if v is not None}}
    if isinstance(value, list) and value:
        return _dynamic(value[0])
    return {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


class Index:
    """One index: its mapping, its documents in insertion order (Lucene's doc order), statistics built lazily."""

    def __init__(self, name: str, body: dict[str, Any]) -> None:
        self.name = name
        self.settings = body.get("settings", {})
        self.properties: dict[str, Any] = copy.deepcopy(body.get("mappings", {}).get("properties", {}))
        self.dynamic = str(body.get("mappings", {}).get("dynamic", "true")).lower() == "true"
        self.ids: list[str] = []
        self.sources: list[dict[str, Any]] = []
        self.position: dict[str, int] = {}
        self._cache: dict[str, Any] = {}

    def fields(self, properties: dict[str, Any] | None = None, prefix: str = "",
               source: str = "") -> dict[str, tuple[str, dict[str, Any]]]:
        """``{field name: (path in the source, mapping)}``, multi-fields (``title.keyword``) included."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for name, field in (self.properties if properties is None else properties).items():
            path = f"{prefix}{name}"
            out[path] = (f"{source}{name}", field)
            out.update(self.fields(field.get("properties", {}), f"{path}.", f"{source}{name}."))
            for sub, subfield in field.get("fields", {}).items():
                out[f"{path}.{sub}"] = (f"{source}{name}", subfield)
        return out

    def put(self, doc_id: str, source: dict[str, Any]) -> str:
        for name, value in source.items():
            if self.dynamic and name not in self.properties and value is not None:
                self.properties[name] = _dynamic(value)
        for name, (path, field) in self.fields().items():
            if field.get("type") == "knn_vector":
                for vector in _values(source, path):
                    if not isinstance(vector, list) or len(vector) != int(field["dimension"]):
                        raise Failure(400, "mapper_parsing_exception", f"failed to parse field [{name}] of type "
                                      f"[knn_vector]: Vector dimension mismatch. Expected: {field['dimension']}")
        self._cache.clear()
        if doc_id in self.position:
            self.sources[self.position[doc_id]] = source
            return "updated"
        self.position[doc_id] = len(self.ids)
        self.ids.append(doc_id)
        self.sources.append(source)
        return "created"

    def field(self, name: str) -> tuple[str, dict[str, Any]] | None:
        return self.fields().get(name)

    def text_stats(self, name: str, path: str) -> dict[str, Any]:
        """Postings (term -> (documents, frequencies)), stored lengths, N and avgdl of a text field."""
        key = f"text:{name}"
        if key not in self._cache:
            postings: dict[str, tuple[list[int], list[int]]] = {}
            lengths = np.zeros(len(self.ids))
            total, having = 0, 0
            for doc, source in enumerate(self.sources):
                tokens = [t for v in _values(source, path) for t in analyze(v)]
                if not tokens:
                    continue
                having, total = having + 1, total + len(tokens)
                lengths[doc] = stored_length(len(tokens))
                for term, freq in Counter(tokens).items():
                    docs, freqs = postings.setdefault(term, ([], []))
                    docs.append(doc)
                    freqs.append(freq)
            self._cache[key] = {"postings": {t: (np.asarray(d), np.asarray(f, dtype=np.float64))
                                             for t, (d, f) in postings.items()},
                                "lengths": lengths, "N": having, "avgdl": total / having if having else 1.0}
        return self._cache[key]  # type: ignore[no-any-return]

    def vectors(self, name: str, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The field's vectors as a matrix (a row per document), which documents have one, and the rows' norms."""
        key = f"vector:{name}"
        if key not in self._cache:
            dim = int(self.fields()[name][1]["dimension"])
            matrix, present = np.zeros((len(self.ids), dim)), np.zeros(len(self.ids), dtype=bool)
            for doc, source in enumerate(self.sources):
                found = _values(source, path)
                if found:
                    matrix[doc], present[doc] = found[0], True
            self._cache[key] = (matrix, present, np.linalg.norm(matrix, axis=1))
        return self._cache[key]  # type: ignore[no-any-return]


def one_clause(clause: Any, kind: str) -> tuple[str, Any]:
    if not isinstance(clause, dict) or len(clause) != 1:
        raise Failure(400, "parsing_exception", f"[{kind}] query malformed, no start_object after query name")
    return next(iter(clause.items()))


def _allowed(kind: str, params: dict[str, Any], allowed: set[str]) -> None:
    for key in params:
        if key not in allowed:
            raise Failure(400, "parsing_exception", f"[{kind}] query does not support [{key}]")


Scored = tuple[np.ndarray, np.ndarray]  # (matching mask, scores) over the index's documents


class Searcher:
    """Evaluates a query body against an :class:`Index`."""

    def __init__(self, index: Index) -> None:
        self.index, self.n = index, len(index.ids)

    def run(self, query: Any) -> Scored:
        kind, body = one_clause(query, "query")
        method = getattr(self, f"q_{kind}", None)
        if method is None:
            raise Failure(400, "parsing_exception", f"unknown query [{kind}]")
        return method(body)  # type: ignore[no-any-return]

    def _constant(self, mask: np.ndarray, boost: float = 1.0) -> Scored:
        return mask, np.where(mask, float(boost), 0.0)

    def _exact(self, field: str, accept: Any) -> np.ndarray:
        found = self.index.field(field)
        if found is None:
            return np.zeros(self.n, dtype=bool)
        path, mapping = found
        text = mapping.get("type") == "text"
        return np.array([any(accept(t) for v in _values(s, path) for t in (analyze(v) if text else [v]))
                         for s in self.index.sources], dtype=bool)

    def q_match_all(self, body: dict[str, Any]) -> Scored:
        return self._constant(np.ones(self.n, dtype=bool), body.get("boost", 1.0))

    def bm25(self, field: str, text: str, operator: str = "or", boost: float = 1.0) -> Scored:
        found = self.index.field(field)
        if found is None:
            return np.zeros(self.n, dtype=bool), np.zeros(self.n)
        path, mapping = found
        if mapping.get("type") != "text":  # keyword, numbers, booleans: the whole value
            mask = self._exact(field, lambda v: str(v).lower() == text.lower() if isinstance(v, str) else
                               str(v) == text)
            return self._constant(mask, boost)
        stats, terms = self.index.text_stats(field, path), analyze(text)
        scores, hits = np.zeros(self.n), np.zeros(self.n, dtype=int)
        norm = K1 * (1 - B + B * stats["lengths"] / stats["avgdl"])
        for term in terms:  # a repeated term is a repeated SHOULD clause, as in Lucene
            posting = stats["postings"].get(term)
            if posting is None:
                continue
            docs, freqs = posting
            idf = math.log(1 + (stats["N"] - len(docs) + 0.5) / (len(docs) + 0.5))
            scores[docs] += boost * idf * freqs / (freqs + norm[docs])
            hits[docs] += 1
        mask = hits >= len(terms) if operator.lower() == "and" and terms else hits > 0
        return mask, np.where(mask, scores, 0.0)

    def q_match(self, body: dict[str, Any]) -> Scored:
        field, params = one_clause(body, "match")
        if not isinstance(params, dict):
            params = {"query": params}
        _allowed("match", params, {"query", "operator", "boost", "analyzer", "zero_terms_query"})
        return self.bm25(field, str(params.get("query", "")), params.get("operator", "or"),
                         float(params.get("boost", 1.0)))

    def q_multi_match(self, body: dict[str, Any]) -> Scored:
        _allowed("multi_match", body, {"query", "fields", "type", "tie_breaker", "operator", "boost", "analyzer"})
        kind, tie = body.get("type", "best_fields"), float(body.get("tie_breaker", 0.0))
        if kind not in ("best_fields", "most_fields"):
            raise Failure(400, "parsing_exception", f"[multi_match] query type [{kind}] is not supported here")
        names = self.index.fields()
        per_field = []
        for spec in body.get("fields") or ["*"]:
            pattern, _, boost = str(spec).partition("^")
            for field in [f for f in names if fnmatch.fnmatchcase(f, pattern)] if "*" in pattern else [pattern]:
                per_field.append(self.bm25(field, str(body.get("query", "")), body.get("operator", "or"),
                                           float(boost or 1.0)))
        if not per_field:
            return np.zeros(self.n, dtype=bool), np.zeros(self.n)
        masks, scores = np.array([m for m, _ in per_field]), np.array([s for _, s in per_field])
        best = scores.max(axis=0)
        total = scores.sum(axis=0) if kind == "most_fields" else best + tie * (scores.sum(axis=0) - best)
        mask = masks.any(axis=0)
        return mask, np.where(mask, total * float(body.get("boost", 1.0)), 0.0)

    def _term_value(self, kind: str, body: Any) -> tuple[str, Any, float]:
        field, value = one_clause(body, kind)
        boost = 1.0
        if isinstance(value, dict):
            _allowed(kind, value, {"value", "boost", "case_insensitive"} if kind == "term" else set())
            value, boost = value.get("value"), float(value.get("boost", 1.0))
        return field, value, boost

    def q_term(self, body: Any) -> Scored:
        field, value, boost = self._term_value("term", body)
        return self._constant(self._exact(field, lambda v: v == value), boost)

    def q_terms(self, body: dict[str, Any]) -> Scored:
        boost = float(body.get("boost", 1.0))
        field, values = one_clause({k: v for k, v in body.items() if k != "boost"}, "terms")
        if not isinstance(values, list):
            raise Failure(400, "parsing_exception", f"[terms] query does not support [{field}]")
        return self._constant(self._exact(field, lambda v: v in values), boost)

    def q_range(self, body: dict[str, Any]) -> Scored:
        field, bounds = one_clause(body, "range")
        _allowed("range", bounds, {"gt", "gte", "lt", "lte", "boost"})
        tests = {"gt": lambda v, b: v > b, "gte": lambda v, b: v >= b, "lt": lambda v, b: v < b,
                 "lte": lambda v, b: v <= b}

        def accept(v: Any) -> bool:
            try:
                return all(tests[op](v, b) for op, b in bounds.items() if op in tests)
            except TypeError:
                return False

        return self._constant(self._exact(field, accept), bounds.get("boost", 1.0))

    def q_exists(self, body: dict[str, Any]) -> Scored:
        return self._constant(self._exact(str(body.get("field")), lambda v: True))

    def q_bool(self, body: dict[str, Any]) -> Scored:
        _allowed("bool", body, {"must", "filter", "should", "must_not", "minimum_should_match", "boost"})

        def clauses(key: str) -> list[Any]:
            value = body.get(key) or []
            return value if isinstance(value, list) else [value]

        mask, scores = np.ones(self.n, dtype=bool), np.zeros(self.n)
        for clause in clauses("must"):
            m, s = self.run(clause)
            mask, scores = mask & m, scores + s
        for clause in clauses("filter"):
            mask &= self.run(clause)[0]
        for clause in clauses("must_not"):
            mask &= ~self.run(clause)[0]
        should = clauses("should")
        if should:
            default = 0 if clauses("must") or clauses("filter") else 1
            needed = int(body.get("minimum_should_match", default))
            matched = np.zeros(self.n, dtype=int)
            for clause in should:
                m, s = self.run(clause)
                matched, scores = matched + m, scores + np.where(m, s, 0.0)
            mask &= matched >= needed
        return mask, np.where(mask, scores * float(body.get("boost", 1.0)), 0.0)

    def q_knn(self, body: dict[str, Any]) -> Scored:
        field, params = one_clause(body, "knn")
        _allowed("knn", params, {"vector", "k", "filter", "boost", "method_parameters", "rescore", "expand_nested_docs"})
        found = self.index.field(field)
        if found is None or found[1].get("type") != "knn_vector":
            raise Failure(400, "query_shard_exception", f"Field '{field}' is not knn_vector type.")
        path, mapping = found
        vector = np.asarray(params.get("vector") or [], dtype=np.float64)
        if vector.shape != (int(mapping["dimension"]),):
            raise Failure(400, "query_shard_exception", f"Query vector has invalid dimension: {vector.size}. "
                          f"Dimension should be: {mapping['dimension']}")
        if "k" not in params:
            raise Failure(400, "parsing_exception", "[knn] requires k, max_distance or min_score")
        matrix, present, norms = self.index.vectors(field, path)
        allowed = present & (self.run(params["filter"])[0] if params.get("filter") else True)
        scores = _knn_scores(matrix, norms, vector, mapping) * float(params.get("boost", 1.0))
        candidates = np.flatnonzero(allowed)
        best = candidates[np.lexsort((candidates, -scores[candidates]))][: int(params["k"])]
        mask = np.zeros(self.n, dtype=bool)
        mask[best] = True
        return mask, np.where(mask, scores, 0.0)


def _knn_scores(matrix: np.ndarray, norms: np.ndarray, vector: np.ndarray, mapping: dict[str, Any]) -> np.ndarray:
    method = mapping.get("method", {})
    space = mapping.get("space_type") or method.get("space_type") or "l2"
    if space == "cosinesimil":
        norms = norms * (np.linalg.norm(vector) or 1.0)
        distance = 1 - (matrix @ vector) / np.where(norms == 0, 1.0, norms)
        return (2 - distance) / 2 if method.get("engine", "lucene") == "lucene" else 2 - distance
    if space == "innerproduct":
        distance = -(matrix @ vector)
        return np.where(distance >= 0, 1 / (1 + np.maximum(distance, 0)), 1 - distance)
    if space == "l1":
        distance = np.abs(matrix - vector).sum(axis=1)
    elif space == "linf":
        distance = np.abs(matrix - vector).max(axis=1)
    else:
        distance = ((matrix - vector) ** 2).sum(axis=1)
    return 1 / (1 + distance)  # type: ignore[no-any-return]


def filter_source(source: dict[str, Any], spec: Any) -> dict[str, Any] | None:
    if spec is True or spec is None:
        return source
    if spec is False:
        return None
    if isinstance(spec, (str, list)):
        spec = {"includes": [spec] if isinstance(spec, str) else spec}
    includes, excludes = spec.get("includes") or [], spec.get("excludes") or []

    def matches(key: str, patterns: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(key, p) or p.startswith(f"{key}.") for p in patterns)

    return {k: v for k, v in source.items()
            if (not includes or matches(k, includes)) and not any(fnmatch.fnmatchcase(k, p) for p in excludes)}
