"""Live progress bars (evret_core.progress): a stage starts explicitly, its clock and bar from then; stages that
overlap get a line each; nothing is written when the stream is not a terminal. The screen is reconstructed from
what was written (carriage returns, newlines, cursor-up and clear-line escapes), as a terminal shows it; the
evaluator, `evret evaluate`, `evret compare` and `evret report` draw on a real pseudo-terminal and stay silent in a
pipe."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.progress import terminal_progress

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(written: str) -> list[str]:
    """The lines a terminal shows after ``written``."""
    lines = [""]
    row = col = 0
    for token in re.findall(r"\x1b\[(\d*)([AK])|(\r)|(\n)|([^\r\n\x1b]+)", written):
        count, code, cr, nl, text = token
        if code == "A":
            row = max(0, row - int(count or 1))
        elif code == "K":
            lines[row] = lines[row][:col]
        elif cr:
            col = 0
        elif nl:
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        else:
            lines[row] = lines[row][:col] + text + lines[row][col + len(text):]
            col += len(text)
    return [line for line in lines if line]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("evret_core.progress.time.monotonic", fake)
    return fake


def test_a_started_stage_is_drawn_at_zero_without_a_rate_and_timed_from_its_start(clock: Clock) -> None:
    out = Tty()
    progress = terminal_progress(out, min_interval=0)
    progress("judge", 0, 10)
    first = screen(out.getvalue())
    assert first == [first[0]] and " 0/10 " in first[0] and "--/s" in first[0] and "0.0/s" not in first[0]
    clock.now += 5  # work before the first item finishes (a judge's prepare) counts
    progress("judge", 4, 10)
    assert "4/10" in screen(out.getvalue())[0] and "0.8/s" in screen(out.getvalue())[0]
    clock.now += 5
    progress("judge", 10, 10)
    (last,) = screen(out.getvalue())
    assert "10/10 100% 1.0/s 00:10" in last and out.getvalue().endswith("\n")


def test_stages_that_overlap_get_a_line_each_redrawn_in_place(clock: Clock) -> None:
    out = Tty()
    progress = terminal_progress(out, min_interval=0)
    for stage in ("generate", "claims"):
        progress(stage, 0, 3)
    for done in (1, 2, 3):
        clock.now += 1
        progress("generate", done, 3)
        progress("claims", done, 3)
        shown = screen(out.getvalue())
        assert len(shown) == 2 and f" {done}/3 " in shown[0] and f" {done}/3 " in shown[1]
    progress("relevance", 0, 2)  # a later stage starts below the finished ones
    progress("relevance", 2, 2)
    shown = screen(out.getvalue())
    assert [s.split()[0] for s in shown] == ["generate", "claims", "relevance"]
    assert "3/3 100%" in shown[0] and "3/3 100%" in shown[1] and "2/2 100%" in shown[2]


def test_nothing_is_written_when_the_stream_is_not_a_terminal() -> None:
    out = io.StringIO()
    progress = terminal_progress(out, min_interval=0)
    progress("retrieve", 0, 5)
    progress("retrieve", 5, 5)
    progress.close()
    assert out.getvalue() == ""


class SlowPrepareJudge(Judge):
    """Matches when the expected text is in the passage; its prepare() takes 7 s of the fake clock."""

    name = "slow-prepare"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        self.clock.now += 7

    def judge(self, context: JudgmentContext) -> bool:
        return context.expected_text in context.retrieved_text


def test_a_judges_prepare_is_inside_its_stage(clock: Clock) -> None:
    out = Tty()
    progress = terminal_progress(out, min_interval=0)
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="bees", expected_answers=["honey"])])
    run = {"q": [{"doc_id": "d1", "score": 1.0, "text": "bees make honey"},
                 {"doc_id": "d2", "score": 0.5, "text": "wasps"}]}
    Evaluator(run, metrics=["recall@2"], judge=SlowPrepareJudge(clock), k=2, progress=progress).evaluate(dataset)
    progress.close()
    (judge_line,) = [line for line in screen(out.getvalue()) if line.startswith("judge")]
    assert "2/2 100%" in judge_line and judge_line.endswith("00:07")
    assert "judge     [" in out.getvalue().split("\n")[0] and " 0/2 " in out.getvalue()  # drawn before prepare


def test_evret_rag_draws_every_stage_on_a_pseudo_terminal_and_nothing_through_a_pipe() -> None:
    import pty

    env = {**os.environ, "COLUMNS": "100"}
    command = [sys.executable, "-m", "evret_core.cli", "rag", "--config", "examples/rag/rag.toml"]
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=follower)
        os.close(follower)
        chunks = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the pty closes when the process exits
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(leader)
    written = b"".join(chunks).decode()
    shown = [line for line in screen(written) if not line.startswith("results")]
    assert [line.split()[0] for line in shown] == ["retrieve", "generate", "claims", "relevance"]
    assert "13/13 100%" in shown[0] and all("26/26 100%" in line for line in shown[1:])
    for stage in ("retrieve", "generate", "claims", "relevance"):  # every stage drawn first at 0, no rate
        assert re.search(stage + r" +\[-+\] 0/\d+ +0% --/s", written)
    piped = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == ""


def test_lines_never_wrap_on_a_narrow_terminal(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evret_core.progress.shutil.get_terminal_size", lambda fallback: os.terminal_size((30, 24)))
    out = Tty()
    progress = terminal_progress(out, min_interval=0)
    progress("generate", 0, 1000)
    progress("claims", 0, 1000)
    progress("generate", 500, 1000)
    shown = screen(out.getvalue())
    assert len(shown) == 2 and all(len(line) < 30 for line in shown)


def test_a_quick_step_shows_nothing_and_a_long_one_its_bar_from_zero(clock: Clock) -> None:
    """Steps that are usually quick (reading or writing a results file, the metrics) show a bar only when they take
    more than STAGE_DELAY seconds (red team LG1b: a 47 s evaluation showed nothing between its title and table)."""
    from evret_core.progress import STAGE_DELAY, after_a_while

    out = Tty()
    progress = terminal_progress(out, min_interval=0)
    later = after_a_while(progress)
    later("metrics", 0, 10)
    later("metrics", 4, 10)
    clock.now += STAGE_DELAY / 2
    later("metrics", 10, 10)
    assert out.getvalue() == ""  # over in half a second: nothing drawn
    later("write", 0, 100)
    clock.now += STAGE_DELAY
    later("write", 40, 100)
    assert re.search(r"write +\[-+\] 0/100 +0% --/s", out.getvalue())  # started at 0, as any stage
    assert f"40/100  40% {40 / STAGE_DELAY:.1f}/s" in out.getvalue()  # timed from its real start
    clock.now += 2
    later("write", 100, 100)
    (line,) = screen(out.getvalue())
    assert line.startswith("write") and "100/100 100%" in line and line.endswith("00:03")
    later("write", 0, 100)  # the stage again (another file): held back again
    later("write", 100, 100)
    assert screen(out.getvalue()) == [line]
    after_a_while(None)("write", 0, 1)  # no terminal, no callback: nothing to do


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
