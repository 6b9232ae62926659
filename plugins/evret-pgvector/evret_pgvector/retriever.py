"""Search an existing PostgreSQL table with a pgvector column as an Evret retriever; helpers index corpus files
and build vector indexes for demos and tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from evret_core.sdk import (
    EvretError,
    RankedColumns,
    RetrievalResult,
    Retriever,
    corpus_batches,
    distance_result,
    resolve_embedder,
)

# operator -> the operator class an index needs to serve it
OPERATORS = {"<->": "vector_l2_ops", "<=>": "vector_cosine_ops", "<#>": "vector_ip_ops"}
OPERATOR_NAMES = {"l2": "<->", "euclidean": "<->", "cosine": "<=>", "inner_product": "<#>", "ip": "<#>"}


def resolve_operator(distance: str) -> str:
    """``<->``, ``<=>`` or ``<#>``, also accepted by name (``l2``, ``cosine``, ``inner_product``)."""
    op = OPERATOR_NAMES.get(distance.lower(), distance)
    if op not in OPERATORS:
        raise EvretError(f"pgvector retriever: option 'distance' {distance!r}: use <-> (l2), <=> (cosine) or "
                         f"<#> (inner_product)")
    return op


def _table_identifier(table: str) -> Any:
    from psycopg import sql

    parts = table.split(".")
    if len(parts) > 2 or not all(parts):
        raise EvretError(f"pgvector retriever: option 'table' {table!r}: write it as TABLE or SCHEMA.TABLE")
    return sql.Identifier(*parts)


def _connect(connection: Any, dsn: str | None) -> Any:
    if connection is not None:
        return connection
    if not dsn:
        raise EvretError("pgvector retriever: give the option 'dsn' (e.g. 'postgresql://user@host:5432/db') or "
                         "'connection' (a psycopg connection)")
    import psycopg

    try:
        return psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as exc:
        raise EvretError(f"pgvector retriever: option 'dsn': cannot connect: {str(exc).strip()}") from None


