"""The Python examples of docs/rag.md run as written (in a scratch folder holding a copy of examples/)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "rag.md").read_text(encoding="utf-8"), re.DOTALL)


def test_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("evret_bm25", reason="the examples use evret-bm25")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    api, perturbed = BLOCKS[2], BLOCKS[0]
    namespace: dict[str, object] = {"__name__": "docs_rag"}
    exec(compile(api, "docs/rag.md#python-api", "exec"), namespace)
    assert namespace["mine"].retrieval == namespace["results"].retrieval  # type: ignore[attr-defined]
    scope = {"__name__": "docs_rag_perturbed", "bm25": namespace["bm25"]}
    exec(compile(perturbed, "docs/rag.md#perturbed", "exec"), scope)
    results = scope["evaluator"].evaluate(namespace["questions"])  # type: ignore[attr-defined]
    assert results.generation["missing-gold"]["correct_refusal_rate"] == 1.0
    adversarial_scope = {"__name__": "docs_rag_adversarial", "bm25": namespace["bm25"],
                         "questions": namespace["questions"]}
    exec(compile(BLOCKS[1], "docs/rag.md#adversarial-cases", "exec"), adversarial_scope)
    summary = adversarial_scope["adversarial"].adversarial  # type: ignore[attr-defined]
    assert set(summary) == {"counterfactual", "injection", "missing-gold"}
