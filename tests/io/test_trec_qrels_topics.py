"""Writing TREC qrels (read back by read_qrels as written) and reading TREC topics TSV files."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.trec import read_qrels, read_topics, write_qrels


def test_qrels_round_trip_through_read_qrels(tmp_path: Path) -> None:
    qrels = {"q2": {"d9": 3.0, "d1": 0.0}, "q10": {"x#1": 2, "d/2": 0.5}}
    write_qrels(tmp_path / "j.qrels", qrels)
    assert (tmp_path / "j.qrels").read_text(encoding="utf-8") == "q2 0 d9 3\nq2 0 d1 0\nq10 0 x#1 2\nq10 0 d/2 0.5\n"
    assert read_qrels(tmp_path / "j.qrels") == {"q2": {"d9": 3.0, "d1": 0.0}, "q10": {"x#1": 2.0, "d/2": 0.5}}


@pytest.mark.parametrize(("qrels", "message"), [
    ({"q 1": {"d": 1}}, "query id 'q 1'"),
    ({"q": {"d\t2": 1}}, "document id 'd\\t2'"),
    ({"q": {"d": float("nan")}}, "grade nan is not a finite number"),
    ({"q": {"d": True}}, "grade True"),
])
def test_bad_qrels_are_refused_before_writing(tmp_path: Path, qrels: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(EvretError, match="write_qrels") as err:
        write_qrels(tmp_path / "j.qrels", qrels)
    assert message in str(err.value) and not (tmp_path / "j.qrels").exists()


def test_topics_are_read_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "queries.tsv"
    path.write_text("\ufeff1037798\twho is robert gray\n\n19335\tanthropological definition of environment \n",
                    encoding="utf-8")
    assert read_topics(path) == {"1037798": "who is robert gray", "19335": "anthropological definition of environment"}


@pytest.mark.parametrize(("content", "message"), [
    ("1\tfirst\n2 second\n", ":2: expected query_id<TAB>text, found no tab"),
    ("1\tfirst\n\tsecond\n", ":2: the query id '' is empty"),
    ("1\tfirst\n2\t  \n", ":2: query 2 has no text"),
    ("1\tfirst\n\n1\tagain\n", ":3: duplicate query id '1' (first on line 1)"),
    ("\n\n", ": the topics file has no queries"),
])
def test_bad_topics_name_the_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "queries.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvretError) as err:
        read_topics(path)
    assert str(err.value).startswith(f"{path}{message}")


def test_topics_that_are_not_utf8_or_missing(tmp_path: Path) -> None:
    (tmp_path / "bad.tsv").write_bytes(b"1\tcaf\xe9\n")
    with pytest.raises(EvretError, match=r"bad.tsv:1:6: not UTF-8"):
        read_topics(tmp_path / "bad.tsv")
    with pytest.raises(EvretError, match="no such topics file"):
        read_topics(tmp_path / "none.tsv")
