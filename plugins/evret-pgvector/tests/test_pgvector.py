"""evret-pgvector against a real PostgreSQL 16 server with the vector extension, started for these tests.

The server binaries come from the ``pgserver`` wheel (its Python API is not used: as root it adds a system user
and changes permissions up to ``/``). PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` user, which ``.ci/test-setup.sh`` creates.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from evret_pgvector import PgVectorRetriever, create_index, index_corpus

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import (
    BEE_DOCS,
    BEE_QUERIES,
    assert_plugin_load_leaves_unimported,
    hashed_embedder,
    write_corpus,
)

DOCS = BEE_DOCS
embed = hashed_embedder(64)


def _pg_bin() -> Path:
    spec = importlib.util.find_spec("pgserver")  # locates the wheel without running its __init__
    if spec is None or not spec.submodule_search_locations:
        message = "pgserver (PostgreSQL 16 + pgvector binaries) is not installed: pip install pgserver"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server on 127.0.0.1; yields its connection string and stops it afterwards."""
    bin_dir = _pg_bin()
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="evret-pg-"))
    if as_root:
        if shutil.which("runuser") is None:
            pytest.fail("runuser is missing (util-linux); it runs PostgreSQL as the postgres user")
        try:
            import pwd

            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("no 'postgres' system user: PostgreSQL refuses to run as root; run .ci/test-setup.sh")
        os.chown(base, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
        reach = subprocess.run([*prefix, "test", "-x", str(bin_dir / "initdb")], capture_output=True)
        if reach.returncode != 0:
            shutil.rmtree(base, ignore_errors=True)
            closed = [str(p) for p in reversed(bin_dir.parents) if p.is_dir() and not p.stat().st_mode & 0o001]
            pytest.fail(f"PostgreSQL runs as the postgres user, which cannot reach {bin_dir / 'initdb'}: "
                        f"{', '.join(closed) or 'a folder above it'} is not searchable by others (a 0700 folder, "
                        f"as mktemp -d makes); chmod o+x it, or clone the project elsewhere")
    data, log = base / "data", base / "server.log"
    port = _free_port()
    try:
        made = subprocess.run([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                               "-E", "UTF8", "--no-instructions"], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.fail(f"initdb failed (exit {made.returncode}): {made.stderr or made.stdout}")
        started = subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
             "-o", f"-p {port} -c listen_addresses=127.0.0.1 -k {base}", "start"],
            capture_output=True, text=True,
        )
        if started.returncode != 0:
            pytest.fail(f"PostgreSQL did not start: {started.stderr}\n{log.read_text() if log.exists() else ''}")
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def table(postgres: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    corpus = write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl")
    with psycopg.connect(postgres, autocommit=True) as conn:
        assert index_corpus(conn, "bees", corpus, embed, batch_size=4) == 6
        conn.execute("ALTER TABLE bees ADD COLUMN topic text")
        conn.execute("UPDATE bees SET topic = metadata->>'topic'")
    return "bees"


class TestConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, postgres: str, table: str) -> Iterator[PgVectorRetriever]:
        with PgVectorRetriever(table, embedding=embed, dsn=postgres) as retriever:
            yield retriever

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


@pytest.mark.parametrize("distance", ["<=>", "<->", "<#>", "cosine"])
def test_every_operator_ranks_and_scores(postgres: str, table: str, distance: str) -> None:
    retriever = PgVectorRetriever(table, embedding=embed, dsn=postgres, distance=distance)
    batch = retriever.batch_retrieve(BEE_QUERIES, 3)
    assert [rs[0].doc_id for rs in batch] == ["d1", "d3", "d5", "d6"]
    top = batch[0][0]
    assert top.text.startswith("Waggle dance Honey bees") and top.score == pytest.approx(-top.metadata["distance"])
    if retriever.operator == "<#>":
        assert top.score > 0  # <#> is the negative inner product: the score is the inner product itself
    else:
        assert top.metadata["distance"] >= 0


def test_metadata_columns_and_where(postgres: str, table: str) -> None:
    retriever = PgVectorRetriever(table, embedding=embed, dsn=postgres, metadata_columns=["topic", "metadata"],
                                  where="topic = 'hive'")
    results = retriever.retrieve("waggle dance direction", 5)
    assert {r.doc_id for r in results} == {"d3", "d4"}
    assert results[0].metadata["topic"] == "hive" and results[0].metadata["metadata"]["title"] in ("Queens", "Drones")


def test_index_helper_serves_the_operator(postgres: str, table: str) -> None:
    with psycopg.connect(postgres, autocommit=True) as conn:
        name = create_index(conn, table, distance="<=>")
        assert create_index(conn, table, distance="<=>") == name  # idempotent
        indexdef = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (name,)).fetchone()[0]
        assert "USING hnsw" in indexdef and "vector_cosine_ops" in indexdef
        conn.execute("SET enable_seqscan = off")
        retriever = PgVectorRetriever(table, embedding=embed, connection=conn)
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN " + retriever._sql.as_string(conn).replace("%(q)s", "%(q)s::vector").replace("%(k)s", "3"),
            {"q": str(embed(["wax"])[0])}).fetchall())
        assert name in plan
        assert retriever.retrieve("wax glands", 1)[0].doc_id == "d5"


def test_evaluator_through_the_registry(postgres: str, table: str) -> None:
    retriever = create_retriever("pgvector", table=table, dsn=postgres, embedding=embed, distance="l2")
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="which bees communicate food direction", relevant_doc_ids=["d1"]),
        QueryExample(query_id="b", query_text="beeswax glands on the abdomen", expected_answers=[
            "Wax Beeswax is produced by glands on the abdomen of worker bees."]),
    ])
    results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"], judge="exact").evaluate(dataset)
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["distance"] == "<->"


def test_errors_name_the_option(postgres: str, table: str) -> None:
    with pytest.raises(EvretError, match=r"option 'table': no table 'nope'"):
        PgVectorRetriever("nope", embedding=embed, dsn=postgres)
    with pytest.raises(EvretError, match=r"option 'vector_column': table 'bees' has no column 'vec'"):
        PgVectorRetriever(table, embedding=embed, dsn=postgres, vector_column="vec")
    with pytest.raises(EvretError, match=r"option 'distance' '<~>'"):
        PgVectorRetriever(table, embedding=embed, dsn=postgres, distance="<~>")
    with pytest.raises(EvretError, match="option 'dsn': cannot connect"):
        PgVectorRetriever(table, embedding=embed, dsn=f"host=127.0.0.1 port={_free_port()} user=postgres")
    with pytest.raises(EvretError, match="query on table 'bees' failed"):
        PgVectorRetriever(table, embedding=embed, dsn=postgres, where="no_such_column = 1").retrieve("wax", 1)
    with psycopg.connect(postgres, autocommit=True) as conn, pytest.raises(EvretError, match="exists already"):
        index_corpus(conn, table, [{"doc_id": "x", "text": "x"}], embed)


def test_plugin_load_does_not_import_psycopg() -> None:
    assert_plugin_load_leaves_unimported("pgvector", "psycopg", "pgvector")
