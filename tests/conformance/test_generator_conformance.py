"""The built-in generators pass the generator conformance suite: ``extractive`` in each answer mode, and ``llm``
through the test kit's ``stub`` provider against the RAG stub model on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evret_core.plugins.registry import create_generator
from evret_core.testing import GeneratorConformance
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, isolate_llm_env
from evret_core.testing.rag_stub import rag_responder


@pytest.mark.parametrize("mode", ["span", "sentence", "paraphrase"])
class TestExtractiveGeneratorConformance(GeneratorConformance):
    @pytest.fixture
    def generator(self, mode: str) -> Any:
        return create_generator("extractive", answer=mode)


class TestLLMGeneratorConformance(GeneratorConformance):
    @pytest.fixture
    def generator(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
        isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
        with StubLLMServer(rag_responder()) as server:
            yield create_generator("llm", **stub_options(server), cache=False)
