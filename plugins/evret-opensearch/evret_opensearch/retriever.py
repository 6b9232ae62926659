"""Search an existing OpenSearch index as an Evret retriever: BM25 (``match`` / ``multi_match``) or k-NN (``knn``).

Queries go to OpenSearch in batches through ``_msearch``: one HTTP request per ``batch_size`` queries. The index,
its fields and the filter are checked once, when the retriever is built, so a wrong name is an ``EvretError``
naming the option before any query is embedded or sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from evret_core.sdk import (
    EvretError,
    QueryVectors,
    RankedColumns,
    RetrievalResult,
    Retriever,
    batched,
    redact_text,
    redact_url,
)

VECTOR_TYPES = ("knn_vector", "dense_vector")
"""Field types that hold vectors: OpenSearch's, and Elasticsearch's (never searched, only left out of metadata)."""

_OWNER = "opensearch retriever"


def error_reason(exc: BaseException) -> str:
    """The server's own words for a failed request (``type: reason`` of its root cause), else the exception."""
    info = getattr(exc, "info", None)
    error = info.get("error") if isinstance(info, dict) else None
    if isinstance(error, dict):
        cause = (error.get("root_cause") or [error])[0]
        reason = f"{cause.get('type', 'error')}: {cause.get('reason', '')}".strip()
        caused_by = error.get("caused_by")
        if isinstance(caused_by, dict) and caused_by.get("reason") and str(caused_by["reason"]) not in reason:
            reason += f" ({caused_by['reason']})"
        return reason
    if isinstance(error, str):
        return error
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):  # an answer without a body (a HEAD request)
        return f"HTTP {status}"
    return str(exc)


