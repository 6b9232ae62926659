"""Where the shared real data lives; outside CI a missing ../shared skips, in CI (env CI set) it fails."""

from __future__ import annotations

from pathlib import Path

from evret_core.testing.shared_data import shared_data

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "rag"


def squad_path() -> Path:
    return shared_data("datasets", "squad2", "dev-v2.0-subset.json", what="the SQuAD 2.0 subset")
