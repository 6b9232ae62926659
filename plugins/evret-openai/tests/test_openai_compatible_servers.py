"""The Ollama and vLLM commands of docs/llm-judging.md, run as written against a stub of their OpenAI-compatible
wire format on 127.0.0.1 (their ``/v1/chat/completions`` answers in OpenAI's shape); only the documented server
address is replaced by the stub's, since the test cannot own ports 11434 and 8000."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from evret_core.testing.llm_stubs import StubLLMServer, always

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "llm-judging.md"


def documented_command(address: str) -> list[str]:
    """The one ``evret`` command of the docs' Ollama/vLLM section that names ``address``, as arguments."""
    section = DOC.read_text(encoding="utf-8").split("### Ollama and vLLM", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if address in b]
    assert len(blocks) == 1, f"one command naming {address} expected in the docs"
    return shlex.split(blocks[0].replace("\\\n", " "))


@pytest.mark.parametrize("address, model, key", [("http://localhost:11434/v1", "llama3.2", "ollama"),
                                                 ("http://localhost:8000/v1", "Qwen/Qwen2.5-7B-Instruct", "EMPTY")],
                         ids=["ollama", "vllm"])
def test_the_documented_command_judges_through_the_openai_provider(tmp_path: Path, address: str, model: str,
                                                                    key: str) -> None:
    command = documented_command(address)
    assert command[0] == "evret" and f"base_url={address}" in command and f"model={model}" in command
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["EVRET_CACHE_DIR"] = str(tmp_path / "cache")
    with StubLLMServer(always("YES")) as server:
        args = [a.replace(address, server.openai_base_url) for a in command[1:]]
        done = subprocess.run([sys.executable, "-m", "evret_core.cli", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "recall@5" in done.stdout and "1.000" in done.stdout  # every judgment a YES: every answer found
    assert server.requests and all(r.path == "/v1/chat/completions" and r.model == model for r in server.requests)
    assert all(r.headers.get("authorization", r.headers.get("Authorization")) == f"Bearer {key}"
               for r in server.requests)
