"""The progress bar draws on a terminal (a real pseudo-terminal here) and stays silent otherwise."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import textwrap

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.progress import terminal_progress


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
