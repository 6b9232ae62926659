"""The report of a conversation run as Markdown or one self-contained HTML file: the four tables of
:mod:`evret_core.report.conversation_tables` (the same cells the terminal prints), the notes, and a per-turn
drill-down (each form's query text, its top retrieved ids with the relevant ones marked, and its scores)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from evret_core.contracts.errors import EvretError
from evret_core.report.conversation_tables import ConversationTable, conversation_notes, conversation_tables
from evret_core.results.conversation_results import ConversationResults

__all__ = ["CONVERSATION_FORMATS", "render_conversation"]

CONVERSATION_FORMATS = ("markdown", "html")
DRILL_DOWN_IDS = 5  # retrieved ids shown per form and turn


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _rows(table: ConversationTable) -> list[list[str]]:
    """The table's rows with the ``(small)`` flags as a last column when any row has one."""
    if not any(table.suffixes):
        return table.rows
    return [[*row, (table.suffixes[i].strip() if i < len(table.suffixes) else "")] for i, row in enumerate(table.rows)]


def _headers(table: ConversationTable) -> list[str]:
    return [*table.headers, ""] if any(table.suffixes) else table.headers


def _drill_down(results: ConversationResults) -> tuple[list[str], list[list[str]]]:
    """One row per turn and form: the query, the top retrieved ids (relevant ones marked ``*``), the scores."""
    headers = ["turn", "form", "query", "retrieved (* relevant)", *results.metrics]
    rows = []
    for turn_id, record in results.per_turn.items():
        for form, query in record.forms.items():
            result = results.queries.get(query.query_id)
            if result is None:
                continue
            ids = [f"{d}{'*' if result.relevant_ids.get(d, 0) > 0 else ''}"
                   for d in result.retrieved_ids[:DRILL_DOWN_IDS]]
            rows.append([turn_id, form, query.query, ", ".join(ids),
                         *[f"{result.scores[m]:.3f}" if m in result.scores else "-" for m in results.metrics]])
    return headers, rows


def render_markdown(results: ConversationResults, title: str = "Conversation run") -> str:
    lines = [f"# {_md_cell(title)}", ""]
    for table in conversation_tables(results):
        lines += [f"## {_md_cell(table.title)}", "", *_markdown_table(_headers(table), _rows(table)), ""]
    notes = conversation_notes(results)
    if notes:
        lines += ["## Notes", "", *[f"- {_md_cell(n)}" for n in notes], ""]
    headers, rows = _drill_down(results)
    lines += ["## Turns", "", *_markdown_table(headers, rows)]
    return "\n".join(lines) + "\n"


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(results: ConversationResults, title: str = "Conversation run") -> str:
    parts = [f"<h1>{html.escape(title)}</h1>"]
    for table in conversation_tables(results):
        parts.append(f"<h2>{html.escape(table.title)}</h2>{_html_table(_headers(table), _rows(table))}")
    notes = conversation_notes(results)
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    headers, rows = _drill_down(results)
    parts.append(f"<details><summary>Turns ({len(results.per_turn)})</summary>{_html_table(headers, rows)}"
                 f"</details>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1em}"
             "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;white-space:pre-wrap}")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def render_conversation(results: ConversationResults, fmt: str, title: str = "Conversation run") -> str:
    """The report of one conversation run in ``fmt``: ``markdown`` or ``html``."""
    if fmt == "markdown":
        return render_markdown(results, title)
    if fmt == "html":
        return render_html(results, title)
    raise EvretError(f"format {fmt!r}: conversation runs are reported as {' or '.join(CONVERSATION_FORMATS)} "
                     f"(the results JSON holds everything else)")
