"""Where the shared real data lives (outside CI a missing ../shared skips, in CI (env CI set) it fails), and the
LLM parts' stub server: ``stub`` serves the RAG stub model, ``private_cache`` (used by the modules that call it)
keeps the run's LLM cache and keys in the test's folder, ``opts`` points a part at the stub without a cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, isolate_llm_env
from evret_core.testing.rag_stub import rag_responder
from evret_core.testing.shared_data import shared_data

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "rag"


def squad_path() -> Path:
    return shared_data("datasets", "squad2", "dev-v2.0-subset.json", what="the SQuAD 2.0 subset")


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer(rag_responder()) as server:
        yield server


def opts(server: StubLLMServer, **more: Any) -> dict[str, Any]:
    return {**stub_options(server), "cache": False, **more}
