"""The conversation tables: what docs/conversation-evaluation.md shows is what a run prints, and every cell is the
results' number."""

from __future__ import annotations

import io
import re

from evret_core.report.conversation_tables import conversation_tables, print_conversation_results
from tests._paths import REPO
from tests.conversation.test_turn_evaluator import run


def test_the_docs_terminal_example_is_what_the_run_prints() -> None:
    results = run(forms=["last_turn", "rewrite"])
    out = io.StringIO()
    print_conversation_results(results, title="three: 7 turns in 3 conversations", file=out)
    page = (REPO / "docs" / "conversation-evaluation.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n(three: 7 turns.*?)```", page, flags=re.DOTALL)
    assert shown is not None
    assert shown.group(1) == out.getvalue()


def test_cells_are_the_results_numbers() -> None:
    results = run(forms=["last_turn", "full_history", "rewrite"])
    forms, differences, by_index, *slices = conversation_tables(results)
    for row in forms.rows:
        form = row[0]
        assert row[1].startswith(f"{results.scores[form]['ndcg@3']:.3f} [")
        assert row[-1] == f"{results.n[form]['turns']} / {results.n[form]['conversations']}"
    assert len(differences.rows) == len(results.differences)
    assert [row[0] for row in by_index.rows] == ["1", "2", "3"]
    assert [t.title for t in slices] == ["ndcg@3 by depth", "ndcg@3 by domain"]
    assert [row[0] for row in slices[0].rows] == ["1", "2", "10"]
