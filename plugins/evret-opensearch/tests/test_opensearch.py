"""evret-opensearch through the real opensearch-py client, against the wire-format server of ``opensearch_stub.py``
(real indexing, Lucene's BM25 and OpenSearch's k-NN scores) started on 127.0.0.1 by the fixtures of conftest.py.
The same behaviour against a real server: test_opensearch_server.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from evret_opensearch import OpenSearchRetriever, index_corpus

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.cli import main
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import BEE_QUERIES, assert_plugin_load_leaves_unimported

from .conftest import HERE, OpenSearchStub, answers, embed, run_distribution

HIVE = {"term": {"topic.keyword": "hive"}}


class TestBM25Conformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, stub: Any, bees: str) -> OpenSearchRetriever:
        return OpenSearchRetriever(bees, url=stub.url)

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


class TestKnnConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, stub: Any, bees: str) -> OpenSearchRetriever:
        return OpenSearchRetriever(bees, url=stub.url, embedding=embed)

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


def test_bm25_is_lucenes_formula(client: Any) -> None:
    """The stub's scores are Lucene's BM25 (k1=1.2, b=0.75), worked out here by hand for two documents."""
    client.indices.create(index="two", body={"mappings": {"properties": {"text": {"type": "text"}}}})
    client.bulk(body=[{"index": {"_index": "two", "_id": "a"}}, {"text": "bees bees make honey"},
                      {"index": {"_index": "two", "_id": "b"}}, {"text": "wasps"}])
    hits = client.search(index="two", body={"query": {"match": {"text": "bees wasps"}}})["hits"]["hits"]
    avgdl = (4 + 1) / 2
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    expected_a = idf * 2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 4 / avgdl))
    expected_b = idf * 1 / (1 + 1.2 * (1 - 0.75 + 0.75 * 1 / avgdl))
    assert [(h["_id"], h["_score"]) for h in hits] == [("b", pytest.approx(expected_b)),
                                                       ("a", pytest.approx(expected_a))]


def test_bm25_agrees_with_bm25s_lucene_variant(client: Any) -> None:
    """An independent implementation, bm25s with method="lucene", scores short documents (lengths Lucene stores
    exactly; no one-letter words, which bm25s's tokenizer drops) as the stub does."""
    bm25s = pytest.importorskip("bm25s")
    docs = ["honey bees communicate the direction of food with waggle dance",
            "bumblebees fly at low temperatures by shivering their muscles",
            "queen bee can lay up to two thousand eggs in single day and eggs hatch in days",
            "drones are male bees whose main role is to mate with queen",
            "beeswax is produced by glands on the abdomen of worker bees",
            "propolis is resin that bees use to seal gaps in the hive and the hive stays dry"]
    lines: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        lines += [{"index": {"_index": "short", "_id": str(i)}}, {"text": doc}]
    client.bulk(body=lines)
    model = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    model.index(bm25s.tokenize(docs, stopwords=None, show_progress=False), show_progress=False)
    for query in ("queen eggs bees", "the hive", "bees bees dance", "worker glands wax"):
        ids, scores = model.retrieve(bm25s.tokenize([query], stopwords=None, show_progress=False), k=len(docs),
                                     show_progress=False)
        expected = {str(i): float(s) for i, s in zip(ids[0], scores[0], strict=True) if s > 0}
        hits = client.search(index="short", body={"size": 10, "query": {"match": {"text": query}}})["hits"]["hits"]
        assert {h["_id"]: h["_score"] for h in hits} == pytest.approx(expected, rel=1e-6), query


def test_scores_ids_texts_and_metadata_are_the_servers(client: Any, stub: Any, bees: str) -> None:
    retriever = OpenSearchRetriever(bees, client=client)
    top = retriever.retrieve("queen eggs per day", 2)
    direct = client.search(index=bees, body={"size": 2, "query": {"match": {"text": "queen eggs per day"}}})
    assert [(r.doc_id, r.score) for r in top] == [(h["_id"], h["_score"]) for h in direct["hits"]["hits"]]
    assert [r.doc_id for r in top] == ["d3", "d4"]
    assert top[0].text == "Queens A queen bee can lay up to two thousand eggs in a single day."
    assert top[0].metadata == {"text": top[0].text, "doc_id": "d3", "title": "Queens", "topic": "hive"}
    knn = OpenSearchRetriever(bees, client=client, embedding=embed).retrieve("resin seal", 1)[0]
    assert knn.doc_id == "d6" and "vector" not in knn.metadata and 0.5 < knn.score <= 1.0


@pytest.mark.parametrize("mode", ["bm25", "knn"])
def test_results_are_the_columns_with_the_source_fields(client: Any, bees: str, mode: str) -> None:
    """The object path is the columns path plus metadata: the same ids, scores (exactly) and texts in the same
    order, each result's metadata the hit's source fields but the text and the vector, then ``text``."""
    options: dict[str, Any] = {"embedding": embed} if mode == "knn" else {}
    retriever = OpenSearchRetriever(bees, client=client, batch_size=3, **options)
    queries = list(BEE_QUERIES)
    results = retriever.batch_retrieve(queries, 4)
    columns = retriever.batch_retrieve_columns(queries, 4)
    assert [[(r.doc_id, r.score, r.text) for r in rs] for rs in results] == [
        [(r.doc_id, r.score, r.text) for r in c.to_results()] for c in columns]
    for query, rs in zip(queries, results, strict=True):
        body = (retriever._query(query, embed([query])[0] if mode == "knn" else None, 4))
        hits = client.search(index=bees, body={"size": 4, "query": body, "_source": {"excludes": ["vector"]}})
        assert [list(r.metadata.items()) for r in rs] == [
            [*((f, v) for f, v in hit["_source"].items() if f != "text"), ("text", hit["_source"]["text"])]
            for hit in hits["hits"]["hits"]]
        assert all(type(r.doc_id) is str and type(r.score) is float and type(r.metadata) is dict for r in rs)


def test_one_msearch_request_per_batch(stub: Any, bees: str) -> None:
    queries = [*BEE_QUERIES, "drones mate", "bumblebees shiver", "honey", "beeswax", "propolis", "eggs"]
    for retriever in (OpenSearchRetriever(bees, url=stub.url, batch_size=4),
                      OpenSearchRetriever(bees, url=stub.url, embedding=embed, batch_size=4)):
        before = (stub.count("_msearch"), stub.count("_search"))
        batch = retriever.batch_retrieve(queries, 3)
        assert (stub.count("_msearch") - before[0], stub.count("_search") - before[1]) == (3, 0)
        assert [rs[0].doc_id for rs in batch[:4]] == ["d1", "d3", "d5", "d6"]
        retriever.batch_retrieve_columns(queries, 3)
        assert stub.count("_msearch") - before[0] == 6
        assert retriever.batch_retrieve([], 3) == [] and stub.count("_msearch") - before[0] == 6


def test_filters_pass_through(stub: Any, bees: str) -> None:
    bm25 = OpenSearchRetriever(bees, url=stub.url, filter=HIVE)
    assert [r.doc_id for r in bm25.retrieve("queen eggs day bees dance", 6)] == ["d3", "d4"]
    knn = OpenSearchRetriever(bees, url=stub.url, embedding=embed, filter=HIVE)
    assert {r.doc_id for r in knn.retrieve("waggle dance direction", 6)} == {"d3", "d4"}
    several = OpenSearchRetriever(bees, url=stub.url, embedding=embed,
                                  filter=[HIVE, {"term": {"doc_id": "d4"}}])
    assert [r.doc_id for r in several.retrieve("queen", 6)] == ["d4"]
    assert OpenSearchRetriever(bees, url=stub.url, embedding=embed).retrieve("waggle dance direction", 1)[0].doc_id \
        == "d1"


def test_multi_match_fields_boosts_and_match_params(client: Any, bees: str) -> None:
    retriever = OpenSearchRetriever(bees, client=client, fields=["title^3", "text"])
    body = {"size": 3, "query": {"multi_match": {"query": "queen drones", "fields": ["title^3", "text"]}}}
    direct = client.search(index=bees, body=body)["hits"]["hits"]
    got = retriever.retrieve("queen drones", 3)
    assert [(r.doc_id, r.score) for r in got] == [(h["_id"], h["_score"]) for h in direct]
    assert OpenSearchRetriever(bees, client=client, fields="title,text").fields == ["title", "text"]
    strict = OpenSearchRetriever(bees, client=client, match_params={"operator": "and"})
    assert [r.doc_id for r in strict.retrieve("queen eggs", 5)] == ["d3"]  # d4 has "queen" only
    assert len(OpenSearchRetriever(bees, client=client).retrieve("queen eggs", 5)) == 2


def test_an_index_built_by_hand_with_other_names(client: Any) -> None:
    client.indices.create(index="docs", body={"settings": {"index": {"knn": True}}, "mappings": {"properties": {
        "body": {"type": "text"}, "meta": {"properties": {"pk": {"type": "keyword"}}},
        "emb": {"type": "knn_vector", "dimension": 128, "space_type": "l2"},
        "emb_small": {"type": "knn_vector", "dimension": 2}}}})
    texts = {"a": "honey bees dance", "b": "queens lay eggs"}
    lines: list[dict[str, Any]] = []
    for i, ((key, text), vector) in enumerate(zip(texts.items(), embed(list(texts.values())), strict=True)):
        lines += [{"index": {"_index": "docs", "_id": f"os-{i}"}},
                  {"body": text, "meta": {"pk": key}, "emb": vector, "emb_small": [0.0, 1.0], "year": 2000 + i}]
    client.bulk(body=lines)
    with pytest.raises(EvretError, match=r"option 'vector_field': index 'docs' has 2 knn_vector fields \(emb, "):
        OpenSearchRetriever("docs", client=client, embedding=embed, text_field="body")
    retriever = OpenSearchRetriever("docs", client=client, embedding=embed, text_field="body", vector_field="emb",
                                    id_field="meta.pk")
    top = retriever.retrieve("queens lay eggs", 2)
    assert [r.doc_id for r in top] == ["b", "a"] and top[0].score == pytest.approx(1.0)  # l2: 1 / (1 + 0)
    assert top[1].score == pytest.approx(1 / (1 + sum((x - y) ** 2 for x, y in zip(*embed(list(texts.values())),
                                                                                      strict=True))))
    assert top[0].metadata == {"text": "queens lay eggs", "meta": {"pk": "b"}, "year": 2001}
    by_os_id = OpenSearchRetriever("docs", client=client, text_field="body")
    assert list(by_os_id.batch_retrieve_columns(["queens eggs"], 2)[0].ids) == ["os-1"]


def test_unmapped_fields_kept_in_source(client: Any) -> None:
    """With ``"dynamic": false`` the id and other fields are stored, not indexed: still usable as id and metadata."""
    client.indices.create(index="lean", body={"mappings": {"dynamic": False, "properties": {
        "body": {"type": "text"}}}})
    client.bulk(body=[{"index": {"_index": "lean", "_id": "1"}}, {"body": "honey bees", "ref": "doc-a", "n": 1},
                      {"index": {"_index": "lean", "_id": "2"}}, {"body": "queens", "ref": "doc-b", "n": 2}])
    assert "ref" not in client.indices.get_mapping(index="lean")["lean"]["mappings"]["properties"]
    top = OpenSearchRetriever("lean", client=client, text_field="body", id_field="ref").retrieve("bees", 2)
    assert [(r.doc_id, r.text, r.metadata["n"]) for r in top] == [("doc-a", "honey bees", 1)]
    with pytest.raises(EvretError, match=r"option 'id_field': index 'lean' has no field 'reference'"):
        OpenSearchRetriever("lean", client=client, text_field="body", id_field="reference")


def test_precomputed_query_embeddings(stub: Any, bees: str) -> None:
    queries = ["which bees communicate food direction", "beeswax glands on the abdomen"]
    vectors = dict(zip(queries, embed(queries), strict=True))
    retriever = OpenSearchRetriever(bees, url=stub.url, query_embeddings=vectors)
    assert retriever.mode == "knn" and [rs[0].doc_id for rs in retriever.batch_retrieve(queries, 2)] == ["d1", "d5"]
    with pytest.raises(EvretError, match=r"'query_embeddings' has no vector for the query 'unknown'"):
        retriever.retrieve("unknown", 2)
    short = OpenSearchRetriever(bees, url=stub.url, query_embeddings={"q": [0.1, 0.2]})
    with pytest.raises(EvretError, match=r"option 'query_embeddings' gives vectors of 2 dimensions; 'vector' of "
                                         r"index 'bees' has 128"):
        short.retrieve("q", 2)


def test_errors_name_the_option(stub: Any, client: Any, bees: str, corpus_file: Path) -> None:
    def fails(pattern: str, **options: Any) -> None:
        with pytest.raises(EvretError, match=pattern):
            OpenSearchRetriever(**{"index": bees, "url": stub.url, **options})

    fails(r"option 'index': no index 'nope' at http://127\.0\.0\.1:\d+ \(existing: bees\)", index="nope")
    fails(r"option 'text_field': index 'bees' has no field 'body' \(its fields: doc_id, text", text_field="body")
    fails(r"option 'id_field': index 'bees' has no field 'pk'", id_field="pk")
    fails(r"option 'fields': index 'bees' has no field 'abstract'", fields=["title^2", "abstract"])
    fails(r"option 'fields': 'vector' of index 'bees' is a knn_vector field", fields="vector")
    fails(r"option 'vector_field': 'topic' of index 'bees' is a text field, not a knn_vector",
          embedding=embed, vector_field="topic")
    fails(r"option 'vector_field': index 'bees' has no field 'emb'", embedding=embed, vector_field="emb")
    fails(r"option 'filter' is not a valid query clause: parsing_exception: unknown query \[trem\]",
          filter={"trem": {"topic": "hive"}})
    fails(r"option 'filter': give an OpenSearch query clause as a JSON object", filter="topic = 'hive'")
    fails(r"option 'match_params': give parameters as a JSON object", match_params=["operator", "and"])
    fails(r"option 'mode': 'hybrid' is not 'bm25' or 'knn'", mode="hybrid")
    fails(r"mode 'knn' needs exactly one of the options 'embedding'", mode="knn")
    fails(r"options 'embedding', 'query_embeddings' and 'vector_field' go with mode 'knn'", mode="bm25",
          embedding=embed)
    with pytest.raises(EvretError, match=r"give the option 'url'"):
        OpenSearchRetriever(bees)
    bad_match = OpenSearchRetriever(bees, url=stub.url, match_params={"fuzzyness": 1})
    with pytest.raises(EvretError, match=r"the bm25 query for 'resin' failed on index 'bees' \(options 'fields', "
                                         r"'match_params', 'filter'\): parsing_exception: \[match\] query does not "
                                         r"support \[fuzzyness\]"):
        bad_match.retrieve("resin", 2)
    bad_knn = OpenSearchRetriever(bees, url=stub.url, embedding=embed, knn_params={"ef": 10})
    with pytest.raises(EvretError, match=r"'knn_params', 'filter'\): parsing_exception: \[knn\] query does not"):
        bad_knn.batch_retrieve_columns(["resin"], 2)
    with pytest.raises(EvretError, match="exists already"):
        index_corpus(client, bees, corpus_file, embed)


def test_server_failures_name_the_url_with_credentials_redacted(bees: str, stub: Any) -> None:
    secret = "s3cret-Pa55word"
    with OpenSearchStub(auth=("admin", secret), fail={"_msearch": 500}) as guarded:
        from opensearchpy import OpenSearch

        OpenSearch(hosts=[guarded.url], http_auth=("admin", secret)).indices.create(
            index="x", body={"mappings": {"properties": {"text": {"type": "text"}}}})
        port = guarded.url.rsplit(":", 1)[1]
        retriever = OpenSearchRetriever("x", url=f"http://admin:{secret}@127.0.0.1:{port}")
        with pytest.raises(EvretError) as failed:
            retriever.retrieve("bees", 3)
        message = str(failed.value)
        assert f"index 'x' at http://admin:***@127.0.0.1:{port}" in message and secret not in message
        assert "the server failed (500) on the bm25 query" in message and "\n" not in message
        with pytest.raises(EvretError, match=r"options 'username'/'password' \(or the credentials in 'url'\): the "
                                             r"server refused them: HTTP 401") as refused:
            OpenSearchRetriever("x", url=guarded.url, username="admin", password="wrong-password")
        assert "wrong-password" not in str(refused.value)
    with pytest.raises(EvretError, match=rf"option 'url': cannot reach http://admin:\*\*\*@127\.0\.0\.1:{port}") \
            as unreachable:
        OpenSearchRetriever("x", url=f"http://admin:{secret}@127.0.0.1:{port}", client_options={"max_retries": 0})
    assert secret not in str(unreachable.value)


DATASET = [
    QueryExample(query_id="a", query_text="which bees communicate food direction", relevant_doc_ids=["d1"]),
    QueryExample(query_id="b", query_text="beeswax glands on the abdomen", relevant_doc_ids=["d5"]),
    QueryExample(query_id="c", query_text="propolis resin seal gaps", relevant_doc_ids=["d6"]),
]


def test_evaluator_through_the_registry(stub: Any, bees: str) -> None:
    retriever = create_retriever("opensearch", index=bees, url=stub.url)
    results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"]).evaluate(EvaluationDataset(queries=DATASET))
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["index"] == "bees" and results.config["retriever"]["mode"] == "bm25"


def _dataset(tmp_path: Path) -> Path:
    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps({"query_id": q.query_id, "query": q.query_text,
                                        "relevant_doc_ids": q.relevant_doc_ids}) + "\n" for q in DATASET))
    return data


