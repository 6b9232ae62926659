"""Where the project's shared real data lives, for tests: ``../shared`` next to the repository root.

The shared folder (BEIR SciFact, the SQuAD 2.0 subset, trec_eval's test suite) is never copied into the
project. :func:`shared_data` returns a path inside it; when that path is absent, a test skips with the reason
outside CI and fails in CI (environment variable ``CI`` set), so a CI run can never pass by skipping. The
environment variable ``EVRET_SHARED`` points elsewhere (a checkout whose ../shared is not beside it).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "shared_data", "skip_or_fail"]


def repo_root() -> Path:
    """The repository this ``evret_core`` was imported from (an editable install or a checkout on sys.path)."""
    return Path(__file__).resolve().parents[2]


def shared_data(*parts: str, what: str = "") -> Path:
    """``<shared>/<parts...>``: skipped (outside CI) or failed (in CI) when it does not exist. ``what`` names
    the data in the message (default: the path)."""
    base = Path(os.environ.get("EVRET_SHARED") or repo_root().parent / "shared")
    path = base.joinpath(*parts).resolve()
    if not path.exists():
        skip_or_fail(f"{what or 'the shared data'} is not at {path} (the shared data folder next to the "
                     f"repository; EVRET_SHARED points elsewhere)")
    return path


def skip_or_fail(reason: str) -> None:
    """Skip the test with ``reason`` outside CI; in CI (``CI`` set) fail it: CI must run every check."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run this check)")
    pytest.skip(reason)
