"""Results as tables: per query and per judgment, CSV without pandas and DataFrames with it."""

from __future__ import annotations

import csv
import io

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.results.frames import columns, to_csv, to_pandas


def test_query_rows_hold_every_metric_and_tag(good_results) -> None:  # type: ignore[no-untyped-def]
    table = list(csv.DictReader(io.StringIO(to_csv(good_results))))
    assert len(table) == good_results.num_queries
    row = next(r for r in table if r["query_id"] == "q01")
    for metric in good_results.metrics:
        assert float(row[metric]) == pytest.approx(good_results.per_query["q01"].scores[metric])
    assert row["tag:type"] == "factoid" and row["tag:topic"] == "biology"


def test_judgment_rows_follow_the_ranking_and_gains(good_results) -> None:  # type: ignore[no-untyped-def]
    table = list(csv.DictReader(io.StringIO(to_csv(good_results, level="judgment"))))
    q01 = [r for r in table if r["query_id"] == "q01"]
    qr = good_results.per_query["q01"]
    assert [r["doc_id"] for r in q01] == [j.doc_id for j in qr.judgments]
    assert [float(r["relevant"]) for r in q01] == qr.gains
    assert sum(float(r["relevant"]) > 0 for r in table) > 0


def test_hostile_text_round_trips_through_csv(good_results) -> None:  # type: ignore[no-untyped-def]
    results = good_results.model_copy(deep=True)
    results.per_query = dict(results.per_query.items())  # views are built on demand: keep these to edit
    results.per_query["q01"].query_text = 'a "quoted", multi\nline, =cmd() text'
    [row] = [r for r in csv.DictReader(io.StringIO(to_csv(results))) if r["query_id"] == "q01"]
    assert row["query_text"] == 'a "quoted", multi\nline, =cmd() text'


def test_to_pandas_matches_the_csv_rows(good_results) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("pandas")
    frame = good_results.to_pandas()
    assert frame.equals(to_pandas(good_results))
    assert list(frame.columns) == columns(good_results)
    assert frame.set_index("query_id").loc["q01", "mrr@10"] == good_results.per_query["q01"].scores["mrr@10"]
    judgments = to_pandas(good_results, level="judgment")
    assert len(judgments) == sum(len(q.judgments) for q in good_results.per_query.values())


def test_unknown_level_is_an_error(good_results) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EvretError, match="unknown table level 'doc'"):
        to_csv(good_results, level="doc")


def test_evret_report_csv_writes_every_run(tmp_path, good_results, bad_results, capsys) -> None:  # type: ignore[no-untyped-def]
    from evret_core.cli import main

    good_results.to_json(tmp_path / "good.json")
    bad_results.to_json(tmp_path / "bad.json")
    assert main(["report", str(tmp_path / "good.json"), str(tmp_path / "bad.json"), "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(table) == 2 * good_results.num_queries
    assert {r["run"] for r in table} == {"good", "bad"}
    out = tmp_path / "judgments.csv"
    assert main(["report", str(tmp_path / "good.json"), "--format", "csv", "--level", "judgment",
                 "--output", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == sum(len(q.judgments) for q in good_results.per_query.values())
