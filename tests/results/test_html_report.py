"""The HTML report rendered by headless Chromium: no console errors, every section present, text escaped."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evret_core import (
    EvaluationDataset,
    EvaluationResults,
    Evaluator,
    QueryExample,
    make_report,
    write_report,
)
from evret_core.cli import main
from evret_core.report import build_report_data, render_report
from evret_core.report.common import clean_text
from evret_core.report.drilldown import PREVIEW_CHARS, script_json, text_cap
from evret_core.report.html import SECTIONS

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/test-setup.sh installs it")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/test-setup.sh does it)")
    return path


def render(html_file: Path, tmp_path: Path, fragment: str = "") -> tuple[str, list[str]]:
    """The DOM after the scripts ran, and every console message Chromium logged (``fragment``: e.g. ``#q=*``)."""
    profile = tmp_path / f"profile-{html_file.stem}"
    proc = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
         html_file.resolve().as_uri() + fragment],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def test_console_check_catches_errors(tmp_path: Path) -> None:
    """The check below is real: a page with a script error and a blocked fetch is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>missingFunction();</script></body></html>')
    _, console = render(bad, tmp_path)
    assert any("missingFunction is not defined" in line for line in console)


def test_two_run_report_renders_cleanly(run_files, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.html"
    assert main(["report", str(run_files["titles"]), str(run_files["full"]), "--format", "html",
                 "--output", str(out)]) == 0
    html = out.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the report must not load anything"
    dom, console = render(out, tmp_path)
    assert console == [], console
    assert 'data-ready="yes"' in dom  # the report's script ran to its end
    for section in SECTIONS:
        assert f'<section id="{section}"' in dom, section
    curves = re.search(r'<section id="curves".*?</section>', dom, re.S)
    assert curves and curves.group(0).count("<polyline") == 3 * 2  # ndcg, recall, mrr x two runs
    assert 'id="slice-metric"' in dom and "by length" in dom
    comparison = re.search(r'<section id="comparison".*?</section>', dom, re.S)
    assert comparison and "full vs titles" in comparison.group(0) and 'class="num sig' in comparison.group(0)
    assert comparison.group(0).count('<a href="#q=') >= 3  # gained and lost queries link to their drill-down
    queries = re.search(r'<section id="queries".*?</section>', dom, re.S)
    assert queries and queries.group(0).count('<details class="q"') == 300
    assert "of 300 queries" in dom  # the filter script counted them


def test_hostile_texts_are_escaped(tmp_path: Path) -> None:
    hostile = '<script>console.error("xss")</script><img src=x onerror="console.error(1)">&amp; </details>'
    ds = EvaluationDataset(name="hostile", queries=[
        QueryExample(query_id=f"q{i}<b>", query_text=f"what is {hostile} {i}", expected_answers=[f"answer {i} {hostile}"],
                     tags={"kind<i>": "x</section>" if i % 2 else "y"})
        for i in range(6)
    ])

    def retriever(query: str, k: int) -> list[dict[str, object]]:
        i = query.split()[-1]
        return [{"doc_id": f"doc<{i}>", "text": f"answer {i} {hostile}"}, {"doc_id": "z", "text": hostile}]

    results = Evaluator(retriever, ["recall@2", "ndcg@2"], judge="exact", n_resamples=50).evaluate(ds)
    assert results.scores["recall@2"] == 1.0
    page = tmp_path / "hostile.html"
    page.write_text(render_report(build_report_data({"run<1>": results, "run&2": results}), "html"))
    dom, console = render(page, tmp_path)
    assert console == [], console
    assert "<img" not in dom and "<script>console" not in dom
    assert "&lt;script&gt;console.error(\"xss\")&lt;/script&gt;" in dom or "&lt;script&gt;console.error(&quot;xss&quot;)" in dom
    assert dom.count('<section id="') == len(SECTIONS)
    assert 'data-ready="yes"' in dom


def test_single_run_report_has_all_sections(run_files, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "single.html"
    assert main(["report", str(run_files["full"]), "--format", "html", "--output", str(out)]) == 0
    dom, console = render(out, tmp_path)
    assert console == []
    for section in SECTIONS:
        assert f'<section id="{section}"' in dom
    assert "One run" in dom


# -- hostile strings in every place the report shows text ---------------------------------------------------------
HOSTILE = ('</script><script>console.error("xss")</script><!-- "quoted" \'single\' '
           '<img src=x onerror="console.error(1)"> &amp; \u2028 </details>')
LONE = "\ud800"


def drill_data(html: str) -> dict[str, Any]:
    """The drill-down JSON block of a report page, parsed."""
    found = re.search(r'<script type="application/json" id="evret-data">(.*?)</script>', html, re.S)
    assert found, "no drill-down data block"
    return json.loads(found.group(1))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def hostile_results() -> EvaluationResults:
    """Results whose query ids and texts, answers, doc ids and texts, tag names and values (slice names),
    retriever config and dataset name all hold script tags, quotes, ``</script>``, ``<!--`` and lone surrogates."""
    ds = EvaluationDataset(name=f"data {HOSTILE}", queries=[
        QueryExample(query_id=f"q{i}<b>\"'", query_text=f"what is {HOSTILE} {i}",
                     expected_answers=[f"answer {i} {HOSTILE}"],
                     tags={f"kind<i>{HOSTILE}": f"x {HOSTILE}" if i % 2 else "y"})
        for i in range(6)
    ])

    class Retriever:
        def retrieve(self, query: str, k: int) -> list[dict[str, object]]:
            i = query.split()[-1]
            return [{"doc_id": f"doc<{i}>{HOSTILE}", "text": f"answer {i} {HOSTILE}"},
                    {"doc_id": "z", "text": HOSTILE * 40}]  # long: cut to a preview in the page

        def batch_retrieve(self, queries: list[str], k: int) -> list[list[dict[str, object]]]:
            return [self.retrieve(q, k) for q in queries]

        def config(self) -> dict[str, object]:
            return {"name": f"retriever {HOSTILE}", "base_url": f"http://h/{HOSTILE}{LONE}"}

    results = Evaluator(Retriever(), ["recall@2", "ndcg@2"], judge="exact", n_resamples=50,
                        min_slice_size=1).evaluate(ds)
    assert results.scores["recall@2"] == 1.0
    results.per_query = dict(results.per_query.items())  # per-query views are built on demand: keep these to edit
    for q in results.per_query.values():  # lone surrogates: the input side may refuse them, a results file can hold them
        q.query_text += LONE
        q.expected_answers.append(f"alias {LONE}{HOSTILE}")
        q.judgments[1].text = (q.judgments[1].text or "") + LONE
    results.slices = {tag: {value + LONE: sl for value, sl in values.items()} for tag, values in results.slices.items()}
    return results


def test_hostile_strings_are_escaped_in_the_page_source(hostile_results: EvaluationResults) -> None:
    runs = {f"run<1>{HOSTILE}": hostile_results, "run&2\"": hostile_results}
    html = make_report(runs, format="html")
    html.encode("utf-8")  # no lone surrogate left in the page itself
    assert html.count("</script") == 2  # the data block's and the script's own: nothing closes them early
    assert "<!--" not in html and "<img" not in html and "<script>console" not in html
    assert html.count("<script") == 2
    escaped = "&lt;/script&gt;&lt;script&gt;console.error(&#34;xss&#34;)&lt;/script&gt;"
    sections = {s: re.search(rf'<section id="{s}".*?</section>', html, re.S) for s in SECTIONS}
    for section in ("metrics", "comparison", "slices", "manifest"):  # run names, tags and config values
        found = sections[section]
        assert found and escaped in found.group(0), section
    assert escaped in html.split("<nav>")[0]  # the title: dataset and run names
    data = drill_data(html)
    source = hostile_results.per_query
    assert data["runs"] == list(runs)
    for q in data["queries"]:  # the script gets the strings back exactly, lone surrogates as U+FFFD
        original = source[q["id"]]
        assert q["text"] == clean_text(original.query_text) and q["text"].endswith("\ufffd")
        assert q["answers"] == [clean_text(a) for a in original.expected_answers]
        assert q["tags"] == [list(kv) for kv in original.tags.items()]
        docs = q["runs"][0]["d"]
        assert [data["ids"][d[0]] for d in docs] == [j.doc_id for j in original.judgments]
        for d, j in zip(docs, original.judgments, strict=True):
            assert clean_text(j.text or "").startswith(data["texts"][d[2]]) and data["lengths"][d[2]] == len(j.text or "")
    slices = sections["slices"]
    assert slices and "x " + escaped in slices.group(0) and "\ufffd" in slices.group(0)  # surrogate in HTML: U+FFFD


def test_hostile_strings_stay_text_in_the_browser(hostile_results: EvaluationResults, tmp_path: Path) -> None:
    page = tmp_path / "hostile.html"
    write_report(page, {f"run<1>{HOSTILE}": hostile_results, "run&2": hostile_results})
    dom, console = render(page, tmp_path, fragment="#q=*")  # every query opened: the whole drill-down drawn
    assert console == [], console
    assert 'data-ready="yes"' in dom
    assert "<img" not in dom and "<script>console" not in dom
    assert dom.count('<section id="') == len(SECTIONS)
    queries = re.search(r'<section id="queries".*?</section>', dom, re.S)
    assert queries
    shown = queries.group(0)
    assert shown.count('<details class="q" data-filled="yes" open=""') == 6
    assert shown.count("&lt;/script&gt;&lt;script&gt;console.error(\"xss\")&lt;/script&gt;") >= 6 * 6
    assert shown.count("more (") == 12  # the long text of each query and run is cut to a preview


# -- the size of a large report ------------------------------------------------------------------------------------
def test_large_report_stays_small_with_every_query(large_runs: dict[str, EvaluationResults], tmp_path: Path) -> None:
    """2 runs x 1,793 queries of 10 passages (26.6 MB before the drill-down became one JSON block)."""
    page = write_report(tmp_path / "large.html", large_runs)
    size = page.stat().st_size
    assert size <= 5_000_000, size
    html = page.read_text(encoding="utf-8")
    data = drill_data(html)
    assert data["runs"] == ["bm25", "dense"]
    ids = [q["id"] for q in data["queries"]]
    assert len(ids) == len(set(ids)) == 1793 and set(ids) == set(large_runs["bm25"].per_query)
    for q in data["queries"]:
        for run, entry in zip(large_runs.values(), q["runs"], strict=True):
            original = run.per_query[q["id"]]
            assert [data["ids"][d[0]] for d in entry["d"]] == [j.doc_id for j in original.judgments]
            assert [d[3] for d in entry["d"]] == original.gains
            assert entry["s"] == [round(original.scores[m], 6) for m in run.metrics]
            for d, j in zip(entry["d"], original.judgments, strict=True):
                stored = data["texts"][d[2]]
                assert j.text and j.text.startswith(stored) and len(stored) >= min(len(j.text), data["preview"])
    assert data["cap"] >= PREVIEW_CHARS  # 5 MB of distinct passages do not fit whole: each is cut to one length
    assert all(len(t) == min(n, data["cap"]) for t, n in zip(data["texts"], data["lengths"], strict=True))
    dom, console = render(page, tmp_path)
    assert console == [], console
    assert dom.count('<details class="q"') == 1793 and "1793 of 1793 queries" in dom
    longest = max((t for r in large_runs.values() for t in r.slices["topic"]), key=len)
    assert f'<div class="slabel">{longest}</div>' in dom  # slice labels are whole (they wrap, not cut)


def test_text_cap_fits_the_budget() -> None:
    texts = ["a" * n for n in (50, 400, 900, 3000, 12000)] + ["é" * 2000]
    assert text_cap(texts, 10**6) is None
    for budget in (3000, 6000, 9000):
        cap = text_cap(texts, budget)
        assert cap is not None and cap >= PREVIEW_CHARS
        assert sum(len(t[:cap].encode()) for t in texts) <= budget < sum(len(t[:cap + 1].encode()) for t in texts)
    assert text_cap(texts, 10) == 1  # no floor: the budget holds (tests/results/test_report_budget.py)


def test_drilldown_json_is_safe_in_a_script_element() -> None:
    value = {"a": "</script><!--\u2028&", "b": "x\ud800y"}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    text.encode("utf-8")
    assert json.loads(text) == {"a": value["a"], "b": "x\ufffdy"}


# -- identical runs in the Metric@k charts (newcomer item 17) -------------------------------------------------------
def _png_pixels(path: Path) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are)."""
    import struct
    import zlib

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    pixels = [(row[x], row[x + 1], row[x + 2]) for row in rows for x in range(0, stride, channels)]
    return width, height, pixels


