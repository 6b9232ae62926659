"""docs/pipelines.md's pipeline.toml (bm25 + dense -> rrf -> embedding rerank -> pack), its dataset pointed at a small
BEIR folder, run through ``evret evaluate`` with the plugin's dense retriever and embedding reranker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core.cli import main

DOCS = Path(__file__).resolve().parents[3] / "docs" / "pipelines.md"


def test_the_docs_pipeline_toml_runs_on_a_beir_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    toml = re.search(r"```toml\n# pipeline.toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert toml, "docs/pipelines.md has no pipeline.toml example"
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = {"b1": "Honey bees make honey from nectar.", "b2": "Honey never spoils in a sealed jar.",
              "b3": "Bees make wax for their combs.", "b4": "The stock market closed higher."}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in corpus.items()), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in
                                                  (("q1", "does honey spoil"), ("q2", "what do bees make wax for"))),
                                          encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tb2\t1\nq2\tb3\t1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVRET_CACHE_DIR", str(tmp_path / "cache"))
    config = toml.group(1).replace('"../shared/datasets/scifact"', '"beir"')
    assert config != toml.group(1)
    Path("pipeline.toml").write_text(config, encoding="utf-8")
    assert main(["evaluate", "--config", "pipeline.toml", "--output", "pipeline.json", "--report", "pipeline.html",
                 "--no-progress", "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "What each stage added" in out and "Packing" in out
    data = json.loads(Path("pipeline.json").read_text(encoding="utf-8"))
    assert [(s["name"], s["kind"]) for s in data["stages"]] == [
        ("bm25", "retriever"), ("dense", "retriever"), ("rrf", "fuse"), ("rerank", "reranker"), ("packed", "pack")]
    assert data["stages"][3]["reranker"]["name"] == "embedding" and data["stages"][4]["budget"] == 4000
    assert data["stages"][3]["scores"]["ndcg@10"] == 1.0  # the embedding reranker puts each gold abstract first
    assert data["packing"]["packed"]["recall"]["recall@100"]["survives"] == 1.0  # four short abstracts fit
    assert Path("pipeline.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
