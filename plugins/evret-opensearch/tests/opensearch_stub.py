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
import json
import sys
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

if "opensearch_engine" not in sys.modules:  # run as a script, or imported with this folder on sys.path
    sys.path.insert(0, str(Path(__file__).parent))
from opensearch_engine import Failure, Index, Searcher, filter_source, one_clause  # noqa: E402


class OpenSearchStub:
    """The server (see the module docs): ``with OpenSearchStub() as stub: OpenSearch(hosts=[stub.url])``."""

    def __init__(self, auth: tuple[str, str] | None = None, fail: dict[str, int] | None = None,
                 port: int = 0) -> None:
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

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
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
                kind, meta = one_clause(action, "bulk")
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
            source = filter_source(index.sources[doc], body.get("_source", True))
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
