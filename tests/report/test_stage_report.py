"""A pipeline's report (evret_core/report/stage_report.py): the terminal, Markdown and HTML show the same texts, made
once from the JSON data, so every quantity is one number in all four; text from data stays text."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from evret_core import EvaluationDataset
from evret_core.evaluation.stages import evaluate_pipeline, parse_pipeline
from evret_core.report.stage_report import pipeline_sections, print_pipeline, render_pipeline
from evret_core.statistics.inference import format_interval

REPO = Path(__file__).resolve().parents[2]
CORPUS = str(REPO / "examples" / "corpus.jsonl")


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    dataset = EvaluationDataset.load(str(REPO / "examples" / "dataset.jsonl"))
    settings = parse_pipeline({"stages": [
        {"name": "bm25", "retriever": {"name": "bm25", "options": {"corpus": CORPUS}}},
        {"name": "plain <b>|x", "retriever": {"name": "bm25", "options": {"corpus": CORPUS, "stemmer": None}}},
        {"name": "rrf", "fuse": ["bm25", "plain <b>|x"]},
        {"name": "packed", "pack": 120},
    ]}, "t")
    results = evaluate_pipeline(settings, dataset, ["ndcg@5", "recall@10"], judge="token-overlap", n_resamples=100)
    return json.loads(json.dumps(results.to_dict()))  # what --output writes, read back


class Cells(HTMLParser):
    """The text of every table cell of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.inside = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.inside = tag in ("td", "th")
        if self.inside:
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        self.inside = False

    def handle_data(self, text: str) -> None:
        if self.inside:
            self.cells[-1] += text


def _markdown_cells(text: str) -> list[str]:
    cells = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            parts = re.split(r"(?<!\\) \| ", line[2:-2])
            cells += [p.replace("\\|", "|").replace("&lt;", "<").replace("&gt;", ">") for p in parts]
    return cells


def test_the_four_outputs_show_the_same_numbers(data: dict[str, Any]) -> None:
    sections = pipeline_sections(data)
    expected = [cell for s in sections for cell in [*s.header, *(c for row in s.rows for c in row)]]
    page = Cells()
    page.feed(render_pipeline(data, "html"))
    assert page.cells == expected
    assert _markdown_cells(render_pipeline(data, "markdown")) == expected
    out = io.StringIO()
    print_pipeline(data, file=out)
    terminal = out.getvalue()
    for cell in expected:
        assert cell in terminal, cell
    # and each cell is the JSON's number: the stages' means and intervals, each difference and its interval
    for stage in data["stages"]:
        row = next(r for r in sections[0].rows if r[0] == stage["name"])
        assert row[3:] == [format_interval(stage["scores"][m], stage["intervals"][m]) for m in ("ndcg@5", "recall@10")]
        for m in ("ndcg@5", "recall@10"):
            per_query = [v[data["settings"]["metrics"].index(m)] for v in stage["per_query"].values()]
            assert stage["scores"][m] == pytest.approx(sum(per_query) / len(per_query), abs=1e-12)
    for c, row in zip(data["comparisons"], sections[1].rows, strict=True):
        low, high = c["interval"]
        assert row[:5] == [c["stage"], c["over"], c["metric"], f"{c['before']:.3f}", f"{c['after']:.3f}"]
        assert row[5] == f"{c['delta']:+.3f} [{low:+.3f}, {high:+.3f}]"
        assert row[9] == ("yes" if c["significant"] else "no")
    packing = data["packing"]["packed"]
    assert f"{packing['kept']:.2f} of {packing['offered']:.2f}" in terminal
    assert f"{packing['recall']['recall@10']['survives']:.1%} survives" in terminal


def test_text_from_data_stays_text(data: dict[str, Any]) -> None:
    page = render_pipeline(data, "html")
    assert "<b>" not in page and "plain &lt;b&gt;|x" in page
    assert "<script" not in page and "default-src 'none'" in page
    markdown = render_pipeline(data, "markdown")
    assert "plain &lt;b&gt;\\|x" in markdown
    out = io.StringIO()
    print_pipeline({**data, "stages": [{**data["stages"][0], "name": "evil\x1b[2J"}, *data["stages"][1:]]}, file=out)
    assert "\x1b" not in out.getvalue() and "evil\\x1b[2J" in out.getvalue()


def test_only_markdown_and_html() -> None:
    from evret_core.contracts.errors import EvretError

    with pytest.raises(EvretError, match="markdown or html, not 'latex'"):
        render_pipeline({"settings": {}, "stages": []}, "latex")
