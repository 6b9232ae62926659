"""Search an existing LanceDB table as an Evret retriever; a helper indexes corpus files for demos and tests.

Queries are embedded by Evret with the user's embedder and sent to LanceDB as vectors, one multi-vector search per
batch of queries; a ``where`` clause (LanceDB's SQL filter) is passed to every search.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import (
    EvretError,
    QueryVectors,
    RankedColumns,
    RetrievalResult,
    Retriever,
    batched,
    corpus_batches,
    resolve_embedder,
)

# LanceDB's Rust log writes WARN lines on stderr ("No existing dataset at ..., it will be created") beside Evret's
# own output; it reads this variable once, when lancedb is first imported (a user's setting wins)
os.environ.setdefault("LANCEDB_LOG", "error")

# columns LanceDB adds to a search answer; never metadata
_ANSWER_COLUMNS = ("query_index", "_distance", "_rowid")


def _table_names(db: Any) -> list[str]:
    listed = db.list_tables()
    return sorted(getattr(listed, "tables", listed) or [])


def _vector_columns(schema: Any) -> list[str]:
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_fixed_size_list(f.type)]  # what LanceDB searches


class LanceDBRetriever(Retriever):
    """Queries an existing LanceDB table; it never writes to it.

    The table is opened from ``uri`` (a directory of an embedded database) or from ``db`` (a connection made with
    ``lancedb.connect``). Query vectors come from ``embedding`` (a function ``list[str] -> vectors``, a LangChain
    ``Embeddings`` or a sentence-transformers model name) or from ``query_embeddings`` (query text -> vector,
    computed elsewhere; what a command line can give without a model). The id is the column ``id_field``, the text the column
    ``text_field``; the other columns except the vector become metadata, plus ``distance``. The score is the
    negated distance, so that higher is better. ``where`` (a SQL clause, e.g. ``"topic = 'hive'"``), ``prefilter``
    and ``distance_type`` are passed to every search; ``vector_column`` picks the vector column when there are several.
    """

    name = "lancedb"

    def __init__(
        self,
        table: str,
        embedding: Any = None,
        query_embeddings: Mapping[str, Sequence[float]] | None = None,
        uri: str | Path | None = None,
        db: Any = None,
        id_field: str = "doc_id",
        text_field: str = "text",
        vector_column: str | None = None,
        where: str | None = None,
        prefilter: bool = True,
        distance_type: str | None = None,
        batch_size: int = 64,
    ) -> None:
        if (embedding is None) == (query_embeddings is None):
            raise EvretError("lancedb retriever: give exactly one of the options 'embedding' (how to embed queries) "
                             "and 'query_embeddings' (query text -> vector)")
        if (uri is None) == (db is None):
            raise EvretError("lancedb retriever: give exactly one of the options 'uri' (the database directory) "
                             "and 'db' (a lancedb connection)")
        if db is None:
            import lancedb

            if not Path(str(uri)).is_dir() and "://" not in str(uri):
                raise EvretError(f"lancedb retriever: option 'uri': no database directory {str(uri)!r}")
            db = lancedb.connect(str(uri))
        self.db = db
        existing = _table_names(db)
        if table not in existing:
            raise EvretError(f"lancedb retriever: option 'table': no table {table!r} (existing: "
                             f"{', '.join(existing) or 'none'}); index it first, e.g. with evret_lancedb.index_corpus")
        self.table = db.open_table(table)
        self.table_name = table
        import pyarrow as pa

        schema = self.table.schema
        columns = list(schema.names)
        vectors = _vector_columns(schema)
        for option, column in (("id_field", id_field), ("text_field", text_field)):
            if column not in columns:
                raise EvretError(f"lancedb retriever: option {option!r}: table {table!r} has no column {column!r} "
                                 f"(columns: {', '.join(columns)})")
        if vector_column is None:
            if len(vectors) != 1:
                raise EvretError(f"lancedb retriever: option 'vector_column': table {table!r} has "
                                 f"{len(vectors)} vector columns ({', '.join(vectors) or 'none'}); name one")
            vector_column = vectors[0]
        elif vector_column not in vectors:
            raise EvretError(f"lancedb retriever: option 'vector_column': table {table!r} has no vector column "
                             f"{vector_column!r} (vector columns: {', '.join(vectors) or 'none'})")
        self.id_field, self.text_field, self.vector_column = id_field, text_field, vector_column
        id_type = schema.field(id_field).type
        self.ids_are_strings = pa.types.is_string(id_type) or pa.types.is_large_string(id_type)
        self.metadata_columns = [c for c in columns if c not in (id_field, text_field, vector_column)]
        self.where, self.prefilter, self.distance_type = where, bool(prefilter), distance_type
        if where:
            try:  # a bad clause fails here, before any query is embedded
                self.table.search().where(where).limit(1).to_arrow()
            except (ValueError, RuntimeError) as exc:
                raise EvretError(f"lancedb retriever: option 'where' is invalid: {exc}") from None
        self._vectors = QueryVectors(embedding, query_embeddings, "lancedb retriever")
        self.batch_size = max(1, int(batch_size))

    def _search(self, vectors: list[list[float]], k: int, columns: list[str]) -> Any:
        query = self.table.search(vectors, vector_column_name=self.vector_column)
        if self.distance_type:
            query = query.distance_type(self.distance_type)
        if self.where:
            query = query.where(self.where, prefilter=self.prefilter)
        # _distance named: LanceDB logs a deprecation warning on every search that leaves it out (it will stop
        # adding it by itself), and the ranking is read from it
        query = query.select([*columns, "_distance"]).limit(k)
        try:
            return query.to_arrow()
        except (ValueError, RuntimeError) as exc:
            raise EvretError(f"lancedb retriever: search in table {self.table_name!r} failed (options 'where', "
                             f"'vector_column', 'distance_type'): {exc}") from None

    def _answers(self, queries: Sequence[str], k: int, columns: list[str],
                 python: bool) -> Iterator[tuple[np.ndarray, dict[str, Any]]]:
        """Per query, (distances, {column: values}) best first, from one multi-vector search per batch; the values
        are Python lists when ``python``, else numpy arrays (views into the batch's columns)."""
        for chunk in batched(queries, self.batch_size):
            answer = self._search(self._vectors(chunk), k, columns)
            n = answer.num_rows
            which = (answer.column("query_index").to_numpy() if "query_index" in answer.column_names
                     else np.zeros(n, dtype=np.int64))
            distances = answer.column("_distance").to_numpy().astype(np.float64)
            step, gap = np.diff(which), np.diff(distances)
            if not np.all((step > 0) | ((step == 0) & (gap >= 0))):  # LanceDB answers in order; made sure here
                order = np.lexsort((distances, which))
                answer, which, distances = answer.take(order), which[order], distances[order]
            bounds = np.searchsorted(which, np.arange(len(chunk) + 1))
            data = ({name: answer.column(name).to_pylist() for name in columns} if python else
                    {name: answer.column(name).to_numpy(zero_copy_only=False) for name in columns})
            for i in range(len(chunk)):
                lo, hi = int(bounds[i]), int(bounds[i + 1])
                yield distances[lo:hi], {name: values[lo:hi] for name, values in data.items()}

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _ranked(self, distances: np.ndarray, rows: dict[str, Any]) -> RankedColumns:
        """One query's columns (score = -distance) from :meth:`_answers`' distances and rows."""
        ids = rows[self.id_field]
        if not self.ids_are_strings:
            ids = np.array([str(d) for d in ids], dtype=object)
        return RankedColumns(ids, -distances, rows[self.text_field])

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Columns per query (score = -distance, as :meth:`batch_retrieve`), no object per result."""
        return [self._ranked(distances, rows)
                for distances, rows in self._answers(queries, k, [self.id_field, self.text_field], python=False)]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The columns of :meth:`batch_retrieve_columns` as results, each with the row's other columns as its
        metadata, then ``text`` and ``distance``: one dict per row, built a column at a time."""
        names = [c for c in self.metadata_columns if c not in _ANSWER_COLUMNS]

        def answers() -> Iterator[tuple[RankedColumns, list[dict[str, Any]]]]:  # run inside batch_to_results
            for distances, rows in self._answers(queries, k, [self.id_field, self.text_field, *names], python=True):
                columns = [*((name, rows[name]) for name in names), ("text", rows[self.text_field]),
                           ("distance", distances.tolist())]
                yield self._ranked(distances, rows), _row_dicts(columns)

        return RankedColumns.batch_to_results(answers())

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "table": self.table_name, "embedding": str(self._vectors.label),
                "id_field": self.id_field, "text_field": self.text_field, "vector_column": self.vector_column,
                "where": self.where, "prefilter": self.prefilter, "distance_type": self.distance_type}


