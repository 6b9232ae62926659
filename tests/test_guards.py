"""Issue 24 (hardening, round 3): the newer commands get the care ``evaluate`` has. One redaction rule for every
file written, one output guard for every command that writes, bad input refused before any work, and one-line
errors instead of tracebacks. Case ids (SEC3, C09, A14, F23...) are those of the red-team report of 2026-11-24."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, isolate_llm_env
from evret_core.testing.rag_stub import rag_responder

from .conftest import REPO

EXAMPLE = REPO / "examples" / "rag"
QUESTIONS = str(EXAMPLE / "questions.jsonl")
CORPUS = str(EXAMPLE / "corpus.jsonl")
GOLD_RUN = ["rag", "--dataset", QUESTIONS, "--corpus", CORPUS, "--generator", "extractive", "--conditions", "gold",
            "--resamples", "10"]

PASSWORD, QUERY_KEY, OPTION_KEY = "PASSWORD-1234567", "QUERYKEY-7654321", "sk-OPTKEY-999999"


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evret: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubLLMServer]:
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer(rag_responder()) as server:
        yield server


def _secret_options(server: StubLLMServer) -> list[str]:
    """LLM options with credentials in the URL's user info, in a query parameter and in an option."""
    options = stub_options(server)
    host = options["base_url"].split("://", 1)[1]
    return [f"provider={options['provider']}", f"model={options['model']}", "cache=false",
            f"base_url=http://user:{PASSWORD}@{host}?api-key={QUERY_KEY}", f"api_key={OPTION_KEY}"]


# -- 1. one redaction rule for every file written (SEC3, SEC5, SEC6, SEC7) ---------------------------------------
def test_rag_writes_no_credentials_into_any_file(stub: StubLLMServer, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["rag", "--dataset", QUESTIONS, "--corpus", CORPUS, "--conditions", "gold", "--resamples", "10",
            "--adversarial", "missing-gold", "--write-cases", str(tmp_path / "cases.jsonl"),
            "--output", str(tmp_path / "rag.json"), "--generator", "llm", "--claim-judge", "llm",
            "--relevance", "llm"]
    for flag in ("--generator-option", "--claim-judge-option", "--relevance-option"):
        argv += [x for option in _secret_options(stub) for x in (flag, option)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert stub.requests  # the parts did call the LLM through those URLs
    written = {name: (tmp_path / name).read_text(encoding="utf-8") for name in ("rag.json", "cases.jsonl")}
    for where, text in {**written, "stdout": captured.out, "stderr": captured.err}.items():
        for secret in (PASSWORD, QUERY_KEY, OPTION_KEY):
            assert secret not in text, f"{secret} in {where}"
    config = json.loads(written["rag.json"])["config"]
    for part in ("generator", "claim_judge", "relevance"):
        assert "user:***@" in json.dumps(config[part]) and "api-key=***" in json.dumps(config[part]), config[part]


def test_calibration_json_has_no_credentials(stub: StubLLMServer, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"query_id": "q", "query": "When?", "expected": "9 am",
                                  "retrieved_text": "It opens at 9 am.", "label": True}) + "\n")
    argv = ["calibrate", "--labels", str(labels), "--judge", "llm", "-o", str(tmp_path / "cal.json"), "--json"]
    argv += [x for option in _secret_options(stub) for x in ("--judge-option", option)]
    main(argv)
    captured = capsys.readouterr()
    text = (tmp_path / "cal.json").read_text(encoding="utf-8")
    assert "user:***@" in text
    for secret in (PASSWORD, QUERY_KEY, OPTION_KEY):
        assert secret not in text + captured.out + captured.err


def test_one_rule_for_names_urls_and_known_values() -> None:
    from evret_core.llm.providers import redact as provider_redact
    from evret_core.redact import is_secret_name, known_secrets, redact_text

    assert all(is_secret_name(n) for n in ("PGPASSWORD", "authtoken", "clientsecret", "OPENAI_API_KEY"))
    assert not any(is_secret_name(n) for n in ("max_tokens", "keyword", "tokenizer", "XAUTHORITY"))
    argv = ["rag", "--generator-option", "base_url=http://h/v1?api-key=QPARAM-555555", "--api-key", "FLAGKEY-66666",
            "--judge-option=api_key=EQKEY-7777777", "--dataset", "http://u:URLPASS-888888@h/d.jsonl"]
    found = known_secrets(argv, {"PGPASSWORD": "pg-secret-1", "HOME": "/home/someone"})
    assert set(found) == {"QPARAM-555555", "FLAGKEY-66666", "EQKEY-7777777", "URLPASS-888888", "pg-secret-1"}
    text = "failed: QPARAM-555555 at http://x:y@h/?token=abc and EQKEY-7777777"
    assert redact_text(text, found) == "failed: *** at http://x:***@h/?token=*** and ***"
    # the providers' helper is the same rule: a known key and URL credentials
    assert provider_redact("HTTP 401 for sk-abcdef at http://a:b@h/v1", "sk-abcdef") == "HTTP 401 for *** at http://a:***@h/v1"
