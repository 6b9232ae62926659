"""A small OpenSearch on 127.0.0.1: the REST endpoints evret-opensearch and its indexing helper use, over real HTTP,
in OpenSearch's wire format, with real indexing and real scoring, for the tests and the benchmark (no OpenSearch
server can be installed here).

- Indices: ``PUT /{index}`` (settings and mappings), ``HEAD``/``DELETE /{index}``, ``GET /{index}/_mapping``,
  ``GET /_cat/indices?format=json`` (and ``/_cat/plugins``: the k-NN plugin), ``POST [/{index}]/_bulk`` (NDJSON; unmapped fields are mapped dynamically as
  OpenSearch does, strings as text with a keyword sub-field, unless the mapping says ``"dynamic": false``), ``POST [/{index}]/_refresh``.
- Search: ``POST /{index}/_search`` and ``POST [/{index}]/_msearch`` (NDJSON header/body pairs, one answer per
  pair, a failed search answered in place) with ``size``, ``from``, ``_source`` filtering, ``track_total_hits``
  and the queries ``match``, ``multi_match`` (best_fields, most_fields), ``term``, ``terms``, ``range``,
  ``exists``, ``match_all``, ``bool`` and ``knn`` (exact: every vector is scored, then the filter's best ``k``).
- BM25 is Lucene's (``BM25Similarity``, k1=1.2, b=0.75): idf = ln(1 + (N - n + 0.5) / (n + 0.5)) with N the
  documents that have the field, tf part = freq / (freq + k1 * (1 - b + b * dl / avgdl)) with dl the length as
  Lucene stores it (``SmallFloat.intToByte4``, exact under 24 tokens). Text is analysed like the standard
  analyzer: words (letters and digits, joined across ``'`` and ``.`` inside a word), lowercased.
- k-NN scores are OpenSearch's per space (``l2``: 1 / (1 + squared distance); ``cosinesimil``: (2 - (1 - cos)) / 2
  for the Lucene engine, 2 - (1 - cos) for faiss/nmslib; ``innerproduct``; ``l1``; ``linf``).
- Errors have OpenSearch's shape (``{"error": {"root_cause": [...], "type", "reason"}, "status"}``): a missing
  index, an unknown query or parameter, a query on a field that is no ``knn_vector``, a wrong dimension.
- ``auth=(user, password)`` answers 401 without them; ``fail={"_msearch": 500}`` answers that endpoint with that
  status; ``requests`` counts requests per (method, endpoint).

Run it as a script (``python opensearch_stub.py``) to serve in its own process: it prints its URL and stops when
its standard input closes (the benchmark does this).
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import json
import math
import re
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

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


def _one(clause: Any, kind: str) -> tuple[str, Any]:
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
        kind, body = _one(query, "query")
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
        field, params = _one(body, "match")
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
        field, value = _one(body, kind)
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
        field, values = _one({k: v for k, v in body.items() if k != "boost"}, "terms")
        if not isinstance(values, list):
            raise Failure(400, "parsing_exception", f"[terms] query does not support [{field}]")
        return self._constant(self._exact(field, lambda v: v in values), boost)

    def q_range(self, body: dict[str, Any]) -> Scored:
        field, bounds = _one(body, "range")
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
        field, params = _one(body, "knn")
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


def _filter_source(source: dict[str, Any], spec: Any) -> dict[str, Any] | None:
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


class OpenSearchStub:
    """The server (see the module docs): ``with OpenSearchStub() as stub: OpenSearch(hosts=[stub.url])``."""

    def __init__(self, auth: tuple[str, str] | None = None, fail: dict[str, int] | None = None) -> None:
        self.indices: dict[str, Index] = {}
        self.requests: Counter[tuple[str, str]] = Counter()
        self.auth, self.fail = auth, dict(fail or {})
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, body = stub.handle(self.command, self.path, raw, self.headers.get("Authorization"))
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OpenSearchStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, endpoint: str) -> int:
        """Requests made to ``endpoint`` (``_msearch``, ``_search``, ``_mapping``, ...), any method."""
        return sum(n for (_, e), n in self.requests.items() if e == endpoint)

    def handle(self, method: str, target: str, raw: bytes, authorization: str | None) -> tuple[int, Any]:
        url = urlsplit(target)
        parts = [p for p in url.path.split("/") if p]
        endpoint = next((p for p in parts if p.startswith("_")), "/" if not parts else "index")
        self.requests[(method, endpoint)] += 1
        try:
            if self.auth is not None:
                expected = "Basic " + base64.b64encode(":".join(self.auth).encode()).decode()
                if authorization != expected:
                    raise Failure(401, "security_exception", "Unauthorized")
            if endpoint in self.fail:
                raise Failure(self.fail[endpoint], "stub_failure", f"the stub was told to fail {endpoint}")
            return self.route(method, parts, endpoint, raw, {k: v[0] for k, v in parse_qs(url.query).items()})
        except Failure as failure:
            return failure.status, failure.body

    def _index(self, name: str) -> Index:
        if name not in self.indices:
            raise Failure(404, "index_not_found_exception", f"no such index [{name}]", name)
        return self.indices[name]

    def route(self, method: str, parts: list[str], endpoint: str, raw: bytes,
              query: dict[str, str]) -> tuple[int, Any]:
        name = parts[0] if parts and not parts[0].startswith("_") else None
        if endpoint == "/":
            return 200, {"name": "stub", "cluster_name": "evret-stub", "version": {
                "distribution": "opensearch", "number": "2.19.0"}, "tagline": "The OpenSearch Project"}
        if endpoint == "index" and name is not None:
            return self.index_admin(method, name, raw)
        if endpoint == "_mapping" and name is not None:
            index = self._index(name)
            return 200, {name: {"mappings": {"properties": index.properties,
                                             **({} if index.dynamic else {"dynamic": "false"})}}}
        if endpoint == "_cat" and parts[1:2] == ["plugins"]:
            return 200, [{"name": "stub", "component": "opensearch-knn", "version": "2.19.0"}]
        if endpoint == "_cat":
            rows = [{"health": "green", "status": "open", "index": n, "docs.count": str(len(i.ids))}
                    for n, i in sorted(self.indices.items())]
            columns = query.get("h", "").split(",") if query.get("h") else None
            return 200, [{c: r[c] for c in columns if c in r} if columns else r for r in rows]
        if endpoint == "_refresh":
            return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
        if endpoint == "_bulk":
            return 200, self.bulk(name, raw)
        if endpoint == "_search" and name is not None:
            return 200, self.search(self._index(name), json.loads(raw or b"{}"))
        if endpoint == "_msearch":
            return 200, self.msearch(name, raw)
        raise Failure(400, "illegal_argument_exception", f"no handler for {method} /{'/'.join(parts)}")

    def index_admin(self, method: str, name: str, raw: bytes) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if name in self.indices else 404), None
        if method == "PUT":
            if name in self.indices:
                raise Failure(400, "resource_already_exists_exception", f"index [{name}] already exists", name)
            with self.lock:
                self.indices[name] = Index(name, json.loads(raw or b"{}"))
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        if method == "DELETE":
            self._index(name)
            with self.lock:
                del self.indices[name]
            return 200, {"acknowledged": True}
        index = self._index(name)
        return 200, {name: {"mappings": {"properties": index.properties}, "settings": index.settings}}

    def bulk(self, default: str | None, raw: bytes) -> dict[str, Any]:
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        items, errors, started = [], False, time.perf_counter()
        with self.lock:
            for action, source in zip(lines[::2], lines[1::2], strict=True):
                kind, meta = _one(action, "bulk")
                name = meta.get("_index", default)
                doc_id = str(meta.get("_id") or uuid.uuid4().hex)
                index = self.indices.setdefault(name, Index(name, {}))
                try:
                    result = index.put(doc_id, source)
                    items.append({kind: {"_index": name, "_id": doc_id, "result": result, "status": 201}})
                except Failure as failure:
                    errors = True
                    items.append({kind: {"_index": name, "_id": doc_id, "status": failure.status,
                                         "error": failure.body["error"]}})
        return {"took": int((time.perf_counter() - started) * 1000), "errors": errors, "items": items}

    def search(self, index: Index, body: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        for key in body:
            if key not in ("query", "size", "from", "_source", "track_total_hits"):
                raise Failure(400, "parsing_exception", f"Unknown key for a START_OBJECT in [{key}].")
        with self.lock:  # statistics are built once per change, under the lock
            mask, scores = Searcher(index).run(body.get("query", {"match_all": {}}))
        matching = np.flatnonzero(mask)
        order = matching[np.lexsort((matching, -scores[matching]))]
        start, size = int(body.get("from", 0)), int(body.get("size", 10))
        hits = []
        for doc in order[start:start + size]:
            hit: dict[str, Any] = {"_index": index.name, "_id": index.ids[doc], "_score": float(scores[doc])}
            source = _filter_source(index.sources[doc], body.get("_source", True))
            if source is not None:
                hit["_source"] = source
            hits.append(hit)
        answer: dict[str, Any] = {"max_score": float(scores[order[0]]) if len(order) else None, "hits": hits}
        if body.get("track_total_hits", True) is not False:
            answer = {"total": {"value": len(order), "relation": "eq"}, **answer}
        return {"took": int((time.perf_counter() - started) * 1000), "timed_out": False,
                "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}, "hits": answer}

    def msearch(self, default: str | None, raw: bytes) -> dict[str, Any]:
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        if len(lines) % 2:
            raise Failure(400, "illegal_argument_exception", "The msearch request must be terminated by a newline")
        started, responses = time.perf_counter(), []
        for header, body in zip(lines[::2], lines[1::2], strict=True):
            try:
                name = header.get("index", default)
                responses.append({**self.search(self._index(str(name)), body), "status": 200})
            except Failure as failure:
                responses.append(failure.body)
        return {"took": int((time.perf_counter() - started) * 1000), "responses": responses}


if __name__ == "__main__":  # serve in this process until standard input closes
    import sys

    with OpenSearchStub() as server:
        print(server.url, flush=True)
        sys.stdin.read()
