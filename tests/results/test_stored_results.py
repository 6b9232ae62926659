"""Results files read as columns (red team 2026-11-28, F13 LG3/LG3b: `evret report` of a 552 MB results file
took 4.66 GB, `evret compare` of two 7.8 GB): the per-query records are decoded one at a time into columns and the
file's bytes, so a file is held in about its own size, a record is built only when it is looked up, and every
reader (checks, slices, curves, drill-down, comparisons) gives what the whole-file reader gave."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample
from evret_core.io.jsonio import read_document
from evret_core.report import build_report_data
from evret_core.report import drilldown as drilldown_module
from evret_core.report.api import compare, make_report
from evret_core.report.drilldown import STRING_CAP, _build, _fit, drilldown_data
from evret_core.results import stored
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.files import kind_of, load_results
from evret_core.results.per_query import QueryResult
from evret_core.results.stored import StoredQueries, record_validator

WORDS = ["alpha", "beta", "gamma", "delta", "éclair", "naïve", "日本", "sigma", "tau", "omega"]


def _dataset(n: int, rng: random.Random) -> EvaluationDataset:
    queries = []
    for i in range(n):
        tags = {"topic": rng.choice(["a", "b", "c"])} if i % 3 else {}
        if i % 2:
            queries.append(QueryExample(query_id=f"q{i:04d}", query_text=f"question {i} {rng.choice(WORDS)}",
                                        expected_answers=[rng.choice(WORDS), rng.choice(WORDS)], tags=tags))
        else:
            queries.append(QueryExample(query_id=f"q{i:04d}", query_text=f"question {i}", tags=tags,
                                        relevant_doc_ids={f"d{rng.randrange(30)}": float(rng.randrange(1, 3))
                                                          for _ in range(3)}))
    return EvaluationDataset(name="mixed", queries=queries)


def _run(n: int = 60, matching: str = "first_match", seed: int = 0) -> EvaluationResults:
    """Ids- and text-labelled queries, tags on some, non-ASCII texts, ids retrieved twice."""
    rng = random.Random(seed)
    dataset = _dataset(n, rng)
    docs = {q.query_text: [{"doc_id": f"d{rng.randrange(30)}", "score": 10.0 - k,
                            "text": " ".join(rng.choice(WORDS) for _ in range(8))} for k in range(12)]
            for q in dataset.queries}
    return Evaluator(lambda query, k: docs[query][:k], ["recall@10", "ndcg@10", "mrr@10"], judge="contains",
                     matching=matching, n_resamples=50, seed=0, min_slice_size=2).evaluate(dataset)


def _whole(path: Path) -> EvaluationResults:
    """The file read as every other document is: parsed whole, then validated and checked."""
    data, source = read_document(path)
    results = kind_of(data).from_document(data, source)
    assert isinstance(results, EvaluationResults)
    return results


def _same_error(path: Path) -> str:
    with pytest.raises(EvretError) as whole:
        _whole(path)
    with pytest.raises(EvretError) as columns:
        load_results(path)
    assert str(columns.value) == str(whole.value)
    return str(columns.value)


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stored") / "run.json"
    _run().to_json(path)
    return path


def test_a_file_is_held_in_about_its_size_and_no_record_is_built(run_file: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """LG3: the whole-file reader held about 7x the file (json's objects, then the models); the bytes and the
    columns hold a little more than 1x. Windows of 256 KB here, so that the one being decoded is small beside the
    file, as 8 MB windows are beside a 500 MB file."""
    big = run_file.parent / "big.json"
    _run(n=600).to_json(big)
    size = big.stat().st_size
    load_results(run_file)  # what is made once per process (the record validator, the metrics' ranges)
    monkeypatch.setattr(stored, "WINDOW", 1 << 18)
    built: list[str] = []
    original = QueryResult.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[QueryResult], obj: Any, **kwargs: Any) -> QueryResult:
        built.append(obj.get("query_id") if isinstance(obj, dict) else "?")
        return original(cls, obj, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(QueryResult, "model_validate", classmethod(counting))
    tracemalloc.start()
    try:
        results = load_results(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(results.per_query, StoredQueries)
    assert peak < 1.6 * size, (peak, size)
    assert built == []  # nothing built to load, check, or score
    assert results.per_query_scores()["q0007"] == _whole(big).per_query["q0007"].scores
    assert results.per_query["q0007"] == _whole(big).per_query["q0007"] and built == ["q0007"]


def test_a_loaded_file_equals_the_whole_file_reading(run_file: Path) -> None:
    loaded, whole = load_results(run_file), _whole(run_file)
    assert loaded == whole and loaded.model_dump() == whole.model_dump()
    assert loaded.to_json() == whole.to_json()  # written back the same
    assert list(loaded.per_query) == list(whole.per_query) and len(loaded.per_query) == 60
    assert "q0003" in loaded.per_query and "nope" not in loaded.per_query
    assert loaded.per_query_scores() == whole.per_query_scores()
    ids, columns, tags = loaded.score_columns()
    ids2, columns2, tags2 = whole.score_columns()
    assert ids == ids2 and tags == tags2 and all((columns[m] == columns2[m]).all() for m in columns)


@pytest.mark.parametrize("matching", ["first_match", "any_match"])
def test_curves_from_the_columns_equal_the_records(tmp_path: Path, matching: str) -> None:
    path = tmp_path / "run.json"
    results = _run(n=80, matching=matching, seed=3)
    results.to_json(path)
    loaded = load_results(path)
    assert isinstance(loaded, EvaluationResults)
    assert loaded.metric_curves() == _whole(path).metric_curves() == results.metric_curves()
    assert loaded.metric_curves(max_k=4) == results.metric_curves(max_k=4)


@pytest.mark.parametrize("indent", [2, None])
def test_small_windows_and_text_beyond_ascii_read_the_same(tmp_path: Path, indent: int | None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Records cut across windows (64 bytes each here) by multi-byte characters and numbers read as whole."""
    path = tmp_path / "run.json"
    results = _run(n=30, seed=5)
    results.to_json(path, indent=indent)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"question 1 ', '"questi\\u00f6n 1 ').replace("éclair", "\u00e9clair \u2603"),
                    encoding="utf-8")  # raw characters beyond ASCII as well as escapes
    monkeypatch.setattr(stored, "WINDOW", 64)
    assert load_results(path) == _whole(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # a byte order mark, which the reader drops
    assert load_results(path) == _whole(path)


def _edit(run_file: Path, tmp_path: Path, edit: Callable[[str], str]) -> Path:
    path = tmp_path / "edited.json"
    path.write_text(edit(run_file.read_text(encoding="utf-8")), encoding="utf-8")
    return path


def _record(data: dict[str, Any], qid: str) -> dict[str, Any]:
    return data["per_query"][qid]  # type: ignore[no-any-return]


def _json_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    def edit(text: str) -> str:
        data = json.loads(text)
        change(data)
        return json.dumps(data, indent=2)
    return edit


@pytest.mark.parametrize("edit", [
    lambda t: t[: len(t) // 2],  # cut short
    lambda t: t.replace('"labelled_by": "ids"', '"labelled_by": ids', 1),  # not JSON
    lambda t: t + "{}",  # something after the document
    lambda t: t.replace('"rank": 3', '"rank": "third"', 1),  # a record that fails validation
    _json_edit(lambda d: _record(d, "q0005")["scores"].update({"recall@10": "x"})),
    lambda t: t.replace('"query_text": "question 0"', '"query_text": "\\ud800"', 1),  # a lone surrogate
    lambda t: t.replace('"per_query": {', '"per_query": [', 1),
    lambda t: t.replace('"schema_version": 2', '"schema_version": 9', 1),
    lambda t: t.replace('"metrics": [', '"metrics": 5, "x": [', 1),
    lambda t: t.replace('"per_query": {', '"per_query": ' + "[" * 3000 + "]" * 3000 + ', "y": {', 1),
    lambda t: t.replace('"tags": {}', '"tags": {"a": ' + "[" * 3000 + "]" * 3000 + "}", 1),
    _json_edit(lambda d: _record(d, "q0004").update(query_id="q0006")),  # the key holds another query's record
    _json_edit(lambda d: [_record(d, "q0006")["scores"].update({"ndcg@10": math.nan}),
                          _record(d, "q0008")["scores"].update({"mrr@10": 7.0})]),
    _json_edit(lambda d: [_record(d, "q0006")["scores"].update({"ndcg@10": 1.5}),
                          _record(d, "q0004").update(query_id="q0002")]),
    _json_edit(lambda d: _record(d, "q0010")["scores"].update({"mrr@10": -math.inf, "recall@10": math.nan})),
    _json_edit(lambda d: d["scores"].update({"mrr@10": 0.123})),
    _json_edit(lambda d: _record(d, "q0001")["tags"].update(topic="zzz")),
])
def test_a_damaged_file_gives_the_whole_readers_error(run_file: Path, tmp_path: Path,
                                                      edit: Callable[[str], str]) -> None:
    """Whatever the column reader leaves to the whole-file reader, or checks on the columns, is refused with the
    very error the whole-file reader gives (the first problem in file order)."""
    message = _same_error(_edit(run_file, tmp_path, edit))
    assert message.startswith(str(tmp_path / "edited.json"))


@pytest.mark.parametrize("edit", [
    lambda t: t.replace('"per_query": {', '"per_query": {"q0000": {}, ', 1),  # a repeated key: the last wins
    lambda t: t.replace('"metrics": [', '"metrics": 5, "metrics": [', 1),
    lambda t: t.replace('"per_query": {', '"per_query": {"q0001": {"query_id": 1}, ', 1),
    lambda t: t.replace("\n", "\r\n"),
    lambda t: json.dumps(json.loads(t), separators=(",", ":"), ensure_ascii=False),
])
def test_files_the_column_reader_leaves_load_as_before(run_file: Path, tmp_path: Path,
                                                        edit: Callable[[str], str]) -> None:
    path = _edit(run_file, tmp_path, edit)
    assert load_results(path) == _whole(path)


def test_not_a_file_and_other_kinds_are_refused_as_before(run_file: Path, tmp_path: Path) -> None:
    with pytest.raises(EvretError, match="no such results file"):
        load_results(tmp_path / "missing.json")
    with pytest.raises(EvretError, match="is a folder"):
        load_results(tmp_path)
    bad = tmp_path / "latin1.json"
    bad.write_bytes(run_file.read_bytes().replace(b'"question 0"', b'"question \xe9"', 1))
    _same_error(bad)
    with pytest.raises(EvretError, match="is a retrieval results file; rag results are needed here"):
        load_results(run_file, kind="rag")
    text = run_file.read_text(encoding="utf-8")
    assert load_results(text) == _whole(run_file)  # the JSON text itself
    assert EvaluationResults.from_json(text) == _whole(run_file)


def test_the_record_validator_is_the_models(run_file: Path) -> None:
    """A record is validated without building a QueryResult, by a validator made from its fields: what one
    accepts the other accepts, with the same values."""
    data = json.loads(run_file.read_text(encoding="utf-8"))
    validate = record_validator().validate_python
    records: list[Any] = list(data["per_query"].values())[:5]
    records += [{"query_id": "x", "query_text": "t", "scores": {"m": 1}, "retrieved_ids": []},
                {"query_id": "x", "query_text": "t", "scores": {"m": "0.5"}, "retrieved_ids": [], "extra": 1,
                 "judgments": [{"rank": "2", "doc_id": "d"}]},
                {"query_id": "x", "query_text": "t", "scores": {}, "retrieved_ids": [], "judgments": [{"rank": 1}]},
                {"query_id": "x", "query_text": "t", "scores": {"m": None}, "retrieved_ids": []},
                {"query_id": 5, "query_text": "t", "scores": {}, "retrieved_ids": []},
                {"query_id": "x", "query_text": "t", "scores": {}, "retrieved_ids": [], "tags": {"a": 1}},
                {"query_text": "t", "scores": {}, "retrieved_ids": []}]
    for record in records:
        try:
            model = QueryResult.model_validate(record)
        except Exception:
            with pytest.raises(Exception):  # noqa: B017 - both refuse, whatever the error's class
                validate(record)
            continue
        assert QueryResult.model_validate(validate(record)) == model


def test_the_drill_down_builds_only_the_queries_that_can_fit(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A page that holds a fraction of the queries builds the records of about that many, and the drill-down is
    the one the plain search over every query gives."""
    paths = []
    for seed in (1, 2):
        paths.append(tmp_path / f"run{seed}.json")
        _run(n=400, seed=seed).to_json(paths[-1])
    runs = {p.stem: load_results(p) for p in paths}
    data = build_report_data(runs)  # type: ignore[arg-type]
    budget = 60_000
    built: list[int] = []
    at = StoredQueries.at

    def counting(self: StoredQueries, row: int) -> QueryResult:
        built.append(row)
        return at(self, row)

    monkeypatch.setattr(StoredQueries, "at", counting)
    value = drilldown_data(data, budget=budget)
    assert 0 < len(value["queries"]) < 400 and value["total"] == 400
    assert len(built) <= 2 * 3 * len(value["queries"])  # two runs; the bound is within a few times the fit
    monkeypatch.setattr(drilldown_module, "_fitting_bound", lambda data, order, queries, budget: len(order) + 1)
    assert drilldown_data(data, budget=budget) == _plain_search(data, budget)
    assert drilldown_data(data, budget=10_000_000) == _plain_search(data, 10_000_000)


def _plain_search(data: Any, budget: int) -> dict[str, Any]:
    """The drill-down as built before the bound: every query built for every try."""
    runs = list(data.runs.values())
    order = list(runs[0].per_query)
    order += [q for r in runs[1:] for q in r.per_query if q not in set(order)]
    value, full = _build(data, order, None)
    if not _fit(value, full, budget):
        value, full = _build(data, order, STRING_CAP)
        if not _fit(value, full, budget):
            low, high = 0, len(order) - 1
            while low < high:
                mid = (low + high + 1) // 2
                trial, texts = _build(data, order[:mid], STRING_CAP)
                low, high = (mid, high) if _fit(trial, texts, budget) else (low, mid - 1)
            value, full = _build(data, order[:low], STRING_CAP)
            _fit(value, full, budget)
    value["total"] = len(order)
    return value


def test_reports_and_comparisons_of_files_equal_those_of_the_runs(tmp_path: Path) -> None:
    runs = {"a": _run(n=50, seed=7), "b": _run(n=50, seed=8)}
    paths = []
    for name, results in runs.items():
        paths.append(tmp_path / f"{name}.json")
        results.to_json(paths[-1])
    read = {p.stem: load_results(p) for p in paths}
    whole = {p.stem: _whole(p) for p in paths}
    for form in ("html", "markdown", "latex"):
        assert make_report(read, format=form) == make_report(whole, format=form)
    assert compare(read).to_dict() == compare(whole).to_dict()