def test_evret_evaluate_with_a_config_file(stub: Any, bees: str, tmp_path: Path) -> None:
    texts = [q.query_text for q in DATASET]
    table = ", ".join(f"{json.dumps(q)} = {json.dumps(v)}" for q, v in zip(texts, embed(texts), strict=True))
    for name, extra, expected in (("bm25", "", 1.0), ("knn", f"query_embeddings = {{ {table} }}\n", 1.0),
                                  ("hive", 'filter = { term = { "topic.keyword" = "hive" } }\n', 0.0)):
        config = tmp_path / f"{name}.toml"
        config.write_text(f'dataset = "eval.jsonl"\nmetrics = ["recall@1"]\n\n[retriever]\nname = "opensearch"\n'
                          f'url = "{stub.url}"\nindex = "bees"\n{extra}', encoding="utf-8")
        _dataset(tmp_path)
        out = tmp_path / f"{name}.json"
        assert main(["evaluate", "--config", str(config), "--output", str(out), "--no-progress"]) == 0
        assert json.loads(out.read_text(encoding="utf-8"))["scores"]["recall@1"] == expected, name


def test_evret_evaluate_cli(stub: Any, bees: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["evaluate", "--dataset", str(_dataset(tmp_path)), "--retriever", "opensearch", "--retriever-option",
            "index=bees", "--retriever-option", f"url={stub.url}", "--metric", "recall@1", "--no-progress"]
    out = tmp_path / "out.json"
    assert main([*base, "--retriever-option", "fields=title^2,text", "--output", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["scores"]["recall@1"] == 1.0
    capsys.readouterr()
    assert main([*base, "--retriever-option", "text_field=body"]) == 2
    err = capsys.readouterr().err
    assert "option 'text_field': index 'bees' has no field 'body'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_close_closes_only_its_own_client(stub: Any, client: Any, bees: str) -> None:
    with OpenSearchRetriever(bees, url=stub.url) as owned:
        assert owned.retrieve("resin", 1)[0].doc_id == "d6"
    assert owned.client is None
    given = OpenSearchRetriever(bees, client=client)
    given.close()
    assert given.client is client and client.indices.exists(index=bees)


def test_a_distribution_is_started_and_stopped(tmp_path: Path, corpus_file: Path) -> None:
    """What the real-server tests do with a distribution they find (``opensearch`` on PATH, ``OPENSEARCH_HOME``),
    here with a stand-in ``bin/opensearch`` that serves the stub on the port it is given."""
    import sys

    from opensearchpy import OpenSearch

    home = tmp_path / "opensearch-9.9"
    (home / "plugins" / "opensearch-security").mkdir(parents=True)
    (home / "bin").mkdir()
    executable = home / "bin" / "opensearch"
    executable.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(HERE)!r})\n"
        f"open({str(tmp_path / 'argv.txt')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        "port = int(next(a for a in sys.argv if a.startswith('-Ehttp.port=')).split('=')[1])\n"
        "from opensearch_stub import OpenSearchStub\nimport time\n"
        "with OpenSearchStub(port=port):\n    time.sleep(600)\n", encoding="utf-8")
    executable.chmod(0o755)
    (tmp_path / "run").mkdir()
    with run_distribution(str(executable), tmp_path / "run", wait_s=60) as url:
        client = OpenSearch(hosts=[url])
        index_corpus(client, "bees", corpus_file)
        assert OpenSearchRetriever("bees", url=url).retrieve("resin seal", 1)[0].doc_id == "d6"
        client.close()
    argv = (tmp_path / "argv.txt").read_text(encoding="utf-8").split()
    assert "-Ediscovery.type=single-node" in argv and "-Eplugins.security.disabled=true" in argv
    assert f"-Epath.data={tmp_path / 'run' / 'data'}" in argv
    assert not answers(url)  # stopped


