"""``evret trec`` and unjudged documents: unjudged@k printed as trec_eval prints unj_k, and the warning on stderr
when the run's top 10 is mostly unjudged (mean unjudged@10 > 0.5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.testing.shared_data import shared_data

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"


def write_run(path: Path, unjudged: int) -> Path:
    """q1: d1, then ``unjudged`` unjudged documents, then d2; q2: d3 alone (judged)."""
    lines = [("q1", "d1")] + [("q1", f"x{i}") for i in range(unjudged)] + [("q1", "d2"), ("q2", "d3")]
    path.write_text("".join(f"{q} Q0 {d} {i + 1} {100 - i} tag\n" for i, (q, d) in enumerate(lines)),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize(("unjudged", "warned"), [(10, True), (9, False)])
def test_warning_when_the_top_10_is_mostly_unjudged(unjudged: int, warned: bool, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """q1's top 10 is d1 and 9 unjudged documents (0.9). Quiet: q2 is judged too, its top 10 has none unjudged, so
    the mean is 0.45. Loud: the qrels judge q1 only, so q2 is not scored and the mean is 0.9."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS if not warned else "q1 0 d1 1\nq1 0 d2 0\n", encoding="utf-8")
    run = write_run(tmp_path / "run.txt", unjudged)
    assert main(["trec", str(qrels), str(run), "-m", "ndcg@10"]) == 0
    out, err = capsys.readouterr()
    assert "unjudged@10" not in out  # computed for the warning, not printed unless asked for
    if warned:
        assert err.startswith("warning: 90% of the run's top 10 documents are unjudged (unjudged@10")
    else:
        assert err == ""


def test_unjudged_rows_match_trec_eval(capsys: pytest.CaptureFixture[str]) -> None:
    base = shared_data(what="trec_eval's test suite") / "datasets" / "trec_eval"
    assert main(["trec", str(base / "qrels.comment.test"), str(base / "results.comment.test"), "-q",
                 "-m", "unjudged@5", "-m", "unjudged@10", "-m", "unjudged@20"]) == 0
    rows = {(q, m.strip()): v for m, q, v in (line.split("\t") for line in capsys.readouterr().out.splitlines())}
    expected = [line.split("\t") for line in (base / "out.comment.test.aq").read_text().splitlines()
                if line.startswith("unj_")]
    assert len(expected) == 96
    for measure, qid, value in expected:
        assert rows[(qid.strip(), f"unjudged@{measure.strip()[4:]}")] == value.strip(), (measure, qid)