def test_identical_runs_stay_visible_in_the_curves(tmp_path: Path) -> None:
    """Two runs with the same values: the second line no longer hides the first (a dash pattern, a narrower line
    over a wider one), and the chart says they coincide; checked on Chromium's pixels."""
    from evret_core.report.html import PALETTE, curve_chart, environment

    values = [0.2, 0.35, 0.5, 0.55, 0.6, 0.62, 0.7, 0.72, 0.8, 0.81]
    chart = curve_chart("hit_rate", {"a": (0, values), "b": (1, list(values)), "c": (2, [v / 2 for v in values])})
    a, b, c = chart["lines"]
    assert a["dash"] != b["dash"] and float(a["width"]) > float(b["width"])
    assert c["width"] == b["width"] or float(c["width"]) <= float(a["width"])
    assert chart["overlaps"] == ["b draws over a (the same values)"]
    page = tmp_path / "curve.html"
    page.write_text(environment().from_string(
        '{% import "charts.html.j2" as charts %}<!DOCTYPE html><html><head><style>{% include "style.css.j2" %}'
        '</style></head><body style="background:#fff">{{ charts.curve(chart) }}</body></html>'
    ).render(chart=curve_chart("hit_rate", {"a": (0, values), "b": (1, list(values))}), palette=PALETTE))
    shot = tmp_path / "curve.png"
    proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile-shot'}",
                           f"--screenshot={shot}", "--window-size=600,400", "--hide-scrollbars",
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]

    def near(colour: str) -> int:
        target = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        return sum(1 for p in pixels if sum((x - y) ** 2 for x, y in zip(p, target, strict=True)) < 50 ** 2)

    _, _, pixels = _png_pixels(shot)
    first, second = near(PALETTE[0]), near(PALETTE[1])
    assert second > 200 and first > 0.3 * second, (first, second)  # both runs visible, not one over the other
