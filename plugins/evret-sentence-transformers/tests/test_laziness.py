"""Listing plugins and importing this one must not import torch or sentence-transformers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "sentence_transformers", "transformers")

CHECK = f"""
import sys
import evret_sentence_transformers
from evret_core.cli import main
from evret_sentence_transformers import DenseRetriever, SemanticJudge, SemanticSimilarityEvaluator
main(["plugins"])
SemanticJudge(threshold=0.8)          # constructing is not using: still no torch
SemanticSimilarityEvaluator()
from evret_sentence_transformers import CrossEncoderReranker, EmbeddingReranker
EmbeddingReranker()
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print("HEAVY:", heavy)
"""


def test_import_and_evret_plugins_do_not_import_torch() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "HEAVY: []" in done.stdout, done.stdout
    # the listing shows what the plugin registers
    assert "judges: query-similarity, semantic" in done.stdout
    assert "retrievers: dense" in done.stdout
    assert "evaluators: semantic-similarity" in done.stdout
    assert "rerankers: cross-encoder, embedding" in done.stdout


def test_evret_plugins_console_script_lists_the_plugin() -> None:
    script = Path(sys.executable).with_name("evret")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from evret_core.cli import main; main()"]
    done = subprocess.run([*command, "plugins"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EVRET_STRICT_PLUGINS": "1"})
    assert done.returncode == 0, done.stderr
    assert "evret-sentence-transformers" in done.stdout
    assert "judges: query-similarity, semantic" in done.stdout