def _row_dicts(columns: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """One dict per row of equal-length ``(name, values)`` columns, keys in the columns' order (a name given twice
    keeps its first place and its last value, as ``{**row, "text": ...}`` would): built a column at a time, a
    loop per column instead of a call per row."""
    (first, values), *rest = columns
    rows = [{first: value} for value in values]
    for name, values in rest:
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return rows


def index_corpus(
    db: Any,
    table: str,
    corpus: str | Path | Iterable[dict[str, Any]],
    embedding: Any,
    batch_size: int = 256,
    recreate: bool = False,
) -> int:
    """Create ``table`` in ``db`` (a lancedb connection) from a corpus, with embeddings computed here.

    For demos and tests: evaluation never indexes. ``corpus`` is a JSONL file or records ``{doc_id, text,
    metadata}``; flat metadata values become columns (``doc_id``, ``text``, ``vector`` and the metadata keys of the
    first batch). Returns the number of documents.
    """
    embed = resolve_embedder(embedding)
    if table in _table_names(db):
        if not recreate:
            raise EvretError(f"lancedb table {table!r} exists already; pass recreate=True to replace it")
        db.drop_table(table)
    target, keys, total = None, None, 0
    for batch in corpus_batches(corpus, batch_size):
        if keys is None:
            keys = sorted({k for r in batch for k, v in (r.get("metadata") or {}).items()
                           if isinstance(v, (str, int, float, bool)) and k not in ("doc_id", "text", "vector")})
        vectors = embed([r["text"] for r in batch])
        rows = [{"doc_id": r["doc_id"], "text": r["text"], "vector": [float(x) for x in v],
                 **{k: (r.get("metadata") or {}).get(k) for k in keys}} for r, v in zip(batch, vectors, strict=True)]
        if target is None:
            target = db.create_table(table, rows)
        else:
            target.add(rows)
        total += len(batch)
    return total