def test_plugin_load_does_not_import_opensearchpy() -> None:
    assert_plugin_load_leaves_unimported("opensearch", "opensearchpy", "evret_opensearch.retriever")


def test_lists_numbers_and_missing_fields_in_a_batch(client: Any) -> None:
    """A batch whose hits are not all top-level strings (a multi-valued text, numeric ids) is read hit by hit with
    the same answers on both paths, the metadata left whole; a hit without the text field names the document."""
    client.indices.create(index="odd", body={"mappings": {"properties": {
        "body": {"type": "text"}, "note": {"type": "text"}, "ref": {"type": "long"}}}})
    client.bulk(body=[{"index": {"_index": "odd", "_id": "1"}}, {"body": "honey bees", "ref": 7, "n": 1},
                      {"index": {"_index": "odd", "_id": "2"}}, {"body": ["bees bees", "dance"], "ref": 8, "n": 2},
                      {"index": {"_index": "odd", "_id": "3"}}, {"note": "bees only a note", "ref": 9}])
    retriever = OpenSearchRetriever("odd", client=client, text_field="body", id_field="ref")
    columns = retriever.batch_retrieve_columns(["bees", "honey"], 2)
    assert [(list(c.ids), list(c.texts)) for c in columns] == [(["8", "7"], ["bees bees dance", "honey bees"]),
                                                               (["7"], ["honey bees"])]
    results = retriever.batch_retrieve(["bees"], 2)[0]
    assert [(r.doc_id, r.text, r.metadata) for r in results] == [("8", "bees bees dance", {"n": 2, "text": "bees bees dance"}),
                                                                 ("7", "honey bees", {"n": 1, "text": "honey bees"})]
    both = OpenSearchRetriever("odd", client=client, text_field="body", fields=["body", "note"])
    for path in (both.batch_retrieve_columns, both.batch_retrieve):
        with pytest.raises(EvretError, match=r"document '3' \(rank \d for query 'note'\) has no source field 'body' "
                                             r"\(option 'text_field'\)"):
            path(["note"], 3)


