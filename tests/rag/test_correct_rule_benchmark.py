"""The `correct` rule's error rates recorded in docs/benchmarks.md, recomputed from the SQuAD 2.0 subset
(``python benchmarks/correct_rule.py``); fails in CI when ../shared is missing."""

from __future__ import annotations

import importlib.util
import re
import sys

from evret_core.rag import QuestionSet

from .conftest import REPO, squad_path


def test_error_rates_match_the_docs() -> None:
    spec = importlib.util.spec_from_file_location("correct_rule", REPO / "benchmarks" / "correct_rule.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["correct_rule"] = bench
    spec.loader.exec_module(bench)
    right, wrong = bench.cases(QuestionSet.load(squad_path()))
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text[text.index("## The `correct` rule on SQuAD 2.0"):]
    recorded = re.findall(r"^\| (before|after) \(.*?\) \| (\d+) of (\d+) .*? \| (\d+) of (\d+) ", section, re.MULTILINE)
    assert [r[0] for r in recorded] == ["before", "after"]
    from evret_core.rag.scores.answers import answer_is_correct

    rules = {"before": bench.before, "after": lambda a, g, q: answer_is_correct(a, g, question=q)}
    for name, missed, n_right, accepted, n_wrong in recorded:
        assert (int(n_right), int(n_wrong)) == (len(right), len(wrong))
        assert bench.errors(rules[name], right, wrong) == (int(missed), int(accepted)), name
