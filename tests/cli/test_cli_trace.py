"""``evret trace`` (issue 36): the copy-paste example of docs/traces.md, one number per quantity in the terminal,
the JSON and the report, bad input refused in one line before any work, and ``--write-traces``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core.cli import main

from .._helpers import one_error
from .._paths import REPO

EXAMPLE = REPO / "examples" / "traces"
RUN = ["trace", "--traces", str(EXAMPLE / "phoenix_spans.json"), "--trace-format", "openinference",
       "--labels", str(EXAMPLE / "labels.jsonl"), "--resamples", "100"]


def test_terminal_json_and_report_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "r.json"
    assert main([*RUN, "--output", str(output)]) == 0
    terminal = capsys.readouterr().out
    doc = json.loads(output.read_text(encoding="utf-8"))
    assert doc["schema"] == "evret-trace"
    assert doc["outcomes"] == {"right": 1, "never_found": 0, "found_not_used": 1, "lost_at_hop": 1,
                               "no_retrieval": 0, "unmeasured": 0}
    assert {t: doc["per_trace"][t]["outcome"] for t in doc["per_trace"]} == {
        "t-01": "right", "t-02": "found_not_used", "t-03": "lost_at_hop"}
    hop1 = doc["by_hop_index"]["1"]
    cell = f"{hop1['scores']['recall@5']:.3f} [{hop1['intervals']['recall@5'][0]:.3f}, " \
           f"{hop1['intervals']['recall@5'][1]:.3f}]"
    all_hops = f"all hops  6  {doc['scores']['recall@5']:.3f}"
    assert re.search(rf"hop 1 +3 +{re.escape(cell)}", terminal) and all_hops in terminal
    assert re.search(r"lost_at_hop +1 +0\.333", terminal) and re.search(r"hop 1 +1\n", terminal)
    for fmt in ("markdown", "html"):
        report = tmp_path / f"r.{fmt}"
        assert main(["report", str(output), "--format", fmt, "--output", str(report)]) == 0
        text = report.read_text(encoding="utf-8")
        assert cell in text and f"{doc['scores']['recall@5']:.3f}" in text and "lost_at_hop" in text
    assert "<script" not in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_the_evret_trace_jsonl_reads_like_the_span_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    written = tmp_path / "traces.jsonl"
    assert main([*RUN, "--write-traces", str(written), "--output", str(tmp_path / "a.json")]) == 0
    assert main(["trace", "--traces", str(written), "--resamples", "100", "--output", str(tmp_path / "b.json")]) == 0
    a, b = (json.loads((tmp_path / n).read_text(encoding="utf-8")) for n in ("a.json", "b.json"))
    assert a["per_trace"] == b["per_trace"] and a["scores"] == b["scores"] and a["queries"] == b["queries"]


def test_a_tampered_results_file_is_refused_by_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "r.json"
    assert main([*RUN, "--output", str(output)]) == 0
    doc = json.loads(output.read_text(encoding="utf-8"))
    doc["scores"]["recall@5"] = 0.99
    output.write_text(json.dumps(doc), encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(output)]) == 2
    assert f"{output}: scores.recall@5 is 0.99" in one_error(capsys)
    assert main(["report", str(output.with_name("x.json")), "--format", "latex"]) == 2


@pytest.mark.parametrize(("extra", "message"), [
    (["--metric", "recall@10", "-k", "5"], "metric recall@10 reads deeper"),
    (["--metric", "recal@5"], "recal"),
    (["--resamples", "0"], "--resamples"),
    (["--judge-option", "min_tokens=2"], "--judge-option needs --judge"),
    (["--output", str(EXAMPLE / "labels.jsonl")], "is also an input of this run"),
    (["--write-traces", str(EXAMPLE / "phoenix_spans.json")], "is also an input of this run"),
])
def test_bad_options_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], extra: list[str],
                                             message: str) -> None:
    assert main([*RUN, *extra]) == 2
    assert message in one_error(capsys)


def test_bad_files_are_one_line_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "t.jsonl"
    traces.write_text('{"trace_id": "a", "hops": []}\n{"trace_id": "b", "hops": [{"query": "q", "retrieved": '
                      '[{"text": "x"}]}]}\n', encoding="utf-8")
    assert main(["trace", "--traces", str(traces)]) == 2
    assert f"{traces}:2 hops[0].retrieved[0]: has no id" in one_error(capsys)
    assert main(["trace", "--traces", str(EXAMPLE / "labels.jsonl"), "--trace-format", "openinference"]) == 2
    assert f"{EXAMPLE / 'labels.jsonl'}:1: the span has no span_id" in one_error(capsys)


def test_dry_run_and_texts_from_the_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps({"trace_id": "a", "question": "When?", "answer": "At 9 am.",
                                  "expected_answers": ["9 am"], "hops": [{"query": "opening hours",
                                                                          "retrieved": ["d1", "d2"]}]}) + "\n",
                      encoding="utf-8")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "d1", "text": "Closed on Sunday."}\n{"_id": "d2", "text": "Opens at 9 am."}\n',
                      encoding="utf-8")
    capsys.readouterr()
    assert main(["trace", "--traces", str(traces)]) == 2
    line = one_error(capsys)
    assert "trace 'a' hops[0].retrieved[0]: document 'd1' has no text" in line and "give --corpus" in line
    assert main(["trace", "--traces", str(traces), "--corpus", str(corpus), "--dry-run"]) == 0
    assert "1 traces, 1 retrieve hops, 1 labelled (0 by ids, 1 by expected answers: up to 2 judgments)" in \
        capsys.readouterr().out
    assert main(["trace", "--traces", str(traces), "--corpus", str(corpus), "--resamples", "10"]) == 0
    assert re.search(r"right +1 +1\.000", capsys.readouterr().out)


def _docs_block(after: str, fence: str) -> str:
    text = (REPO / "docs" / "traces.md").read_text(encoding="utf-8")
    start = text.index(after)
    block = re.search(rf"```{fence}\n(.*?)```", text[start:], flags=re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_docs_example_prints_what_the_page_shows(capsys: pytest.CaptureFixture[str]) -> None:
    command = _docs_block("# Agent traces", "bash").strip()
    assert command == ("evret trace --traces examples/traces/phoenix_spans.json --trace-format openinference "
                       "--labels examples/traces/labels.jsonl")
    assert main(["trace", "--traces", str(EXAMPLE / "phoenix_spans.json"), "--trace-format", "openinference",
                 "--labels", str(EXAMPLE / "labels.jsonl")]) == 0
    assert capsys.readouterr().out == _docs_block(command, "text")


def test_the_mtrag_example_of_the_docs_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys

    from evret_core.testing.shared_data import shared_data

    shared_data("datasets", "mtrag", "PROVENANCE.md", what="MTRAG")
    pytest.importorskip("evret_bm25", reason="the MTRAG traces are retrieved with evret-bm25")
    lines = _docs_block("## From MTRAG conversations", "bash").strip().splitlines()
    assert lines == ["python benchmarks/traces.py --from-mtrag mtrag-traces.jsonl",
                     "evret trace --traces mtrag-traces.jsonl --metric recall@10 --metric ndcg@10"]
    out = tmp_path / "mtrag-traces.jsonl"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "traces.py"), "--from-mtrag", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "59 traces, 238 hops written" in proc.stderr
    assert main(["trace", "--traces", str(out), "--metric", "recall@10", "--metric", "ndcg@10",
                 "--resamples", "100"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("59 traces, 238 retrieve hops, 238 measured") and "lost_at_hop     21" in printed


def test_compare_refuses_trace_runs_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "r.json"
    assert main([*RUN, "--output", str(output)]) == 0
    capsys.readouterr()
    assert main(["compare", str(output), str(output)]) == 2
    assert "agent-trace results (evret trace) are not compared run against run" in one_error(capsys)
