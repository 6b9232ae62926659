"""What ``evret rag`` prints: a compact table by default for adversarial runs (issue 27), every pair behind
--all-pairs, and the notes that say how ``correct`` was decided and which scores are fixed by construction."""

from __future__ import annotations

import pytest

from evret_core.cli import main

from .conftest import EXAMPLE

ALL = "counterfactual,injection,missing-gold,irrelevant-only"


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "20", *extra]) == 0
    return capsys.readouterr().out


def test_adversarial_output_is_compact_and_pairs_are_behind_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    compact = _run(capsys, "--adversarial", ALL)
    full = _run(capsys, "--adversarial", ALL, "--all-pairs")
    # 6 conditions: 15 pairs x 3 metrics = 45 difference lines in the full listing, 5 rows against retrieved here
    assert sum(" - " in line and "(n=" in line for line in full.splitlines()) == 45
    rows = [line.split()[0] for line in compact.split("differences against retrieved")[1].splitlines()[2:7]]
    assert rows == ["gold", "counterfactual", "injection", "missing-gold", "irrelevant-only"]
    assert "injection - counterfactual" not in compact and "injection - counterfactual" in full
    assert len(compact.splitlines()) <= 60 < len(full.splitlines())
    # one generation table with a column per condition, and one row per adversarial family
    header = next(line for line in compact.splitlines() if line.strip().startswith("metric"))
    assert header.split() == ["metric", "gold", "retrieved", "counterfactual", "injection", "missing-gold",
                              "irrelevant-only"]
    family_rows = [line for line in compact.splitlines() if line.startswith("  ") and "skipped=" in line]
    assert len(family_rows) == 4 and "weakest slice " not in compact and "weakest slice " in full
    # the compact differences carry the same numbers as the full listing, signs read "condition - retrieved"
    gold_row = next(line for line in compact.splitlines() if line.startswith("  gold ") and "[" in line)
    full_f1 = next(line for line in full.splitlines() if line.startswith("  retrieved - gold f1"))
    assert full_f1.split("f1")[1].split("(n=")[0].strip() == "0.038 [0.000, 0.115]"
    assert "-0.038 [-0.115, 0.000]" in gold_row


def test_two_condition_runs_keep_the_listing_with_intervals(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys)
    assert "[gold]" in out and "retrieved - gold exact" in out and "differences against" not in out


def test_output_names_the_rule_that_decided_correct(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys)
    assert ("'correct' decided by: exact match, token F1 > 0.5, or a short answer stating a gold answer whole (at "
            "most 3 other words beside the question's); never with a number that disagrees with the gold answer or "
            "an alternative offered ('or') (a longer answer that holds the gold answer needs --answer-judge") in out
    assert "1.000 by construction for the extractive generator" in out
    judged = _run(capsys, "--answer-judge", "contains", "--correct-f1", "0.7")
    assert "'correct' decided by: exact match, token F1 > 0.7, or a short answer" in judged
    assert "('or'); or the answer judge 'contains' (--answer-judge) accepting the answer" in judged
