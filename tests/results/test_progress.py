"""The progress bar draws on a terminal (a real pseudo-terminal here) and stays silent otherwise."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.progress import terminal_progress

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _dataset(n: int) -> EvaluationDataset:
    return EvaluationDataset(queries=[
        QueryExample(query_id=f"q{i}", query_text=f"what is item {i}", expected_answers=[f"item {i} is a thing"])
        for i in range(n)
    ])


def _retriever(query: str, k: int) -> list[dict[str, object]]:
    n = query.split()[-1]
    return [{"doc_id": f"d{n}", "text": f"item {n} is a thing"}, {"doc_id": "x", "text": "unrelated words"}]


def _drain(master: int) -> str:
    """Everything written to the terminal side of a pty, once the writer has closed it."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode()


def test_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    progress = terminal_progress(stream)
    assert not progress.enabled
    Evaluator(_retriever, ["recall@2"], progress=progress, batch_size=10).evaluate(_dataset(40))
    progress.close()
    assert stream.getvalue() == ""


def test_draws_on_a_pseudo_terminal() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=True) as tty:
            progress = terminal_progress(tty, min_interval=0.0)
            assert progress.enabled
            r = Evaluator(_retriever, ["recall@2"], progress=progress, batch_size=10).evaluate(_dataset(40))
            progress.close()
            tty.flush()
        out = _drain(master)
    finally:
        os.close(master)
    assert r.scores["recall@2"] == 1.0
    assert "retrieve  [" in out and "10/40" in out and "40/40 100%" in out
    assert "judge     [" in out and "/s" in out
    assert out.count("\r") >= 5  # redrawn in place


def test_cli_process_on_a_terminal_and_in_a_pipe(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from evret_core import EvaluationDataset, Evaluator, QueryExample
        from evret_core.progress import terminal_progress
        ds = EvaluationDataset(queries=[QueryExample(query_id=f"q{{i}}", query_text=f"q {{i}}",
                               expected_answers=[f"answer {{i}} here"]) for i in range(30)])
        p = terminal_progress(min_interval=0.0)
        Evaluator(lambda q, k: [{{"doc_id": "a", "text": "answer " + q.split()[-1] + " here"}}], ["recall@1"],
                  progress=p, batch_size=5).evaluate(ds)
        p.close()
        print("done")
    """))
    piped = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout == "done\n" and piped.stderr == ""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    stdout, _ = proc.communicate(timeout=120)
    drawn = _drain(master)
    os.close(master)
    assert proc.returncode == 0 and stdout == b"done\n"
    assert "retrieve  [" in drawn and "30/30 100%" in drawn


def _command_screen(argv: list[str], monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> tuple[int, str]:
    """``evret ARGV`` run here with standard error a terminal, steps shown after ``delay`` s (STAGE_DELAY)."""
    from evret_core.cli import main

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr("evret_core.progress.STAGE_DELAY", delay)
    monkeypatch.setattr(sys, "stderr", tty)
    status = main(argv)
    return status, tty.getvalue()


def _stages(drawn: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"(?:^|\r|\n)((?:read \S+|[a-z-]+)) +\[", drawn)))


def test_evaluate_report_and_compare_show_every_step_on_a_terminal(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """LG1b, LG3, LG3b: reading the dataset, the metrics, the statistics, writing the results; reading each results
    file, the comparison, the curves and the drill-down of a report: each a bar when it takes long enough."""
    out = tmp_path / "run.json"
    status, drawn = _command_screen(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--output", str(out)],
                                    monkeypatch)
    assert status == 0
    assert _stages(drawn) == ["read dataset.jsonl", "retrieve", "judge", "metrics", "statistics", "write"]
    assert "22/22 100%" in drawn  # the metrics and the records written, of 22 queries
    other = tmp_path / "other.json"
    other.write_bytes(out.read_bytes())
    status, drawn = _command_screen(["compare", str(out), str(other)], monkeypatch)
    assert status == 0 and _stages(drawn) == ["read run.json", "read other.json", "compare"]
    status, drawn = _command_screen(["report", str(out), str(other), "--format", "html", "--output",
                                     str(tmp_path / "r.html")], monkeypatch)
    assert status == 0
    assert _stages(drawn) == ["read run.json", "read other.json", "compare", "curves", "drill-down"]
    size = out.stat().st_size
    assert f"{size}/{size} 100%" in drawn  # the file read to its last byte
    assert _command_screen(["compare", str(out), str(other)], monkeypatch, delay=5.0) == (0, "")  # quick: nothing
