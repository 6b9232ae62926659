"""The tables of a conversation run, built once from its results and laid out for the terminal (here, through
:func:`~evret_core.report.terminal.text_table`) and for Markdown and HTML
(:mod:`evret_core.report.conversation_document`): forms x metrics, the differences from the baseline form, the
first metric per turn index, the first metric per tag value; then the notes. Every number is formatted here once,
so the terminal, the reports and the JSON say the same."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from evret_core.contracts.errors import visible
from evret_core.report.terminal import format_p, print_table
from evret_core.results.conversation_results import ConversationResults
from evret_core.statistics.inference import format_interval

__all__ = ["ConversationTable", "conversation_notes", "conversation_tables", "print_conversation_results"]


@dataclass
class ConversationTable:
    """A titled table: headers, rows of formatted cells, and a note per row (``(small)``)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    align: str = ""
    suffixes: list[str] = field(default_factory=list)


def _signed(value: float, interval: list[float] | None) -> str:
    shown = f"{value:+.3f}"
    return shown if not interval else f"{shown} [{interval[0]:+.3f}, {interval[1]:+.3f}]"


def conversation_tables(results: ConversationResults) -> list[ConversationTable]:
    """The four tables of a conversation run (a table without rows is left out)."""
    level = f"{results.confidence_level:.0%}"
    first = results.metrics[0]
    tables = [ConversationTable(
        f"query forms ({level} CI, {'conversations' if results.unit == 'conversation' else 'turns'} resampled)",
        ["form", *results.metrics, "turns / conversations"],
        [[form, *[format_interval(results.scores[form][m], results.intervals.get(form, {}).get(m))
                  if m in results.scores.get(form, {}) else "-" for m in results.metrics],
          f"{results.n.get(form, {}).get('turns', 0)} / {results.n.get(form, {}).get('conversations', 0)}"]
         for form in results.forms])]
    rows: list[list[str]] = []
    for d in results.differences:
        p = "-" if d.get("p_value") is None else f"p={format_p(d['p_value'])} (adj {format_p(d['p_adjusted'])})"
        mean = "-" if d.get("mean") is None else _signed(d["mean"], d.get("interval"))
        rows.append([f"{d['b']} - {d['a']}", d["metric"], mean, p, f"{d['n_turns']} / {d['n_conversations']}",
                     "*" if d.get("significant") else ""])
    if rows:
        unit = (f"paired over {results.n.get(results.baseline_form, {}).get('conversations', 0)} conversations"
                if results.unit == "conversation" else "paired over turns")
        tables.append(ConversationTable(f"differences ({unit}; {results.test}; Holm; * adjusted p < 0.05)",
                                        ["difference", "metric", f"mean [{level} CI]", "p", "turns / conv.", ""],
                                        rows))
    indexes = sorted({int(i) for cells in results.by_turn_index.values() for i in cells})
    if indexes:
        index_rows, suffixes = [], []
        for index in indexes:
            cells = [results.by_turn_index.get(form, {}).get(str(index)) for form in results.forms]
            n = max((c["n"] for c in cells if c), default=0)
            index_rows.append([str(index), str(n), *[
                f"{c['scores'][first]:.3f}" if c and first in c["scores"] else "-" for c in cells]])
            suffixes.append("  (small)" if any(c and c.get("small") for c in cells) else "")
        tables.append(ConversationTable(f"{first} per turn index", ["turn", "n", *results.forms], index_rows,
                                        suffixes=suffixes))
    for tag, values in results.slices.items():
        slice_rows, suffixes = [], []
        for value, by_form in values.items():
            n = max((c["n"] for c in by_form.values()), default=0)
            slice_rows.append([value, str(n), *[
                format_interval(by_form[f]["scores"][first], by_form[f]["intervals"].get(first))
                if f in by_form else "-" for f in results.forms]])
            suffixes.append("  (small)" if any(c.get("small") for c in by_form.values()) else "")
        tables.append(ConversationTable(f"{first} by {tag}", [tag, "n", *results.forms], slice_rows,
                                        suffixes=suffixes))
    return tables


def conversation_notes(results: ConversationResults) -> list[str]:
    """What the run left out or spent: history-only turns, turns missing a form, unmeasured judgments, the
    rewriter's cost."""
    notes = []
    unmeasured: dict[str, Any] = results.unmeasured
    if unmeasured.get("history_only_turns"):
        notes.append(f"{unmeasured['history_only_turns']} turns carry no labels: kept as history, not scored")
    for form, missing in (unmeasured.get("forms") or {}).items():
        if missing:
            notes.append(f"{len(missing)} turns have no {form} text: unmeasured under {form} and left out of its "
                         f"pairs (e.g. {', '.join(missing[:3])})")
    if unmeasured.get("judgments"):
        notes.append(f"{unmeasured['judgments']} judgments could not be made")
    rewriter = results.stats.get("rewriter")
    if isinstance(rewriter, dict):
        for provider, cost in (rewriter.get("cost") or {}).items():
            notes.append(f"rewriter {provider}: {cost.get('calls', 0)} call(s), {cost.get('cache_hits', 0)} cache "
                         f"hit(s)")
    return notes


def print_conversation_results(results: ConversationResults, title: str | None = None,
                               file: TextIO | None = None) -> None:
    """The four tables and the notes on the terminal."""
    out = file or sys.stdout
    if title:
        print(visible(title), file=out)
    for i, table in enumerate(conversation_tables(results)):
        print(("" if i == 0 else "\n") + visible(table.title) + ":", file=out)
        print_table(table.rows, table.headers, file=out, suffixes=table.suffixes, align=table.align)
    for note in conversation_notes(results):
        print(f"note: {visible(note)}", file=out)
