"""``evret evaluate`` on a pipeline (evret_core/cli/_pipeline.py), end to end on the bundled bee corpus: a
``[pipeline]`` table in ``--config`` or a ``--pipeline`` file, the terminal table, ``--output`` JSON and
``--report`` Markdown/HTML agreeing, and every bad input one line and exit 2 before anything is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main

REPO = Path(__file__).resolve().parents[2]

STAGES = """
[[pipeline.stages]]
name = "bm25"
retriever = { name = "bm25", options = { corpus = "corpus.jsonl" } }

[[pipeline.stages]]
name = "plain"
retriever = { name = "bm25", options = { corpus = "corpus.jsonl", stemmer = "" } }

[[pipeline.stages]]
name = "rrf"
fuse = ["bm25", "plain"]

[[pipeline.stages]]
name = "packed"
pack = 150
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("corpus.jsonl", "dataset.jsonl"):
        (tmp_path / name).write_text((REPO / "examples" / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "eval.toml").write_text('dataset = "dataset.jsonl"\nmetrics = ["ndcg@5", "recall@10"]\n'
                                        'judge = "token-overlap"\nn_resamples = 100\n' + STAGES, encoding="utf-8")
    return tmp_path


def test_a_pipeline_in_the_config_file_end_to_end(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, md, page = folder / "out.json", folder / "report.md", folder / "report.html"
    assert main(["evaluate", "--config", str(folder / "eval.toml"), "--output", str(out), "--report", str(md),
                 "--no-progress"]) == 0
    terminal = capsys.readouterr().out
    assert main(["evaluate", "--config", str(folder / "eval.toml"), "--report", str(page), "--no-progress"]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [s["name"] for s in data["stages"]] == ["bm25", "plain", "rrf", "packed"]
    assert [(c["over"], c["stage"]) for c in data["comparisons"]][::2] == [("bm25", "rrf"), ("plain", "rrf"),
                                                                           ("rrf", "packed")]
    assert data["judging"]["judge"] == "token-overlap" and data["judging"]["distinct_contexts"] > 0
    assert "a pipeline of 4 stages" in terminal and "What each stage added" in terminal
    for stage in data["stages"]:
        low, high = stage["intervals"]["ndcg@5"]
        cell = f"{stage['scores']['ndcg@5']:.3f} [{low:.3f}, {high:.3f}]"
        for text in (terminal, md.read_text(encoding="utf-8"), page.read_text(encoding="utf-8")):
            assert cell in text
    for c in data["comparisons"]:
        cell = f"{c['delta']:+.3f} [{c['interval'][0]:+.3f}, {c['interval'][1]:+.3f}]"
        assert cell in terminal and cell in md.read_text(encoding="utf-8") and cell in page.read_text(encoding="utf-8")


def test_a_pipeline_file_gives_the_same_run(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "pipeline.toml").write_text(STAGES.replace("[[pipeline.stages]]", "[[stages]]"), encoding="utf-8")
    one, two = folder / "one.json", folder / "two.json"
    assert main(["evaluate", "--config", str(folder / "eval.toml"), "--output", str(one), "--no-progress"]) == 0
    assert main(["evaluate", "--dataset", str(folder / "dataset.jsonl"), "--pipeline", str(folder / "pipeline.toml"),
                 "--metric", "ndcg@5", "--metric", "recall@10", "--judge", "token-overlap", "--resamples", "100",
                 "--output", str(two), "--no-progress"]) == 0
    first, second = (json.loads(p.read_text(encoding="utf-8")) for p in (one, two))
    first.pop("timing"), second.pop("timing")
    assert first == second


@pytest.mark.parametrize(("extra", "edit", "message"), [
    ([], ("pack = 150", "pack = 0"), "eval.toml [pipeline] stages[3] ('packed'): option 'pack' is the token budget"),
    ([], ('fuse = ["bm25", "plain"]', 'fuse = ["bm25", "plian"]'),
     "stages[2] ('rrf'): option 'fuse' must name an earlier stage, got 'plian' (did you mean plain?)"),
    ([], ("stemmer", "stemer"), "option 'stemer' (from"),
    ([], ('judge = "token-overlap"', 'judge = "token-overlap"\n[retriever]\nname = "bm25"'),
     "option 'retriever': a pipeline's retrievers are its stages"),
    (["--retriever", "bm25"], None, "--retriever goes without a pipeline"),
    (["--dry-run"], None, "--dry-run does not go with a pipeline"),
    (["--report", "r.txt"], None, "--report r.txt: the suffix says the format"),
    (["--report", "{dataset}"], None, "is also an input of this run"),
    (["--output", "{corpus}"], None, "is also an input of this run"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_work(
        folder: Path, capsys: pytest.CaptureFixture[str], extra: list[str], edit: tuple[str, str] | None,
        message: str) -> None:
    config = folder / "eval.toml"
    if edit:
        config.write_text(config.read_text(encoding="utf-8").replace(*edit), encoding="utf-8")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    argv = [a.format(dataset=folder / "dataset.jsonl", corpus=folder / "corpus.jsonl") for a in extra]
    assert main(["evaluate", "--config", str(config), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_report_goes_with_a_pipeline(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--dataset", str(folder / "dataset.jsonl"), "--retriever", "bm25", "--retriever-option",
                 f"corpus={folder / 'corpus.jsonl'}", "--metric", "recall@5", "--report", "r.md"]) == 2
    assert "--report goes with a pipeline" in capsys.readouterr().err
