"""Where the tests find the project: the repository root, for the test modules in every folder of tests/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
