"""`evret evaluate` end to end on the bundled example: statistics options, and --dry-run / real runs of the LLM judge
through the core test kit's ``stub`` provider against a stub server on 127.0.0.1 (no provider plugin needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.testing.llm_provider import register_stub_provider
from evret_core.testing.llm_stubs import StubLLMServer, always

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = ["--dataset", str(REPO / "examples" / "dataset.jsonl"), "--retriever", "bm25",
           "--retriever-option", f"corpus={REPO / 'examples' / 'corpus.jsonl'}"]

pytest.importorskip("evret_bm25", reason="evret-bm25 is not installed (make test installs every plugin)")


def _interval_width(output: str, metric: str) -> float:
    match = re.search(rf"^{re.escape(metric)}\s+[\d.]+ \[([\d.]+), ([\d.]+)\]", output, re.M)
    assert match, output
    return float(match.group(2)) - float(match.group(1))


def test_statistics_options_reach_the_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    argv = [*EXAMPLE, "--metric", "mrr@10", "--no-progress", "--output", str(out)]
    assert main(["evaluate", *argv, "--confidence-level", "0.5", "--resamples", "300", "--seed", "7",
                 "--min-slice-size", "2"]) == 0
    narrow = capsys.readouterr().out
    assert "50% CI" in narrow
    data = json.loads(out.read_text())
    assert data["confidence_level"] == 0.5
    assert data["manifest"]["seed"] == 7
    flags = {value: s["small"] for slices in data["slices"].values() for value, s in slices.items()}
    assert flags["pollination"] is True and flags["definition"] is False  # 1 and 2 queries, minimum 2
    assert all(s["small"] == (s["n"] < 2) for slices in data["slices"].values() for s in slices.values())
    assert main(["evaluate", *argv, "--confidence-level", "0.99", "--resamples", "300", "--seed", "7"]) == 0
    wide = capsys.readouterr().out
    assert _interval_width(narrow, "mrr@10") < _interval_width(wide, "mrr@10")


def test_statistics_options_from_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(f'dataset = "{REPO / "examples" / "dataset.jsonl"}"\nmetrics = ["recall@5"]\n'
                      f'confidence_level = 0.8\nn_resamples = 200\n[retriever]\nname = "bm25"\n'
                      f'corpus = "{REPO / "examples" / "corpus.jsonl"}"\n')
    assert main(["evaluate", "--config", str(config), "--no-progress"]) == 0
    assert "80% CI" in capsys.readouterr().out
    config.write_text(config.read_text().replace("n_resamples = 200", 'n_resamples = "many"'))
    assert main(["evaluate", "--config", str(config), "--no-progress"]) == 2
    assert "option 'n_resamples': must be an integer" in capsys.readouterr().err


def test_dry_run_sends_nothing_then_a_run_sends_what_it_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EVRET_STUB_API_KEY", raising=False)
    monkeypatch.setenv("EVRET_CACHE_DIR", str(tmp_path / "cache"))
    register_stub_provider()
    with StubLLMServer(always("NO")) as server:
        judge = ["--judge", "llm", "--judge-option", "provider=stub", "--judge-option", "model=gpt-stub",
                 "--judge-option", f"base_url={server.openai_base_url}", "--judge-option", "api_key=sk-secret-1",
                 "--metric", "recall@2", "--no-progress"]
        assert main(["evaluate", *EXAMPLE, *judge, "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert server.requests == []
        match = re.search(r"(\d+) judgment\(s\) planned, (\d+) distinct, 0 cached, (\d+) would be sent", plan)
        assert match, plan
        planned, distinct, to_send = map(int, match.groups())
        assert planned >= distinct == to_send > 0
        assert "estimated tokens: ~" in plan

        out = tmp_path / "r.json"
        assert main(["evaluate", *EXAMPLE, *judge, "--output", str(out)]) == 0
        assert len(server.requests) == to_send  # one request per distinct judgment, none repeated
        stats = json.loads(out.read_text())["stats"]
        assert stats["cost"]["stub"]["calls"] == to_send
        assert "sk-secret-1" not in out.read_text()

        # every judgment is cached now: the dry run says nothing would be sent, and a rerun sends nothing
        assert main(["evaluate", *EXAMPLE, *judge, "--dry-run"]) == 0
        assert f"{to_send} cached, 0 would be sent" in capsys.readouterr().out
        assert main(["evaluate", *EXAMPLE, *judge]) == 0
        assert len(server.requests) == to_send
