"""The test kit's shared-data finder: a path under ../shared, skipped outside CI when absent, failed in CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core.testing.shared_data import repo_root, shared_data


def test_finds_a_path_under_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "datasets").mkdir()
    monkeypatch.setenv("EVRET_SHARED", str(tmp_path))
    assert shared_data("datasets") == (tmp_path / "datasets").resolve()
    assert (repo_root() / "evret_core" / "testing" / "shared_data.py").is_file()


def test_missing_data_skips_outside_ci_and_fails_in_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVRET_SHARED", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="SciFact is not at"):
        shared_data("datasets", "scifact", what="SciFact")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="SciFact is not at"):
        shared_data("datasets", "scifact", what="SciFact")