def flatten_mapping(properties: Mapping[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """``{dotted field name: its mapping}`` of an index's ``properties``, objects and multi-fields included."""
    out: dict[str, dict[str, Any]] = {}
    for name, field in properties.items():
        path = f"{prefix}{name}"
        out[path] = field
        out.update(flatten_mapping(field.get("properties", {}), f"{path}."))
        out.update(flatten_mapping(field.get("fields", {}), f"{path}."))
    return out


def _source_value(source: Mapping[str, Any], path: str) -> Any:
    """A field of a hit's ``_source`` by its dotted name (``author.name``), or a KeyError."""
    if path in source:
        return source[path]
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def _names(option: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise EvretError(f"{_OWNER}: option {option!r}: give field names (a list, or a comma-separated string)")


def _clause(option: str, value: Any) -> Any:
    """A filter given as a query clause (a JSON object) or a list of them; anything else names the option."""
    if value is None or isinstance(value, dict) or (isinstance(value, list) and all(isinstance(v, dict)
                                                                                    for v in value)):
        return value or None
    raise EvretError(f"{_OWNER}: option {option!r}: give an OpenSearch query clause as a JSON object (or a list of "
                     f"them), e.g. {{\"term\": {{\"topic\": \"hive\"}}}}; got {str(value)[:80]!r}")


def _params(option: str, value: Any) -> dict[str, Any]:
    if value is None or isinstance(value, dict):
        return dict(value or {})
    raise EvretError(f"{_OWNER}: option {option!r}: give parameters as a JSON object, e.g. "
                     f"{{\"operator\": \"and\"}}; got {str(value)[:80]!r}")


class OpenSearchRetriever(Retriever):
    """Queries an existing OpenSearch index with BM25 or k-NN; it never writes to it.

    ``mode="bm25"`` (the default without an embedding) sends a ``match`` query on ``fields`` (default the text
    field; several fields make a ``multi_match``, ``"title^2"`` boosts one), ``match_params`` merged into it.
    ``mode="knn"`` (the default with ``embedding`` or ``query_embeddings``) sends a ``knn`` query on
    ``vector_field`` (found by itself when the index has one vector field) with the query's vector, ``knn_params``
    merged into it. ``filter`` (a query clause, or a list of them) restricts both: a bool filter around the match,
    OpenSearch's efficient filter inside the ``knn`` clause. The id is the hit's ``_id`` or the source field
    ``id_field``; the text is the source field ``text_field`` (``metadata["text"]``); the other source fields but
    vectors are metadata; the score is OpenSearch's ``_score``. The client is ``client`` (an ``OpenSearch``) or
    one made from ``url`` (credentials in it or as ``username``/``password``), ``verify_certs``, ``client_options``.
    """

    name = "opensearch"

    def __init__(
        self,
        index: str,
        url: str | None = None,
        client: Any = None,
        mode: str | None = None,
        text_field: str = "text",
        id_field: str | None = None,
        fields: Sequence[str] | str | None = None,
        vector_field: str | None = None,
        embedding: Any = None,
        query_embeddings: Mapping[str, Sequence[float]] | None = None,
        filter: dict[str, Any] | list[dict[str, Any]] | None = None,
        match_params: dict[str, Any] | None = None,
        knn_params: dict[str, Any] | None = None,
        username: str | None = None,
        password: str | None = None,
        verify_certs: bool = True,
        client_options: dict[str, Any] | None = None,
        batch_size: int = 64,
    ) -> None:
        if mode is None:
            mode = "knn" if embedding is not None or query_embeddings is not None else "bm25"
        if mode not in ("bm25", "knn"):
            raise EvretError(f"{_OWNER}: option 'mode': {mode!r} is not 'bm25' or 'knn'")
        if mode == "knn" and (embedding is None) == (query_embeddings is None):
            raise EvretError(f"{_OWNER}: mode 'knn' needs exactly one of the options 'embedding' (how to embed "
                             f"queries) and 'query_embeddings' (query text -> vector)")
        if mode == "bm25" and (embedding is not None or query_embeddings is not None or vector_field):
            raise EvretError(f"{_OWNER}: options 'embedding', 'query_embeddings' and 'vector_field' go with "
                             f"mode 'knn'; mode 'bm25' searches text")
        self.mode, self.index, self.text_field, self.id_field = mode, index, text_field, id_field
        self.filter = _clause("filter", filter)
        self.match_params = _params("match_params", match_params)
        self.knn_params = _params("knn_params", knn_params)
        self.batch_size = max(1, int(batch_size))
        self._secrets = [password] if password else []
        self.url = url
        self._owns_client = client is None
        self.client = client if client is not None else self._connect(url, username, password, verify_certs,
                                                                     client_options)
        try:
            self._check_index(fields, vector_field)
            self._check_filter()
            # the model (when one is named) loads only once the index, fields and filter are known to be right
            self._vectors = QueryVectors(embedding, query_embeddings, _OWNER) if mode == "knn" else None
        except BaseException:
            self.close()
            raise

    # -- connection -------------------------------------------------------------------------------------------

    def _connect(self, url: str | None, username: str | None, password: str | None, verify_certs: bool,
                 client_options: dict[str, Any] | None) -> Any:
        if not url:
            raise EvretError(f"{_OWNER}: give the option 'url' (e.g. https://localhost:9200) or 'client' "
                             f"(an opensearchpy.OpenSearch)")
        from opensearchpy import OpenSearch

        options: dict[str, Any] = {"verify_certs": bool(verify_certs), **(client_options or {})}
        if username is not None or password is not None:
            options["http_auth"] = (username or "", password or "")
        if not verify_certs:
            options.setdefault("ssl_show_warn", False)
        try:
            return OpenSearch(hosts=[url], **options)
        except Exception as exc:  # opensearch-py raises ImproperlyConfigured, ValueError, TypeError here
            raise self._error("option 'url' (or 'client_options')", exc) from None

    def _where(self) -> str:
        return redact_url(self.url) if self.url else "the client's server"

    def _error(self, what: str, exc: BaseException) -> EvretError:
        """An error naming the option ``what`` and the server (credentials redacted), with the server's reason."""
        message = f"{_OWNER}: {what}: {error_reason(exc)} [index {self.index!r} at {self._where()}]"
        return EvretError(redact_text(message, self._secrets))

    def _call(self, what: str, request: Any, **kwargs: Any) -> Any:
        """One request; an error of the transport (unreachable, refused credentials, a 5xx) names the server and
        ``what`` was asked, one of the server's 4xx names ``what``."""
        from opensearchpy.exceptions import (
            AuthenticationException,
            AuthorizationException,
            ConnectionError,
            TransportError,
        )

        try:
            return request(**kwargs)
        except (AuthenticationException, AuthorizationException) as exc:
            raise self._error("options 'username'/'password' (or the credentials in 'url'): the server refused "
                              "them", exc) from None
        except ConnectionError as exc:
            raise self._error(f"option 'url': cannot reach {self._where()}", exc) from None
        except TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else 0
            raise self._error(what if 400 <= status < 500 else f"the server failed ({exc.status_code}) on {what}",
                              exc) from None

    def close(self) -> None:
        """Close the client this retriever opened from ``url`` (a client you passed in stays open)."""
        if getattr(self, "_owns_client", False) and getattr(self, "client", None) is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> OpenSearchRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checks, once ---------------------------------------------------------------------------------------

    def _check_index(self, fields: Sequence[str] | str | None, vector_field: str | None) -> None:
        if not self._call("option 'index'", self.client.indices.exists, index=self.index):
            listed = self._call("listing indices", self.client.cat.indices, format="json", h="index")
            existing = sorted(i["index"] for i in listed if not str(i.get("index", "")).startswith("."))
            raise EvretError(f"{_OWNER}: option 'index': no index {self.index!r} at {self._where()} (existing: "
                             f"{', '.join(existing) or 'none'}); index it first, e.g. with "
                             f"evret_opensearch.index_corpus")
        answer = self._call("option 'index'", self.client.indices.get_mapping, index=self.index)
        mapping: dict[str, dict[str, Any]] = {}
        for body in answer.values():  # an alias or a pattern may name several indices
            mapping.update(flatten_mapping(body.get("mappings", {}).get("properties", {})))
        self.mapping = mapping
        self.vector_fields = sorted(n for n, f in mapping.items() if f.get("type") in VECTOR_TYPES)
        wanted = [("text_field", self.text_field)] + ([("id_field", self.id_field)] if self.id_field else [])
        if self.mode == "bm25":
            self.fields = _names("fields", fields) if fields is not None else [self.text_field]
            wanted += [("fields", f.split("^")[0]) for f in self.fields if "*" not in f]
        else:
            self.fields = []
            if vector_field is None:
                if len(self.vector_fields) != 1:
                    raise EvretError(f"{_OWNER}: option 'vector_field': index {self.index!r} has "
                                     f"{len(self.vector_fields)} knn_vector fields "
                                     f"({', '.join(self.vector_fields) or 'none'}); name one")
                vector_field = self.vector_fields[0]
            wanted.append(("vector_field", vector_field))
        for option, name in wanted:
            if name not in mapping and option in ("text_field", "id_field") and self._stored(name):
                continue  # kept in _source without being indexed (a mapping with "dynamic": false)
            if name not in mapping:
                raise EvretError(f"{_OWNER}: option {option!r}: index {self.index!r} has no field {name!r} "
                                 f"(its fields: {', '.join(sorted(mapping)) or 'none'})")
            kind = mapping[name].get("type", "object")
            if option == "vector_field" and kind != "knn_vector":
                raise EvretError(f"{_OWNER}: option 'vector_field': {name!r} of index {self.index!r} is a {kind} "
                                 f"field, not a knn_vector (vector fields: {', '.join(self.vector_fields) or 'none'})")
            if option == "fields" and kind in (*VECTOR_TYPES, "object", "nested"):
                raise EvretError(f"{_OWNER}: option 'fields': {name!r} of index {self.index!r} is a {kind} "
                                 f"field; BM25 searches text fields")
        self.vector_field = vector_field
        self.dimension = mapping[vector_field].get("dimension") if vector_field else None

    def _stored(self, name: str) -> bool:
        """Whether the first document's ``_source`` has the field ``name`` (an unmapped field may be stored)."""
        body = {"size": 1, "_source": [name], "query": {"match_all": {}}}
        hits = self._call("reading a document", self.client.search, index=self.index, body=body)["hits"]["hits"]
        try:
            return bool(hits) and _source_value(hits[0].get("_source") or {}, name) is not None
        except KeyError:
            return False

    def _check_filter(self) -> None:
        """Run the filter once (no hits asked) so that a bad clause fails here, before any query is embedded."""
        if self.filter is None:
            return
        body = {"size": 0, "query": {"bool": {"filter": self.filter}}}
        self._call("option 'filter' is not a valid query clause", self.client.search, index=self.index, body=body)

    # -- queries ----------------------------------------------------------------------------------------------

    def _query(self, query: str, vector: list[float] | None, k: int) -> dict[str, Any]:
        if vector is not None:
            knn: dict[str, Any] = {"vector": vector, "k": k, **self.knn_params}
            if self.filter is not None:
                knn["filter"] = self.filter if isinstance(self.filter, dict) else {"bool": {"filter": self.filter}}
            return {"knn": {self.vector_field: knn}}
        if len(self.fields) == 1 and "*" not in self.fields[0]:
            field, _, boost = self.fields[0].partition("^")
            match: dict[str, Any] = {"match": {field: {"query": query, **self.match_params,
                                                       **({"boost": float(boost)} if boost else {})}}}
        else:
            match = {"multi_match": {"query": query, "fields": self.fields, **self.match_params}}
        return {"bool": {"must": [match], "filter": self.filter}} if self.filter is not None else match

    def _hits(self, queries: Sequence[str], k: int, source: Any) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """(query, hits best first) per query, from one ``_msearch`` request per ``batch_size`` queries."""
        for chunk in batched(queries, self.batch_size):
            vectors: list[Any] = [None] * len(chunk)
            if self._vectors is not None:
                vectors = self._vectors(chunk)
                if self.dimension and vectors and len(vectors[0]) != int(self.dimension):
                    option = "query_embeddings" if self._vectors.embed is None else "embedding"
                    raise EvretError(f"{_OWNER}: option {option!r} gives vectors of {len(vectors[0])} dimensions; "
                                     f"{self.vector_field!r} of index {self.index!r} has {self.dimension}")
            body: list[dict[str, Any]] = []
            for query, vector in zip(chunk, vectors, strict=True):
                body += [{}, {"size": k, "query": self._query(query, vector, k), "_source": source,
                              "track_total_hits": False}]
            answer = self._call(f"the {self.mode} query (options {self._shaping()})", self.client.msearch,
                                index=self.index, body=body)
            for query, item in zip(chunk, answer["responses"], strict=True):
                if "error" in item:
                    raise EvretError(redact_text(
                        f"{_OWNER}: the {self.mode} query for {query[:60]!r} failed on index {self.index!r} "
                        f"(options {self._shaping()}): {error_reason(_Failed(item))}", self._secrets))
                yield query, item["hits"]["hits"]

    def _shaping(self) -> str:
        """The options that shape a query, for error messages."""
        names = ["fields", "match_params"] if self.mode == "bm25" else ["vector_field", "knn_params"]
        return ", ".join(repr(n) for n in [*names, "filter"])

    def _id_text(self, hit: dict[str, Any], query: str, rank: int) -> tuple[str, str]:
        source = hit.get("_source") or {}
        try:
            text = _source_value(source, self.text_field)
            doc_id = _source_value(source, self.id_field) if self.id_field else hit["_id"]
        except KeyError as missing:
            option = "text_field" if missing.args[0] == self.text_field else "id_field"
            raise EvretError(f"{_OWNER}: document {hit.get('_id')!r} (rank {rank} for query {query[:60]!r}) has no "
                             f"source field {missing.args[0]!r} (option {option!r}); its fields are "
                             f"{', '.join(sorted(source)) or 'none'}") from None
        if isinstance(text, list):  # a multi-valued text field: its values as OpenSearch analyses them, in order
            text = " ".join(map(str, text))
        return str(doc_id), str(text)

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _ids_texts(self, hits: list[dict[str, Any]], query: str) -> tuple[list[str], list[str]]:
        """The ids and texts of one query's hits, in one pass per column when the fields are top-level strings of
        every ``_source`` (the usual answer); else hit by hit through :meth:`_id_text` (dotted names, lists,
        numbers, and the error naming a hit without the field)."""
        text_field, id_field = self.text_field, self.id_field
        try:
            texts = [hit["_source"][text_field] for hit in hits]
            ids = [hit["_source"][id_field] for hit in hits] if id_field else [hit["_id"] for hit in hits]
        except (KeyError, TypeError):  # a field missing or nested, or a hit without _source
            pass
        else:
            if all(type(t) is str for t in texts) and all(type(i) is str for i in ids):
                return ids, texts
        pairs = [self._id_text(hit, query, rank) for rank, hit in enumerate(hits, 1)]
        return [doc_id for doc_id, _ in pairs], [text for _, text in pairs]

    def _ranked(self, hits: list[dict[str, Any]], query: str) -> RankedColumns:
        """One query's columns (ids, ``_score``, texts) from its hits."""
        ids, texts = self._ids_texts(hits, query)
        return RankedColumns(ids, np.asarray([hit["_score"] for hit in hits], dtype=np.float64), texts)

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Columns per query (ids, ``_score``, texts): only the id and text fields are fetched."""
        source = [self.text_field, *([self.id_field] if self.id_field else [])]
        return [self._ranked(hits, query) for query, hits in self._hits(queries, k, source)]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The columns of :meth:`batch_retrieve_columns` as results: every source field but vectors is metadata,
        the text last as ``metadata["text"]``."""
        source: Any = {"excludes": self.vector_fields} if self.vector_fields else True
        text_field, id_field = self.text_field, self.id_field

        def answers() -> Iterator[tuple[RankedColumns, list[dict[str, Any]]]]:  # run inside batch_to_results
            for query, hits in self._hits(queries, k, source):
                columns = self._ranked(hits, query)
                metadata = []
                for hit, text in zip(hits, columns.texts or (), strict=True):
                    # the hit's _source, decoded for this call alone, becomes the metadata in place (no copy)
                    meta = hit.get("_source") or {}
                    meta.pop(text_field, None)
                    if id_field:
                        meta.pop(id_field, None)
                    meta["text"] = text
                    metadata.append(meta)
                yield columns, metadata

        return RankedColumns.batch_to_results(answers())

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "index": self.index, "mode": self.mode, "url": self._where(),
                "fields": self.fields or None, "vector_field": self.vector_field,
                "embedding": str(self._vectors.label) if self._vectors is not None else None,
                "id_field": self.id_field or "_id", "text_field": self.text_field, "filter": self.filter,
                "match_params": self.match_params or None, "knn_params": self.knn_params or None}


class _Failed(Exception):
    """One failed search of an ``_msearch`` answer, shaped as a transport error for :func:`error_reason`."""

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__(item.get("status"), "search failed", item)
        self.info = item
