"""`evret calibrate`: plan a sample from a results file, measure judges on labels, save a threshold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evret_core.calibration.save_threshold import save_threshold
from evret_core.cli import main
from evret_core.contracts.errors import EvretError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def results_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "results.json"
    assert main(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--output", str(out)]) == 0
    return out


def test_plan_then_label_then_calibrate(results_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.jsonl"
    assert main(["calibrate", "--plan", "20", "--results", str(results_file), "--judge", "token-overlap",
                 "--seed", "3", "-o", str(plan)]) == 0
    rows = [json.loads(line) for line in plan.read_text().splitlines()]
    assert len(rows) == 20 and all(r["label"] is None for r in rows)
    strata = {r["stratum"] for r in rows}
    assert len(strata) >= 5  # spread over the score range, not 20 clear negatives
    again = tmp_path / "again.jsonl"
    main(["calibrate", "--plan", "20", "--results", str(results_file), "--seed", "3", "-o", str(again)])
    assert again.read_text() == plan.read_text()  # seeded
    # a person labels: here, the retrieved passage holds the expected answer when it is the gold passage
    for r in rows:
        r["label"] = r["score"] >= 0.45
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["calibrate", "--labels", str(labels), "--judge", "token-overlap", "--judge", "exact",
                 "--judge-option", "token-overlap:min_tokens=1", "--json", "--by", "kappa"]) == 0
    document = json.loads(capsys.readouterr().out)
    overlap, exact = document["judges"]
    assert overlap["config"]["min_tokens"] == 1
    assert overlap["best"]["kappa"] == 1.0 and overlap["best"]["threshold"] >= 0.45
    assert exact["sweep"] == [] and exact["best"] is None
    assert document["labels"]["labelled"] == 20
    assert main(["calibrate", "--labels", str(labels)]) == 0
    table = capsys.readouterr().out
    assert "always yes" in table and "best by f1" in table


def test_labels_derived_from_qrels(results_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(results_file.read_text())
    qrels = tmp_path / "qrels.tsv"
    lines = ["query-id\tcorpus-id\tscore"]
    for qid, qr in data["per_query"].items():
        lines.append(f"{qid}\t{qr['judgments'][0]['doc_id']}\t1")  # the top document is the relevant one
    qrels.write_text("\n".join(lines) + "\n")
    assert main(["calibrate", "--results", str(results_file), "--qrels", str(qrels), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["labels"]["positive"] == len(data["per_query"])
    assert document["judges"][0]["agreement"]["n"] == sum(len(q["judgments"]) for q in data["per_query"].values())


@pytest.mark.parametrize(("argv", "message"), [
    (["calibrate"], "needs --labels"),
    (["calibrate", "--plan", "0", "--results", "R", "-o", "-"], "no such results file"),
    (["calibrate", "--labels", "nope.jsonl"], "nope.jsonl: no such labels file"),
    (["calibrate", "--judge-option", "semantic:threshold=0.5", "--labels", "x"], "not one of the --judge names"),
])
def test_user_errors_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_plan_size_must_be_positive(results_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--plan", "0", "--results", str(results_file), "-o", "-"]) == 2
    assert "positive integer" in capsys.readouterr().err


def test_save_threshold_keeps_comments_and_other_settings(tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text('# my run\ndataset = "d.jsonl"\n\n[judge]\nname = "semantic"  # tuned\nthreshold = 0.75\n'
                      '\n[retriever]\nname = "bm25"\n')
    save_threshold(config, "semantic", "threshold", 0.41)
    text = config.read_text()
    assert "# my run" in text and "# tuned" in text
    data = tomllib.loads(text)
    assert data["judge"] == {"name": "semantic", "threshold": 0.41} and data["retriever"] == {"name": "bm25"}
    short = tmp_path / "short.toml"
    short.write_text('judge = "token-overlap"\nmetrics = ["ndcg@10"]\n')
    save_threshold(short, "token-overlap", "overlap_ratio", 0.5)
    assert tomllib.loads(short.read_text())["judge"] == {"name": "token-overlap", "overlap_ratio": 0.5}
    with pytest.raises(EvretError, match="is for 'semantic', not 'token-overlap'"):
        save_threshold(config, "token-overlap", "overlap_ratio", 0.5)
    with pytest.raises(EvretError, match="finite"):
        save_threshold(config, "semantic", "threshold", float("nan"))
    fresh = tmp_path / "new.toml"
    save_threshold(fresh, "semantic", "threshold", 0.3)
    assert tomllib.loads(fresh.read_text()) == {"judge": {"name": "semantic", "threshold": 0.3}}


def test_ppi_from_a_truth_file(results_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(results_file.read_text())
    keep = sorted(data["per_query"])[:4]
    truth = dict(data, per_query={q: dict(data["per_query"][q], scores={"hit_rate@1": 1.0}) for q in keep},
                 scores={"hit_rate@1": 1.0}, metrics=["hit_rate@1"], intervals={}, slices={})
    truth_file = tmp_path / "truth.json"
    truth_file.write_text(json.dumps(truth))
    out = tmp_path / "corrected.json"
    capsys.readouterr()
    assert main(["calibrate", "--results", str(results_file), "--ppi-truth", str(truth_file), "-o", str(out)]) == 0
    assert "hit_rate@1" in capsys.readouterr().out
    corrected = json.loads(out.read_text())
    entry = corrected["prediction_powered"]["hit_rate@1"]
    judged = [q["scores"]["hit_rate@1"] for q in data["per_query"].values()]
    rectifier = sum(1.0 - data["per_query"][q]["scores"]["hit_rate@1"] for q in keep) / 4
    assert entry["estimate"] == pytest.approx(sum(judged) / len(judged) + rectifier)
    assert entry["n_labelled"] == 4 and entry["interval"][0] <= entry["estimate"] <= entry["interval"][1]
    assert list(corrected["prediction_powered"]) == ["hit_rate@1"]  # only metrics with true values



def test_calx1_a_truth_scored_on_another_run_is_refused(results_file: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """CALX1 (red team 2026-11-28): the truth is another run (BM25 with k1=5, b=0 ranks most queries differently):
    its rectifier would measure another ranking. Refused naming the file and the queries; nothing written."""
    from evret_core.calibration import add_prediction_powered
    from evret_core.results.evaluation import EvaluationResults

    other = tmp_path / "other_run.json"
    assert main(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--retriever-option", "k1=5",
                 "--retriever-option", "b=0", "--output", str(other), "--no-progress"]) == 0
    judged, truth = EvaluationResults.from_json(results_file), EvaluationResults.from_json(other)
    differing = [q for q in judged.per_query if judged.per_query[q].retrieved_ids != truth.per_query[q].retrieved_ids]
    assert 0 < len(differing) < len(judged.per_query)
    mixed = tmp_path / "ppi_mixed.json"
    capsys.readouterr()
    assert main(["calibrate", "--results", str(results_file), "--ppi-truth", str(other), "-o", str(mixed)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"evret: error: --ppi-truth {other}: prediction-powered inference: the truth ranks other documents than the "
        f"judged run for {len(differing)} of 22 labelled queries ({differing[0]!r}, ")
    assert not mixed.exists()
    with pytest.raises(EvretError, match=f"for {len(differing)} of 22 labelled queries"):
        add_prediction_powered(judged, truth)
    assert judged.prediction_powered == {}
    # the same run's rankings, scored another way on a subset of its queries, are a truth
    subset = EvaluationResults.from_json(results_file)
    subset.per_query = {q: subset.per_query[q] for q in sorted(subset.per_query)[:6]}
    assert add_prediction_powered(judged, subset).prediction_powered

def test_reports_show_the_prediction_powered_interval(results_file: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A results file with prediction-powered estimates shows them in the Markdown and HTML reports and in the
    terminal summary, beside the judge-only bootstrap interval."""
    from evret_core.calibration import add_prediction_powered
    from evret_core.report.terminal import print_scores
    from evret_core.results.evaluation import EvaluationResults

    results = EvaluationResults.from_json(results_file)
    keep = sorted(results.per_query)[:4]
    add_prediction_powered(results, {q: {"hit_rate@1": 1.0} for q in keep})
    entry = results.prediction_powered["hit_rate@1"]
    corrected = tmp_path / "corrected.json"
    results.to_json(corrected)
    shown = f"{entry['estimate']:.3f} [{entry['interval'][0]:.3f}, {entry['interval'][1]:.3f}] (4 labelled)"
    markdown, html = tmp_path / "r.md", tmp_path / "r.html"
    assert main(["report", str(corrected), str(results_file), "--output", str(markdown)]) == 0
    text = markdown.read_text()
    assert "## Intervals that include judge error" in text
    assert f"| hit_rate@1 | {shown} | - |" in text  # the second run has no estimate
    assert main(["report", str(results_file), "--output", str(markdown)]) == 0
    assert "judge error" not in markdown.read_text()  # no section without estimates
    assert main(["report", str(corrected), "--format", "html", "--output", str(html)]) == 0
    assert "Intervals that include judge error" in html.read_text() and shown in html.read_text()
    print_scores(results)
    assert shown in capsys.readouterr().out


