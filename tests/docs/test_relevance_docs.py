"""docs/relevance.md shows the relevance judge's default prompts exactly as the code sends them."""

from __future__ import annotations

import re

from evret_core.judge.relevance_judge import (
    DEFAULT_PLAIN_SYSTEM_PROMPT,
    DEFAULT_PROMPT_TEMPLATE,
    DEFAULT_SYSTEM_PROMPT,
)

from .._paths import REPO


def test_the_docs_prompts_are_the_codes() -> None:
    text = (REPO / "docs" / "relevance.md").read_text(encoding="utf-8")
    section = re.search(r"^## The default prompt\n(.*?)(?=^## )", text, flags=re.DOTALL | re.MULTILINE)
    assert section, "docs/relevance.md has no 'The default prompt' section"
    blocks = re.findall(r"```text\n(.*?)\n```", section.group(1), flags=re.DOTALL)
    assert blocks == [DEFAULT_SYSTEM_PROMPT, DEFAULT_PLAIN_SYSTEM_PROMPT, DEFAULT_PROMPT_TEMPLATE]
