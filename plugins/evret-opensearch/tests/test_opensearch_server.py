"""evret-opensearch against a real OpenSearch server, when one is available (conftest.py's ``real_server``:
``EVRET_OPENSEARCH_URL``, or a distribution it starts on 127.0.0.1); otherwise every test here skips with the
reason. ``EVRET_OPENSEARCH_INSECURE=1`` turns certificate checks off (a server with demo certificates).

Beyond the adapter, this checks the stub: the same documents in the stub give the same rankings and scores."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evret_opensearch import OpenSearchRetriever, index_corpus

from evret_core import EvretError
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import BEE_QUERIES, write_corpus

from .conftest import OpenSearchStub, embed

VERIFY = os.environ.get("EVRET_OPENSEARCH_INSECURE", "") not in ("1", "true", "yes")


@pytest.fixture(scope="module")
def server(real_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, bool]]:
    """(client, index, whether the k-NN plugin is there): the bee documents in a fresh index, deleted after."""
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[real_server], verify_certs=VERIFY, ssl_show_warn=False)
    knn = any(p.get("component") == "opensearch-knn" for p in client.cat.plugins(format="json"))
    index = f"evret-test-{uuid.uuid4().hex[:8]}"
    corpus = write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl")
    try:
        index_corpus(client, index, corpus, embed if knn else None)
        yield client, index, knn
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)
        client.close()


def _options(server: tuple[Any, str, bool]) -> dict[str, Any]:
    return {"index": server[1], "client": server[0]}


def _knn(server: tuple[Any, str, bool]) -> None:
    if not server[2]:
        pytest.skip("the server has no k-NN plugin (opensearch-knn)")


class TestServerBM25Conformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, server: tuple[Any, str, bool]) -> OpenSearchRetriever:
        return OpenSearchRetriever(**_options(server))

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


class TestServerKnnConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, server: tuple[Any, str, bool]) -> OpenSearchRetriever:
        _knn(server)
        return OpenSearchRetriever(**_options(server), embedding=embed)

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


def test_filters_and_metadata(server: tuple[Any, str, bool]) -> None:
    hive = {"term": {"topic.keyword": "hive"}}
    bm25 = OpenSearchRetriever(**_options(server), filter=hive)
    results = bm25.retrieve("queen eggs day bees dance", 6)
    assert [r.doc_id for r in results] == ["d3", "d4"]
    assert results[0].metadata == {"text": results[0].text, "doc_id": "d3", "title": "Queens", "topic": "hive"}
    if server[2]:
        knn = OpenSearchRetriever(**_options(server), embedding=embed, filter=hive)
        assert {r.doc_id for r in knn.retrieve("waggle dance direction", 6)} == {"d3", "d4"}


def test_errors_name_the_option(server: tuple[Any, str, bool]) -> None:
    client, index, _ = server
    with pytest.raises(EvretError, match=r"option 'index': no index 'evret-test-missing'"):
        OpenSearchRetriever("evret-test-missing", client=client)
    with pytest.raises(EvretError, match=r"option 'text_field': index '.*' has no field 'body'"):
        OpenSearchRetriever(index, client=client, text_field="body")
    with pytest.raises(EvretError, match=r"option 'filter' is not a valid query clause: .*trem"):
        OpenSearchRetriever(index, client=client, filter={"trem": {"topic": "hive"}})


@pytest.fixture
def stub_twin(tmp_path: Path, server: tuple[Any, str, bool]) -> Iterator[Any]:
    """The same documents, the same way, in the stub."""
    from opensearchpy import OpenSearch

    with OpenSearchStub() as stub:
        client = OpenSearch(hosts=[stub.url])
        index_corpus(client, server[1], write_corpus(tmp_path / "corpus.jsonl"), embed if server[2] else None)
        yield client
        client.close()


def test_the_stub_scores_as_the_server_does(server: tuple[Any, str, bool], stub_twin: Any) -> None:
    queries = [*BEE_QUERIES, "bees", "queen bee", "the hive"]
    modes: list[dict[str, Any]] = [{}, {"fields": ["title^2", "text"]}]
    if server[2]:
        modes.append({"embedding": embed})
    for options in modes:
        real = OpenSearchRetriever(**_options(server), **options).batch_retrieve(queries, 6)
        stub = OpenSearchRetriever(server[1], client=stub_twin, **options).batch_retrieve(queries, 6)
        for query, got, expected in zip(queries, stub, real, strict=True):
            assert [r.doc_id for r in got] == [r.doc_id for r in expected], (query, options)
            # Lucene scores in float32
            assert [r.score for r in got] == pytest.approx([r.score for r in expected], rel=1e-4), (query, options)