# -- issue 24 (red-team C01, C01b): a judgment labelled twice is refused, naming both lines ------------------------
def _labels_file(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


_ROWS: list[dict[str, object]] = [
    {"query_id": f"q{i}", "query": f"question {i}", "expected": f"answer {i}",
     "retrieved_text": f"a passage that {'holds' if i % 2 else 'lacks'} answer {i}", "label": bool(i % 2)}
    for i in range(8)
]


def test_a_judgment_labelled_true_and_false_names_both_lines(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _labels_file(tmp_path, [*_ROWS, dict(_ROWS[3], label=False)])
    assert main(["calibrate", "--labels", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"evret: error: {path}:9: labels the judgment of {path}:4 (query 'q3', the same expected answer "
                   f"and retrieved text) false, where {path}:4 says true; keep the right one"]


def test_every_row_twice_is_refused_with_the_count_and_the_first_repeat(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _labels_file(tmp_path, _ROWS + _ROWS)
    assert main(["calibrate", "--labels", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:9: repeats the labelled judgment of {path}:1 (8 repeated row(s) in all)" in err


def test_rows_not_yet_labelled_and_distinct_judgments_are_fine(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # the same passage for another expected answer, or a repeated row still null, is not a repeat
    rows = [*_ROWS, dict(_ROWS[0], expected="another answer"), dict(_ROWS[1], label=None),
            dict(_ROWS[1], label=None)]
    assert main(["calibrate", "--labels", str(_labels_file(tmp_path, rows)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"]["labelled"] == 9
