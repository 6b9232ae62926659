"""``evret agreement`` on trec_eval's test files: the tables print the JSON's numbers; bad input is one line, exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.testing.shared_data import shared_data

from .._paths import REPO


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """trec_eval's qrels as the reference, a copy with every 7th grade flipped as the judged qrels, and three
    runs from its results.test: as it is, its scores negated, and its scores plus a rank-dependent wobble."""
    data = shared_data("datasets", "trec_eval", what="trec_eval's test suite")
    out = tmp_path_factory.mktemp("agreement")
    lines = (data / "qrels.test").read_text().splitlines()
    judged = [f"{q} {it} {d} {1 - int(g) if i % 7 == 0 else g}"
              for i, (q, it, d, g) in enumerate(line.split() for line in lines)]
    (out / "judged.qrels").write_text("\n".join(judged) + "\n")
    run = [line.split() for line in (data / "results.test").read_text().splitlines() if line.strip()]
    (out / "reversed.run").write_text("".join(f"{q} Q0 {d} {r} {-float(s)} rev\n" for q, _, d, r, s, _ in run))
    (out / "wobble.run").write_text("".join(f"{q} Q0 {d} {r} {float(s) + (int(r) % 13) * 0.05} wob\n"
                                            for q, _, d, r, s, _ in run))
    return {"reference": data / "qrels.test", "judged": out / "judged.qrels", "results": data / "results.test",
            "reversed": out / "reversed.run", "wobble": out / "wobble.run"}


def _args(files: dict[str, Path], *extra: str) -> list[str]:
    return ["agreement", "--reference", str(files["reference"]), "--judged", str(files["judged"]),
            "--run", str(files["results"]), "--run", str(files["reversed"]), "--run", f"wob={files['wobble']}",
            "--metric", "ndcg@10", "--metric", "ap", "--n-resamples", "200", *extra]


def _numbers(fig: dict) -> list[str]:
    shown = [f"{fig['value']:.4f}"]
    if fig.get("interval"):
        shown += [f"{v:.4f}" for v in fig["interval"]]
    return shown


def test_terminal_prints_the_json_numbers(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(files, "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(_args(files)) == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    for key, fig in [("exact_agreement", doc["exact_agreement"]), ("cohen_kappa", doc["cohen_kappa"]),
                     ("weighted_kappa.linear", doc["weighted_kappa"]["linear"]),
                     ("weighted_kappa.quadratic", doc["weighted_kappa"]["quadratic"]),
                     ("krippendorff_alpha", doc["krippendorff_alpha"]),
                     ("binary[>=1].kappa", doc["binary"]["1"]["kappa"])]:
        assert re.findall(r"-?\d+\.\d{4}", rows[key]) == _numbers(fig), key
    assert f"pairs judged in both: {doc['pairs']} over {doc['queries']} queries" in text
    matrix = doc["confusion"]["matrix"]
    assert any(line.split() == ["0", *map(str, matrix[0])] for line in text.splitlines())
    assert set(doc["leaderboard"]) == {"ndcg@10", "ap"}
    for metric, board in doc["leaderboard"].items():
        block = text.split(f"leaderboard: {metric}\n")[1].split("leaderboard:")[0]
        lines = {line.split()[0]: line for line in block.splitlines() if line.strip()}
        assert [s["run"] for s in board["systems"]] == ["results", "reversed", "wob"]
        for s in board["systems"]:
            assert lines[s["run"]].split()[1:] == [f"{s['reference']:.4f}", f"{s['judged']:.4f}"]
        for key in ("kendall_tau", "tau_ap", "spearman_rho", "swap_rate"):
            assert re.findall(r"-?\d+\.\d{4}", lines[key]) == _numbers(board[key]), (metric, key)
        assert lines["ties"].split() == ["ties", str(board["ties"])]
    assert doc["bootstrap"]["n_resamples"] == 200 and doc["relevance_level"] is None


def test_json_keys_and_grades(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(files, "--json", "--relevance-level", "1")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"pairs", "queries", "only_reference", "only_judged", "labels", "exact_agreement", "cohen_kappa",
            "weighted_kappa", "krippendorff_alpha", "binary", "confusion", "leaderboard", "bootstrap",
            "relevance_level"} <= set(doc)
    assert doc["labels"] == [0, 1] and doc["relevance_level"] == 1.0
    assert doc["pairs"] == len(files["reference"].read_text().splitlines())
    assert doc["only_reference"] == doc["only_judged"] == 0
    reversed_board = doc["leaderboard"]["ap"]["systems"][1]
    assert reversed_board["run"] == "reversed" and reversed_board["reference"] < doc["leaderboard"]["ap"]["systems"][0]["reference"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda a, f: a[:a.index("--run") + 2] + a[a.index("--metric"):], "at least 2 runs, got 1"),
    (lambda a, f: [x if x != str(f["judged"]) else str(f["judged"]) + ".missing" for x in a], "no such file"),
    (lambda a, f: a + ["--metric", "ndgc@10"], "unknown metric 'ndgc'"),
    (lambda a, f: a + ["--confidence-level", "1.5"], "--confidence-level"),
    (lambda a, f: a + ["--n-resamples", "0"], "--n-resamples"),
    (lambda a, f: a + ["--run", f"results={f['results']}"], "two runs are named 'results'"),
])
def test_bad_input_is_one_line_exit_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str], change,
                                      message: str) -> None:  # type: ignore[no-untyped-def]
    assert main(change(_args(files), files)) == 2
    err = capsys.readouterr()
    assert err.out == ""
    assert err.err.count("\n") == 1 and err.err.startswith("evret: error: ") and message in err.err


def test_unreadable_line_and_no_common_pair(files: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.qrels"
    bad.write_text("301 0 d1 1\n301 0 d2\n")
    assert main(["agreement", "--reference", str(files["reference"]), "--judged", str(bad)]) == 2
    assert capsys.readouterr().err.strip() == f"evret: error: {bad}:2: expected 4 fields (query_id iteration " \
                                              f"doc_id grade), got 3"
    other = tmp_path / "other.qrels"
    other.write_text("999 0 nowhere 1\n")
    assert main(["agreement", "--reference", str(files["reference"]), "--judged", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "share no judged pair" in err


def test_the_docs_example_prints_what_the_page_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/agreement.md's example on TREC DL 2019 (grade 3 collapsed to 2), output as the page shows it."""
    qrels = shared_data("datasets", "trec-dl-2019", "qrels-pass.txt", what="TREC DL 2019's passage qrels")
    collapsed = tmp_path / "collapsed.qrels"
    collapsed.write_text("".join(f"{q} {it} {d} {2 if g == '3' else g}\n" for q, it, d, g in
                                 (line.split() for line in qrels.read_text().splitlines() if line.strip())))
    assert main(["agreement", "--reference", str(qrels), "--judged", str(collapsed)]) == 0
    page = (REPO / "docs" / "agreement.md").read_text(encoding="utf-8")
    shown = page.split("$ evret agreement --reference qrels-pass.txt --judged collapsed.qrels\n")[1].split("```")[0]
    assert capsys.readouterr().out == shown


def test_an_undefined_figure_is_null_with_its_reason_in_both_outputs(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    same = tmp_path / "same.qrels"
    same.write_text("1 0 a 2\n1 0 b 2\n2 0 c 2\n")
    args = ["agreement", "--reference", str(same), "--judged", str(same), "--n-resamples", "50"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["krippendorff_alpha"] == {"value": None, "interval": None, "reason": doc["krippendorff_alpha"]["reason"]}
    assert doc["cohen_kappa"]["value"] == 0.0 and doc["binary"] == {} and doc["labels"] == [2]
    assert main(args) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("krippendorff_alpha"))
    assert row.split()[1:3] == ["-", "-"] and doc["krippendorff_alpha"]["reason"] in row
