"""``evret evaluate`` warns when the id-labelled queries' top 10 is mostly unjudged, unless the qrels list only
relevant documents (BEIR's convention: everything else is non-relevant); text-labelled queries have no holes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main


def files(tmp_path: Path, grades: dict[str, float]) -> tuple[Path, Path]:
    """q1 judged by ``grades``; its run ranks d1 then u1..u9 (unjudged) then d2."""
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"query_id": "q1", "query": "anything", "relevant_doc_ids": grades}) + "\n",
                    encoding="utf-8")
    run = tmp_path / "run.jsonl"
    docs = ["d1", *(f"u{i}" for i in range(1, 10)), "d2"]
    run.write_text("".join(json.dumps({"query_id": "q1", "doc_id": d, "score": 20 - i}) + "\n"
                           for i, d in enumerate(docs)), encoding="utf-8")
    return data, run


@pytest.mark.parametrize(("grades", "warned"), [({"d1": 1, "d2": 0}, True), ({"d1": 1, "d2": 1}, False)])
def test_mostly_unjudged_top_10(grades: dict[str, float], warned: bool, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    data, run = files(tmp_path, grades)
    assert main(["evaluate", "--dataset", str(data), "--run", str(run), "--metric", "ndcg@10", "--no-progress"]) == 0
    err = capsys.readouterr().err
    line = "warning: 90% of the run's top 10 documents are unjudged (unjudged@10"
    assert (line in err) is warned, err
