"""One terminal table primitive (issue 25 part 4): `text_table` lays out the run summaries `evret evaluate` and
`evret rag` print, so one layout change applies to both; the outputs stay byte-identical to what the code before
the change printed (tests/results/data/terminal-*: written by that code from the committed results files)."""

from __future__ import annotations

import io
from pathlib import Path

from evret_core.report.rag_tables import print_rag
from evret_core.report.terminal import print_scores, text_table
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.files import load_results
from evret_core.results.rag_results import RagResults

DATA = Path(__file__).parent / "data"


def _retrieval() -> EvaluationResults:
    results = load_results(DATA / "retrieval-v2.json")
    assert isinstance(results, EvaluationResults)
    return results


def _rag() -> RagResults:
    results = load_results(DATA / "rag-v1.json")
    assert isinstance(results, RagResults)
    return results


def _scores(sep: str = "  ") -> str:
    out = io.StringIO()
    print_scores(_retrieval(), title="retrieval-v2", file=out, sep=sep)
    return out.getvalue()


def _rag_summary(sep: str = " ") -> str:
    out = io.StringIO()
    print_rag(_rag(), title="rag-v1", file=out, sep=sep)
    return out.getvalue()


def test_summaries_are_byte_identical_to_the_previous_code() -> None:
    assert _scores() == (DATA / "terminal-retrieval.txt").read_text(encoding="utf-8")
    assert _rag_summary() == (DATA / "terminal-rag-two-conditions.txt").read_text(encoding="utf-8")


def test_one_primitive_lays_out_the_retrieval_and_the_rag_summary() -> None:
    retrieval, rag = _scores(" | ").splitlines(), _rag_summary(" | ").splitlines()
    # every table of both summaries takes the separator: scores, slices, RAG retrieval, generation, attribution,
    # differences; the lines around the tables (titles, notes) do not change
    assert retrieval[1:3] == ["metric   | value (95% CI)", "-------- | --------------"]
    assert "mrr@2    | 0.833 [0.667, 0.981]" in retrieval
    assert "value |     N | recall@2              | mrr@2                 | ndcg@2" in retrieval
    assert "  recall@1               | 0.333 [0.000, 1.000]" in rag
    assert "  citation_precision     | n/a  (n=0)" in rag
    assert "  both_right             |     1 |   25.0%" in rag
    assert "  retrieved - gold exact    | -0.500 [-0.944, 0.000]  (n=4)" in rag
    for changed, default in ((retrieval, _scores().splitlines()), (rag, _rag_summary().splitlines())):
        assert len(changed) == len(default)
        assert sum(" | " in line for line in changed) >= 5
        assert [a for a in changed if " | " not in a] == [b for b, a in zip(default, changed, strict=True)
                                                          if " | " not in a]


def test_text_table_widths_alignment_and_header() -> None:
    # a column is as wide as its widest cell, header included, and at least the width asked for
    assert text_table([["mrr", "0.318"]], ["metric", "value"]) == ["metric  value", "mrr     0.318"]
    assert text_table([["a", "7"], ["bb", "12"]], align="<>", widths=[4], sep=" ", indent="  ") == [
        "  a     7", "  bb   12"]
    assert text_table([["x", ""]], ["name", "note"]) == ["name  note", "x"]  # lines are right-stripped
    assert text_table([]) == []


def test_a_short_metric_name_no_longer_misaligns_the_header() -> None:
    """The code before printed ``metric  value`` over ``mrr  0.318`` for metrics shorter than the header; the
    header is now a cell of the table like any other."""
    results = _retrieval()
    results.metrics = ["mrr@2"]
    results.slices = {}
    out = io.StringIO()
    print_scores(results, file=out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["metric  value (95% CI)", "------  --------------", "mrr@2   0.833 [0.667, 0.981]"]
