"""Scaffolding for vector-store retriever tests: a small corpus with known answers, a deterministic embedder, and
a check that loading a plugin leaves its SDK unimported."""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BEE_DOCS: list[dict[str, Any]] = [
    {"_id": "d1", "title": "Waggle dance", "text": "Honey bees communicate the direction of food with a waggle dance.",
     "topic": "behaviour"},
    {"_id": "d2", "title": "Cold flight", "text": "Bumblebees fly at low temperatures by shivering their muscles.",
     "topic": "behaviour"},
    {"_id": "d3", "title": "Queens", "text": "A queen bee can lay up to two thousand eggs in a single day.",
     "topic": "hive"},
    {"_id": "d4", "title": "Drones", "text": "Drones are male bees whose main role is to mate with a queen.",
     "topic": "hive"},
    {"_id": "d5", "title": "Wax", "text": "Beeswax is produced by glands on the abdomen of worker bees.",
     "topic": "products"},
    {"_id": "d6", "title": "Propolis", "text": "Propolis is a resin that bees use to seal gaps in the hive.",
     "topic": "products"},
]
"""Six documents in BEIR's corpus format, with a ``topic`` field for filters."""

BEE_QUERIES = ["waggle dance direction", "queen eggs per day", "wax glands", "resin seal"]
"""Queries whose best documents under :func:`hashed_embedder` are d1, d3, d5 and d6."""


def hashed_embedder(dim: int = 128) -> Callable[[Sequence[str]], list[list[float]]]:
    """A real, deterministic bag-of-words embedding of ``dim`` dimensions: hashed word counts, L2-normalised."""

    def embed(texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * dim
            for word in re.findall(r"[a-z]+", text.lower()):
                vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
            norm = math.sqrt(sum(x * x for x in vec)) or 1.0
            out.append([x / norm for x in vec])
        return out

    return embed


def write_corpus(path: Path, docs: Sequence[dict[str, Any]] = BEE_DOCS) -> Path:
    """Write ``docs`` as a JSONL corpus file at ``path`` and return the path."""
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    return path


def assert_plugin_load_leaves_unimported(retriever: str, *modules: str) -> None:
    """In a fresh interpreter, loading the plugins registers ``retriever`` without importing any of ``modules``."""
    code = (
        "import sys\n"
        "from evret_core.plugins.loading import get_registry\n"
        f"assert {retriever!r} in get_registry().names('retriever')\n"
        f"assert not [m for m in {list(modules)!r} if m in sys.modules], 'imported at plugin load'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
