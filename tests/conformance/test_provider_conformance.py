"""The test kit's own ``stub`` provider passes the provider conformance suite (so the suite runs in the core's
tests with no provider plugin installed)."""

from __future__ import annotations

import pytest

from evret_core.testing import ProviderConformance
from evret_core.testing.llm_provider import register_stub_provider
from evret_core.testing.llm_stubs import StubLLMServer


class TestStubProvider(ProviderConformance):
    provider = "stub"
    key_env = ("EVRET_STUB_API_KEY",)

    @pytest.fixture(autouse=True)
    def _registered(self) -> None:
        register_stub_provider()

    def base_url(self, server: StubLLMServer) -> str:
        return server.openai_base_url
