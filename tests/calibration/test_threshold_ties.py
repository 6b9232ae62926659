"""`evret calibrate --save-threshold` keeps a threshold that scores as well as the best one, and writes round values:
token-overlap scores 2/7, 3/7, 5/7 and 6/7 below, labelled so that any threshold in (3/7, 5/7] agrees perfectly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evret_core.calibration import calibrate_judge, read_labels
from evret_core.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXPECTED = "apple banana cherry damson elder fig grape"
RETRIEVED = {"grape fig elder damson cherry": True,           # 5/7
             "fig banana grape damson cherry apple": True,    # 6/7
             "cherry apple fig": False,                       # 3/7
             "cherry apple": False}                           # 2/7


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps({"query_id": f"q{i}", "query": "which fruit", "expected": EXPECTED,
                                        "retrieved_text": text, "label": label}) + "\n"
                            for i, (text, label) in enumerate(RETRIEVED.items())), encoding="utf-8")
    return path


def _config(tmp_path: Path, ratio: str) -> Path:
    path = tmp_path / "eval.toml"
    path.write_text(f'metrics = ["recall@5"]\n\n[judge]\nname = "token-overlap"\noverlap_ratio = {ratio}  # mine\n',
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("by", ["kappa", "f1"])
def test_a_tie_keeps_the_judges_threshold(labels: Path, by: str) -> None:
    from evret_core.plugins.registry import create_judge

    result = calibrate_judge(create_judge("token-overlap"), read_labels(labels), by=by)
    assert max(row["threshold"] for row in result.sweep if row[by] == 1.0) == pytest.approx(5 / 7)
    assert result.best is not None and result.best["threshold"] == 0.6 and result.best[by] == 1.0


def test_save_threshold_keeps_the_configs_threshold_on_a_tie(
        labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "0.5")  # the judge is built with its default, 0.6; the config says 0.5: both tie
    before = config.read_text(encoding="utf-8")
    assert main(["calibrate", "--labels", str(labels), "--by", "kappa", "--save-threshold", str(config),
                 "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)["saved"]
    assert saved["value"] == 0.5 and saved["kept"] is True
    assert config.read_text(encoding="utf-8") == before  # not rewritten


def test_save_threshold_writes_a_round_value_that_gives_the_best_verdicts(
        labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "0.3")  # 3/7 >= 0.3: a false match; every threshold in (3/7, 5/7] is right
    assert main(["calibrate", "--labels", str(labels), "--by", "kappa", "--judge-option", "overlap_ratio=0.3",
                 "--save-threshold", str(config), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["judges"][0]["best"]["threshold"] == 0.7 and document["judges"][0]["best"]["kappa"] == 1.0
    assert document["saved"]["value"] == 0.7 and document["saved"]["kept"] is False
    assert tomllib.loads(config.read_text(encoding="utf-8"))["judge"]["overlap_ratio"] == 0.7
    assert "overlap_ratio = 0.7\n" in config.read_text(encoding="utf-8")


def test_the_table_says_the_threshold_was_kept(labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "0.6")
    assert main(["calibrate", "--labels", str(labels), "--by", "kappa", "--save-threshold", str(config)]) == 0
    out = capsys.readouterr().out
    assert "best by kappa 0.600" in out
    assert f"kept overlap_ratio = 0.6 for judge token-overlap in {config}: it scores as well as the best" in out
