"""Search an existing Milvus collection as an Evret retriever; a helper indexes corpus files for demos and tests."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import (
    EvretError,
    RankedColumns,
    RetrievalResult,
    Retriever,
    batched,
    corpus_batches,
    resolve_embedder,
)

# metrics where a smaller value is closer: the score is the negated distance
_DISTANCES = {"L2", "HAMMING", "JACCARD"}
_VECTOR_TYPES = {"FLOAT_VECTOR", "FLOAT16_VECTOR", "BFLOAT16_VECTOR", "BINARY_VECTOR", "SPARSE_FLOAT_VECTOR",
                 "INT8_VECTOR"}
# the words of Milvus's boolean expressions that are not field names (functions are told by the "(" after them)
_KEYWORDS = {"and", "or", "not", "in", "like", "exists", "is", "null", "true", "false"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_NAME = re.compile(r"(?<![\w.$])[A-Za-z_]\w*(?!\w|\s*\()")


def filter_names(expression: str) -> list[str]:
    """The field names a Milvus boolean expression uses (outside its string literals), in order, once each."""
    text = _STRING.sub('""', expression)
    return list(dict.fromkeys(n for n in _NAME.findall(text) if n.lower() not in _KEYWORDS))


def _client(client: Any, uri: str | None, token: str | None) -> Any:
    if client is not None:
        return client
    if not uri:
        raise EvretError("milvus retriever: give the option 'uri' (a Milvus Lite file such as ./milvus.db, or a "
                         "server such as http://localhost:19530) or 'client' (a MilvusClient)")
    from pymilvus import MilvusClient

    try:
        return MilvusClient(uri=str(uri), token=token or "")
    except Exception as exc:  # pymilvus raises its own and grpc's errors for a bad uri
        raise EvretError(f"milvus retriever: option 'uri': cannot connect to {uri!r}: {exc}") from None


def _type_name(field: dict[str, Any]) -> str:
    kind = field.get("type")
    return str(getattr(kind, "name", kind))


class MilvusRetriever(Retriever):
    """Queries an existing Milvus collection (a Milvus Lite ``.db`` file or a server); it never writes to it.

    The query is embedded with ``embedding`` (a function ``list[str] -> vectors``, a LangChain ``Embeddings``, or a
    sentence-transformers model name). The text is the field ``text_field``; the id is the field ``id_field``
    (default: the primary key); the other scalar fields (dynamic fields included) become metadata, with Milvus's
    ``distance``. ``filter`` (a Milvus boolean expression such as ``topic == "hive"``) and ``search_params`` are
    passed to every search; ``vector_field`` picks the vector field when the collection has several. The score is
    Milvus's value for similarity metrics (COSINE, IP) and its negation for distances (L2, HAMMING, JACCARD).
    A client this retriever opened from ``uri`` is closed by :meth:`close`; for a Milvus Lite file, pymilvus keeps
    the file's in-process server (and its lock on the file) until the process exits.
    """

    name = "milvus"

    def __init__(
        self,
        collection: str,
        embedding: Any = None,
        client: Any = None,
        uri: str | None = None,
        token: str | None = None,
        text_field: str = "text",
        id_field: str | None = None,
        vector_field: str | None = None,
        filter: str | None = None,
        search_params: dict[str, Any] | None = None,
        batch_size: int = 64,
    ) -> None:
        self.embed = resolve_embedder(embedding)
        self.embedding_label = embedding if isinstance(embedding, str) else type(embedding).__name__
        self._owns_client = client is None
        self.client = _client(client, uri, token)
        self.collection = collection
        self.text_field = text_field
        self.filter = filter or ""
        self.search_params = dict(search_params or {})
        self.batch_size = max(1, int(batch_size))
        try:
            self._check_collection(id_field, vector_field)
            self._check_filter()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the client this retriever opened from ``uri`` (a client you passed in stays open)."""
        if getattr(self, "_owns_client", False) and getattr(self, "client", None) is not None:
            self.client.close()
            self.client = None

    def __del__(self) -> None:
        # the CLI never calls close(): closing here releases the connection this retriever opened
        try:
            self.close()
        except Exception:  # noqa: S110 - interpreter shutdown may have torn pymilvus down already
            pass

    def __enter__(self) -> MilvusRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_collection(self, id_field: str | None, vector_field: str | None) -> None:
        if not self.client.has_collection(self.collection):
            existing = sorted(self.client.list_collections())
            raise EvretError(f"milvus retriever: option 'collection': no collection {self.collection!r} "
                             f"(existing: {', '.join(existing) or 'none'}); index it first, e.g. with "
                             f"evret_milvus.index_corpus")
        info = self.client.describe_collection(self.collection)
        fields = {f["name"]: f for f in info["fields"]}
        dynamic = bool(info.get("enable_dynamic_field"))
        vectors = [name for name, f in fields.items() if _type_name(f) in _VECTOR_TYPES]
        if vector_field is None:
            if len(vectors) != 1:
                raise EvretError(f"milvus retriever: collection {self.collection!r} has the vector fields "
                                 f"{vectors}; choose one with the option 'vector_field'")
            vector_field = vectors[0]
        elif vector_field not in vectors:
            raise EvretError(f"milvus retriever: option 'vector_field': {vector_field!r} is not a vector field of "
                             f"{self.collection!r} (its vector fields: {vectors})")
        self.vector_field = vector_field
        self.fields = sorted(fields)
        primary = next(name for name, f in fields.items() if f.get("is_primary"))
        self.id_field = id_field or primary
        for option, name in (("text_field", self.text_field), ("id_field", self.id_field)):
            if name not in fields and not dynamic:
                raise EvretError(f"milvus retriever: option {option!r}: collection {self.collection!r} has no field "
                                 f"{name!r} (its fields: {sorted(fields)})")
        self.primary_field = primary
        self.output_fields = [name for name in fields if name not in vectors] + (["$meta"] if dynamic else [])
        self.metric = self._metric()
        # a collection opened from a file or server starts released: searching needs it loaded (no data changes)
        state = self.client.get_load_state(self.collection).get("state")
        if getattr(state, "name", str(state)) != "Loaded":
            self.client.load_collection(self.collection)

    def _metric(self) -> str:
        for index in self.client.list_indexes(self.collection, field_name=self.vector_field):
            metric = self.client.describe_index(self.collection, index_name=index).get("metric_type")
            if metric:
                return str(metric).upper()
        return "COSINE"

    def _check_filter(self) -> None:
        """Run the filter once (one row) so that a bad expression fails here, before any query is embedded; then
        refuse a filter naming a field that no entity has (dynamic fields make Milvus accept any name: every
        search would quietly return nothing), asked with ``exists NAME``, and a filter that matches no entity."""
        if not self.filter:
            return
        from pymilvus import MilvusException

        where = f"milvus retriever: option 'filter' {self.filter!r}"
        try:
            found = self.client.query(self.collection, filter=self.filter, limit=1,
                                      output_fields=[self.primary_field])
        except MilvusException as exc:
            raise EvretError(f"{where} is not a valid Milvus expression for {self.collection!r}: "
                             f"{exc.message}") from None
        for name in filter_names(self.filter):
            if name not in self.fields and not self._has_field(name):
                raise EvretError(f"{where} names the field {name!r}, which no entity of collection "
                                 f"{self.collection!r} has (its schema fields: {', '.join(self.fields)}; dynamic "
                                 f"fields are those its entities were indexed with)")
        if not found:
            entities = int(self.client.get_collection_stats(self.collection).get("row_count") or 0)
            if entities:
                raise EvretError(f"{where} matches no entity of collection {self.collection!r} ({entities} "
                                 f"entities): every query would retrieve nothing")

    def _has_field(self, name: str) -> bool:
        """Whether some entity has the (dynamic) field ``name``; True when Milvus cannot tell (no ``exists``)."""
        from pymilvus import MilvusException

        try:
            return bool(self.client.query(self.collection, filter=f"exists {name}", limit=1,
                                          output_fields=[self.primary_field]))
        except MilvusException:
            return True

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _responses(self, queries: Sequence[str], k: int, fields: list[str]) -> Iterator[tuple[str, Any]]:
        """(query, hits) per query, from one search request per chunk of queries, asking for ``fields``."""
        for chunk in batched(queries, self.batch_size):
            vectors = self.embed(chunk)
            responses = self.client.search(self.collection, data=vectors, limit=k, filter=self.filter,
                                           output_fields=fields, search_params=self.search_params,
                                           anns_field=self.vector_field)
            yield from zip(chunk, responses, strict=True)

    def _score(self, distance: float) -> float:
        return -distance if self.metric in _DISTANCES else distance

    def _no_text(self, hit: Any, query: str, rank: int) -> EvretError:
        entity = hit["entity"]
        return EvretError(f"milvus retriever: entity {entity.get(self.primary_field, hit.get(self.primary_field))!r} "
                          f"(rank {rank} for query {query[:60]!r}) has no field {self.text_field!r} (option "
                          f"'text_field'); its fields are {sorted(entity) or 'none'}")

    def _fields(self, hit: Any, query: str, rank: int) -> tuple[str, str, dict[str, Any]]:
        """(id, text, other fields) of one hit."""
        entity = dict(hit["entity"])
        if self.text_field not in entity:
            raise self._no_text(hit, query, rank)
        key = entity.get(self.primary_field, hit.get(self.primary_field))
        text = entity.pop(self.text_field)
        doc_id = entity.pop(self.id_field) if self.id_field in entity else key
        return str(doc_id), str(text), entity

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Columns per query (ids, scores, texts), no object per result; only the id and text fields are fetched
        (the primary key comes with every hit)."""
        fields = [name for name in dict.fromkeys((self.id_field, self.text_field)) if name != self.primary_field]
        primary, id_field, text_field = self.primary_field, self.id_field, self.text_field
        out: list[RankedColumns] = []
        for query, hits in self._responses(queries, k, fields):
            ids, texts = [], []
            for rank, hit in enumerate(hits, 1):
                entity = hit["entity"]
                if text_field not in entity:
                    raise self._no_text(hit, query, rank)
                texts.append(str(entity[text_field]))
                ids.append(str(entity[id_field] if id_field in entity else hit[primary]))
            scores = np.fromiter((hit["distance"] for hit in hits), np.float64, len(hits))
            out.append(RankedColumns(ids, -scores if self.metric in _DISTANCES else scores, texts))
        return out

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        out = []
        for query, hits in self._responses(queries, k, self.output_fields):
            results = []
            for rank, hit in enumerate(hits, 1):
                doc_id, text, metadata = self._fields(hit, query, rank)
                distance = float(hit["distance"])
                results.append(RetrievalResult(doc_id=doc_id, score=self._score(distance),
                                               metadata={**metadata, "text": text, "distance": distance}))
            out.append(results)
        return out

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "collection": self.collection, "embedding": str(self.embedding_label),
                "text_field": self.text_field, "id_field": self.id_field, "vector_field": self.vector_field,
                "metric": self.metric, "filter": self.filter or None}


def index_corpus(
    client: Any,
    collection: str,
    corpus: str | Path | Iterable[dict[str, Any]],
    embedding: Any,
    text_field: str = "text",
    id_field: str = "doc_id",
    metric: str = "COSINE",
    batch_size: int = 256,
    recreate: bool = False,
) -> int:
    """Create ``collection`` and index a corpus into it (a JSONL file, or records ``{doc_id, text, metadata}``).

    For demos and tests: evaluation never indexes. The document id is the primary key ``id_field`` (a string),
    the text is ``text_field``, the vector is ``vector``; metadata goes into dynamic fields. Returns the number of
    entities written.
    """
    from pymilvus import DataType

    embed = resolve_embedder(embedding)
    if client.has_collection(collection):
        if not recreate:
            raise EvretError(f"milvus collection {collection!r} exists already; pass recreate=True to replace it")
        client.drop_collection(collection)
    created = False
    total = 0
    for batch in corpus_batches(corpus, batch_size):
        vectors = embed([r["text"] for r in batch])
        if not created:
            schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
            schema.add_field(id_field, DataType.VARCHAR, is_primary=True, max_length=65535)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=len(vectors[0]))
            schema.add_field(text_field, DataType.VARCHAR, max_length=65535)
            index = client.prepare_index_params()
            index.add_index(field_name="vector", metric_type=metric.upper(), index_type="AUTOINDEX")
            client.create_collection(collection, schema=schema, index_params=index)
            created = True
        rows = [{**r.get("metadata", {}), id_field: r["doc_id"], text_field: r["text"], "vector": v}
                for r, v in zip(batch, vectors, strict=True)]
        client.insert(collection, rows)
        total += len(rows)
    if not created:
        raise EvretError(f"index_corpus: the corpus for collection {collection!r} is empty")
    return total
