"""Where the shared real data lives; outside CI a missing ../shared skips, in CI (env CI set) it fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SQUAD = REPO.parent / "shared" / "datasets" / "squad2" / "dev-v2.0-subset.json"
EXAMPLE = REPO / "examples" / "rag"


def squad_path() -> Path:
    if not SQUAD.is_file():
        reason = f"the SQuAD 2.0 subset is not at {SQUAD} (the shared data folder next to the repository)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return SQUAD