class PgVectorRetriever(Retriever):
    """Queries an existing table ordered by ``vector_column <op> query_vector``; it never writes to it.

    ``distance`` is the pgvector operator (``<->`` L2, ``<=>`` cosine, ``<#>`` negative inner product); the score is
    the negated distance (higher is better), the distance itself is kept in the metadata. ``metadata_columns``
    are returned as metadata; ``where`` is an SQL condition added to every query (it is your database: it is not
    escaped).
    """

    name = "pgvector"

    def __init__(
        self,
        table: str,
        embedding: Any = None,
        dsn: str | None = None,
        connection: Any = None,
        id_column: str = "id",
        text_column: str = "text",
        vector_column: str = "embedding",
        distance: str = "<=>",
        metadata_columns: Sequence[str] = (),
        where: str | None = None,
    ) -> None:
        from pgvector.psycopg import register_vector

        self.operator = resolve_operator(distance)
        self.embed = resolve_embedder(embedding)
        self.embedding_label = embedding if isinstance(embedding, str) else type(embedding).__name__
        self._owns_connection = connection is None
        self.conn = _connect(connection, dsn)
        register_vector(self.conn)
        self.table = table
        self.columns = {"id_column": id_column, "text_column": text_column, "vector_column": vector_column}
        self.metadata_columns = list(metadata_columns)
        self.where = where
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise
        self._sql = self._build_query()

    def close(self) -> None:
        """Close the connection this retriever opened from ``dsn`` (a connection you passed in stays open)."""
        if self._owns_connection and not self.conn.closed:
            self.conn.close()

    def __del__(self) -> None:
        # the CLI never calls close(): closing here keeps psycopg from warning about an open connection
        if getattr(self, "_owns_connection", False) and hasattr(self, "conn"):
            self.close()

    def __enter__(self) -> PgVectorRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_schema(self) -> None:
        parts = self.table.split(".")
        schema, name = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
        _table_identifier(self.table)
        rows = self.conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "AND (%s::text IS NULL AND table_schema = ANY(current_schemas(false)) OR table_schema = %s)",
            (name, schema, schema),
        ).fetchall()
        existing = {r[0] for r in rows}
        if not existing:
            raise EvretError(f"pgvector retriever: option 'table': no table {self.table!r} in the database; index "
                             f"it first, e.g. with evret_pgvector.index_corpus")
        wanted = [(opt, col) for opt, col in self.columns.items()] + [("metadata_columns", c) for c in
                                                                     self.metadata_columns]
        for option, column in wanted:
            if column not in existing:
                raise EvretError(f"pgvector retriever: option {option!r}: table {self.table!r} has no column "
                                 f"{column!r} (columns: {', '.join(sorted(existing))})")

    def _build_query(self) -> Any:
        from psycopg import sql

        vector = sql.Identifier(self.columns["vector_column"])
        distance = sql.SQL("{} {} %(q)s").format(vector, sql.SQL(self.operator))
        selected = [sql.Identifier(self.columns["id_column"]), sql.Identifier(self.columns["text_column"]), distance]
        selected += [sql.Identifier(c) for c in self.metadata_columns]
        where = sql.SQL(" WHERE ({})").format(sql.SQL(self.where)) if self.where else sql.SQL("")
        return sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT %(k)s").format(
            sql.SQL(", ").join(selected), _table_identifier(self.table), where, distance
        )

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _rows(self, queries: Sequence[str], k: int) -> list[list[tuple[Any, ...]]]:
        """The SQL rows (doc_id, text, distance, *metadata) of each query, one query at a time."""
        import numpy as np
        import psycopg

        if not queries:
            return []
        vectors = self.embed(list(queries))
        out: list[list[tuple[Any, ...]]] = []
        with self.conn.cursor() as cur:
            for vector in vectors:
                try:
                    out.append(cur.execute(self._sql, {"q": np.asarray(vector, dtype=np.float32), "k": k}).fetchall())
                except psycopg.Error as exc:
                    raise EvretError(f"pgvector retriever: query on table {self.table!r} failed: "
                                     f"{str(exc).strip()}") from None
        return out

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Columns per query (score = -distance, as :meth:`batch_retrieve`), no object per result."""
        import numpy as np

        return [RankedColumns([str(row[0]) for row in rows], -np.asarray([float(row[2]) for row in rows]),
                              [row[1] for row in rows])
                for rows in self._rows(queries, k)]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        return [[distance_result(doc_id, text, dist, dict(zip(self.metadata_columns, extra, strict=True)))
                 for doc_id, text, dist, *extra in rows]
                for rows in self._rows(queries, k)]

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "table": self.table, **self.columns, "distance": self.operator,
                "embedding": str(self.embedding_label), "metadata_columns": self.metadata_columns,
                "where": self.where}


def index_corpus(
    conn: Any,
    table: str,
    corpus: str | Path | Iterable[dict[str, Any]],
    embedding: Any,
    batch_size: int = 256,
    recreate: bool = False,
) -> int:
    """Create ``table`` (``id text primary key, text text, metadata jsonb, embedding vector(d)``) and fill it.

    For demos and tests: evaluation never indexes. ``corpus`` is a JSONL file or records ``{doc_id, text,
    metadata}``. Creates the ``vector`` extension when missing. Returns the number of rows written.
    """
    import numpy as np
    from pgvector.psycopg import register_vector
    from psycopg import sql

    embed = resolve_embedder(embedding)
    ident = _table_identifier(table)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    if recreate:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    created = False
    total = 0

    def write(batch: list[dict[str, Any]]) -> None:
        nonlocal created, total
        vectors = embed([r["text"] for r in batch])
        with conn.transaction():
            if not created:
                conn.execute(sql.SQL("CREATE TABLE {} (id text PRIMARY KEY, text text NOT NULL, metadata jsonb, "
                                     "embedding vector({}))").format(ident, sql.Literal(len(vectors[0]))))
                created = True
            with conn.cursor() as cur:
                cur.executemany(
                    sql.SQL("INSERT INTO {} (id, text, metadata, embedding) VALUES (%s, %s, %s, %s)").format(ident),
                    [(r["doc_id"], r["text"], json.dumps(r.get("metadata") or {}), np.asarray(v, dtype=np.float32))
                     for r, v in zip(batch, vectors, strict=True)],
                )
        total += len(batch)

    import psycopg

    try:
        for batch in corpus_batches(corpus, batch_size):
            write(batch)
    except psycopg.errors.DuplicateTable:
        raise EvretError(f"table {table!r} exists already; pass recreate=True to replace it") from None
    return total


def create_index(conn: Any, table: str, vector_column: str = "embedding", distance: str = "<=>",
                 method: str = "hnsw") -> str:
    """Build an ``hnsw`` or ``ivfflat`` index serving ``distance`` on ``vector_column``; returns its name."""
    from psycopg import sql

    op = resolve_operator(distance)
    if method not in ("hnsw", "ivfflat"):
        raise EvretError(f"create_index: method {method!r}: use hnsw or ivfflat")
    name = f"{table.replace('.', '_')}_{vector_column}_{method}_{OPERATORS[op]}"
    conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING {} ({} {})").format(
        sql.Identifier(name), _table_identifier(table), sql.SQL(method), sql.Identifier(vector_column),
        sql.SQL(OPERATORS[op])))
    return name