# -- issue 33, F1 (OS2, OS5d, OS8, ML03): credentials in a url without a scheme ----------------------------------------
NOSCHEME_PW = "S3cret-OS-pass-77"


def _store_files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_a_url_without_a_scheme_keeps_its_password_out_of_everything(tmp_path: Path, corpus_file: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """opensearch-py takes 'admin:PW@host:9200' as the server: the password reaches no results file, manifest,
    message, MLflow parameter, tag or artifact, and a refused one is masked in the error."""
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    from opensearchpy import OpenSearch

    with OpenSearchStub(auth=("admin", NOSCHEME_PW)) as guarded:
        hostport = guarded.url.split("://", 1)[1]
        indexer = OpenSearch(hosts=[guarded.url], http_auth=("admin", NOSCHEME_PW))
        index_corpus(indexer, "bees", corpus_file, batch_size=4)
        indexer.close()
        url = f"admin:{NOSCHEME_PW}@{hostport}"
        out, store = tmp_path / "os2.json", tmp_path / "mlruns"
        argv = ["evaluate", "--dataset", str(_dataset(tmp_path)), "--retriever", "opensearch", "--retriever-option",
                "index=bees", "--retriever-option", f"url={url}", "--metric", "recall@1", "--no-progress",
                "--output", str(out), "--mlflow", str(store)]
        assert main(argv) == 0  # OS2, ML03: the server was reached with these credentials
        captured = capsys.readouterr()
        config = tmp_path / "os8.toml"  # OS8: the same url in a config file
        config.write_text(f'dataset = "eval.jsonl"\nmetrics = ["recall@1"]\n[retriever]\nname = "opensearch"\n'
                          f'index = "bees"\nurl = "{url}"\n', encoding="utf-8")
        assert main(["evaluate", "--config", str(config), "--output", str(tmp_path / "os8.json"),
                     "--no-progress"]) == 0
        captured8 = capsys.readouterr()
        wrong = f"admin:WRONG-pass-xyz14@{hostport}"  # OS5d: refused credentials, in the error message
        assert main([*argv[:8], f"url={wrong}", "--metric", "recall@1", "--no-progress"]) == 2
        refused = capsys.readouterr().err
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["scores"]["recall@1"] == 1.0
    assert written["config"]["retriever"]["url"] == f"admin:***@{hostport}"
    texts = {"os2.json": out.read_bytes(), "os8.json": (tmp_path / "os8.json").read_bytes(),
             "output": (captured.out + captured.err + captured8.out + captured8.err).encode(),
             **_store_files(store)}
    assert any(name.endswith("results.json") for name in texts) and len(texts) > 20
    for name, data in texts.items():
        assert NOSCHEME_PW.encode() not in data, name
    assert f"[index 'bees' at admin:***@{hostport}]" in refused and "WRONG-pass-xyz14" not in refused
