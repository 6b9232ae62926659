"""The RAG HTML report at real size (issue 33, newcomer item 11): a nav bar, search and filters (attribution, verdict
under a condition, slice), sortable tables, verdicts in colour, a chart of every score by condition with its
interval, and the compact differences table; driven in headless Chromium as a user would (typing, choosing,
clicking), with every text from the results kept text."""

from __future__ import annotations

import html as htmllib
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.rag.scores.adversarial_scores import outcome_scores
from evret_core.report.drilldown import PAGE_BUDGET
from evret_core.report.rag_compare import rag_html

from .conftest import EXAMPLE, squad_path

# as tests/results/test_html_report.py drives Chromium (a test module of another folder cannot be imported here)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]

CONDITIONS = ["gold", "retrieved", "counterfactual", "injection", "missing-gold", "irrelevant-only"]
HOSTILE = ('</script><script>console.error("xss")</script><!-- "q" \'s\' <img src=x onerror="console.error(1)"> '
           '&amp; </details>')


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/test-setup.sh installs it")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/test-setup.sh does it)")
    return path


def drive(page: Path, tmp_path: Path, actions: str = "", fragment: str = "") -> tuple[str, Any, list[str]]:
    """The DOM after the page's script ran, what ``actions`` returned, and every console message. ``actions`` is
    the body of a function run after the page's own script (a user typing, choosing and clicking: events are
    dispatched on the page's real widgets); it gets the helpers below and returns a JSON-able value."""
    run = page
    if actions:
        run = tmp_path / f"driven-{page.stem}.html"
        helpers = """
function rows() { return Array.prototype.map.call(document.querySelectorAll('details.q'), function (d) {
  return {id: d.querySelector('summary b').textContent, hidden: d.hidden}; }); }
function visible() { return rows().filter(function (r) { return !r.hidden; }).map(function (r) { return r.id; }); }
function pick(id, key) { var s = document.getElementById(id); s.value = '';
  Array.prototype.forEach.call(s.options, function (o) { if (o.getAttribute('data-key') === key) { s.value = o.value; } });
  s.dispatchEvent(new Event('change')); return s.value; }
function type(text) { var box = document.getElementById('q-search'); box.value = text;
  box.dispatchEvent(new Event('input')); }
function click(selector) { document.querySelector(selector).click(); }
function reset() { click('#q-reset'); }
"""
        script = (f"<script>(function () {{ {helpers}\nvar out = (function () {{ {actions} }})();\n"
                  "var pre = document.createElement('pre'); pre.id = 'test-out'; pre.textContent = JSON.stringify(out);"
                  " document.body.appendChild(pre); })();</script>")
        run.write_text(page.read_text(encoding="utf-8") + script, encoding="utf-8")
    proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           run.resolve().as_uri() + fragment], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    found = re.search(r'<pre id="test-out">(.*?)</pre>', proc.stdout, re.S)
    return proc.stdout, json.loads(htmllib.unescape(found.group(1))) if found else None, console


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ragpage") / "run.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "50", "--adversarial",
                 "counterfactual,injection,missing-gold,irrelevant-only", "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def page(run_file: Path) -> Path:
    out = run_file.with_suffix(".html")
    assert main(["report", str(run_file), "--format", "html", "--output", str(out), "--dataset",
                 str(EXAMPLE / "questions.jsonl"), "--corpus", str(EXAMPLE / "corpus.jsonl")]) == 0
    return out


def _ids(results: RagResults, keep: Any) -> list[str]:
    return [qid for qid, q in results.per_question.items() if keep(q)]


def _expected(q: Any) -> list[str]:
    return list(dict.fromkeys(a for variants in q.answers for a in variants))


def _wrong(q: Any, condition: str) -> bool:
    oc = q.conditions.get(condition)
    return oc is not None and not oc.skipped and oc.answer is not None and oc.correct is False


def _adopted(q: Any) -> bool:
    return any(outcome_scores(oc, _expected(q)).get("adopted") == 1.0 for oc in q.conditions.values())


def test_the_page_has_a_nav_bar_and_its_sections(page: Path, tmp_path: Path) -> None:
    dom, _, console = drive(page, tmp_path)
    assert console == [], console
    assert 'data-ready="yes"' in dom
    nav = re.search(r"<nav>(.*?)</nav>", dom, re.S)
    assert nav
    links = re.findall(r'href="#([a-z]+)"', nav.group(1))
    assert links == ["overview", "generation", "retrieval", "attribution", "differences", "adversarial", "slices",
                     "questions", "texts", "manifest"]
    for section in links:
        assert f'<section id="{section}"' in dom, section
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page.read_text(encoding="utf-8"))


def test_filters_and_search_hide_the_other_questions(run_file: Path, page: Path, tmp_path: Path) -> None:
    results = RagResults.from_json(run_file)
    _, out, console = drive(page, tmp_path, """
var r = {all: visible()};
pick('q-attribution', 'generator_failure'); r.attribution = visible();
pick('q-slice', 'type = factoid'); r.attribution_and_slice = visible();
reset(); r.reset = visible();
pick('q-condition', 'counterfactual'); r.has_case = visible();
pick('q-verdict', 'wrong'); r.counterfactual_wrong = visible();
pick('q-condition', ''); pick('q-verdict', 'adopted the planted value'); r.adopted = visible();
pick('q-verdict', 'refused wrongly'); r.refused_wrongly = visible();
reset(); type('Wi-Fi'); r.search = visible();
type('5 EUROS'); r.answers = visible();
r.count = document.getElementById('q-count').textContent;
type('no such words'); r.none = !document.getElementById('q-none').hidden;
r.hash = location.hash;
return r;""")
    assert console == [], console
    everything = list(results.per_question)
    assert out["all"] == out["reset"] == everything and len(everything) == 13
    assert out["attribution"] == _ids(results, lambda q: q.attribution == "generator_failure") != []
    assert out["attribution_and_slice"] == _ids(
        results, lambda q: q.attribution == "generator_failure" and q.tags.get("type") == "factoid")
    assert out["attribution_and_slice"] != out["attribution"]
    assert out["has_case"] == _ids(results, lambda q: not q.conditions["counterfactual"].skipped) != everything
    assert out["counterfactual_wrong"] == _ids(results, lambda q: _wrong(q, "counterfactual")) != []
    assert out["adopted"] == _ids(results, _adopted) != []
    refused_wrongly = _ids(results, lambda q: any(
        oc.correct is False and oc.answer is not None and oc.answer.refused for oc in q.conditions.values()))
    assert out["refused_wrongly"] == refused_wrongly != []
    assert out["search"] == _ids(results, lambda q: "wi-fi" in q.question.lower()) == ["r06"]
    assert out["answers"] == _ids(results, lambda q: "5 euros" in " ".join(_expected(q)).lower()) != []
    assert out["count"] == f"{len(out['answers'])} of 13 questions"
    assert out["none"] is True
    assert out["hash"] == "#questions?search=no%20such%20words"  # the address follows the filters


def test_sorting_reorders_the_questions_and_the_tables(run_file: Path, page: Path, tmp_path: Path) -> None:
    results = RagResults.from_json(run_file)
    _, out, console = drive(page, tmp_path, """
var r = {};
click('.qhead button[data-sort="question"]'); r.up = visible();
click('.qhead button[data-sort="question"]'); r.down = visible();
click('.qhead button[data-sort="wrong"]'); r.wrong = visible();
click('.qhead button[data-sort="c2"]'); r.counterfactual = visible();
reset(); r.reset = visible();
var table = document.querySelector('#generation table.sortable');
var gold = table.tHead.rows[0].cells[1].querySelector('button');
gold.click();
r.gold = Array.prototype.map.call(table.tBodies[0].rows, function (row) { return row.cells[0].textContent; });
r.sort = table.tHead.rows[0].cells[1].getAttribute('aria-sort');
gold.click();
r.gold_up = Array.prototype.map.call(table.tBodies[0].rows, function (row) { return row.cells[0].textContent; });
return r;""")
    assert console == [], console
    questions = {qid: q.question for qid, q in results.per_question.items()}
    assert out["up"] == sorted(questions, key=lambda qid: questions[qid].lower())
    assert out["down"] == sorted(questions, key=lambda qid: questions[qid].lower(), reverse=True)
    order = list(questions)
    wrong = {qid: sum(_wrong(q, c) for c in q.conditions) for qid, q in results.per_question.items()}
    assert out["wrong"] == sorted(order, key=lambda qid: (-wrong[qid], order.index(qid)))
    first = out["counterfactual"][: sum(_adopted(q) for q in results.per_question.values())]
    assert all(_adopted(results.per_question[qid]) for qid in first)  # worst first: the adopted ones
    assert out["reset"] == order
    gold = results.generation["gold"]
    shown = [m for m in out["gold"] if m in gold and gold[m] is not None]
    assert shown == sorted(shown, key=lambda m: -gold[m])  # high to low first, n/a rows last
    assert out["sort"] == "descending"
    assert [m for m in out["gold_up"] if m in gold and gold[m] is not None] == sorted(shown, key=lambda m: gold[m])


def test_deep_links_open_a_question_and_set_the_filters(run_file: Path, page: Path, tmp_path: Path) -> None:
    results = RagResults.from_json(run_file)
    dom, _, console = drive(page, tmp_path, fragment="#q=r05")
    assert console == [], console
    assert re.search(r'<details class="q" data-i="4" open="">', dom)
    assert dom.count('open=""') == 1
    dom, out, console = drive(page, tmp_path, "return [visible(), document.getElementById('q-verdict').value];",
                              fragment="#questions?condition=gold&verdict=wrong&attribution=generator_failure"
                                       "&sort=id&order=desc")
    assert console == [], console
    expected = _ids(results, lambda q: q.attribution == "generator_failure" and _wrong(q, "gold"))
    assert out[0] == sorted(expected, reverse=True) != [] and out[1] == "2"
    # the attribution table links to the questions it counts
    assert '<a href="#questions?attribution=retrieval_failure">' in dom or \
        '<a href="#questions?attribution=generator_failure">' in dom


def test_verdicts_are_in_colour(run_file: Path, page: Path, tmp_path: Path) -> None:
    results = RagResults.from_json(run_file)
    dom, out, console = drive(page, tmp_path, """
var colours = {};
['v-r', 'v-w', 'v-rr', 'v-rw', 'v-a', 'v-n'].forEach(function (cls) {
  var chip = document.querySelector('summary i.' + cls);
  colours[cls] = chip ? getComputedStyle(chip).backgroundColor : null; });
return colours;""")
    assert console == [], console
    assert all(out.values()) and len(set(out.values())) == len(out), out  # each verdict its own colour
    for qid, q in results.per_question.items():
        entry = re.search(rf"<summary><b>{qid}</b>.*?</summary>", dom, re.S)
        assert entry
        chips = re.findall(r'<i class="v (v-\w+)">', entry.group(0))
        expected = []
        for condition in CONDITIONS:
            oc = q.conditions[condition]
            scores = outcome_scores(oc, _expected(q))
            refused = oc.answer is not None and (oc.answer.refused or oc.answer.escalated)
            expected.append("v-n" if oc.skipped else "v-a" if scores.get("adopted") == 1.0
                            else "v-l" if scores.get("leaked") == 1.0
                            else ("v-rr" if oc.correct else "v-rw") if refused else "v-r" if oc.correct else "v-w")
        assert chips == expected, qid


def test_every_score_is_drawn_by_condition_with_its_interval(run_file: Path, page: Path, tmp_path: Path) -> None:
    results = RagResults.from_json(run_file)
    dom, out, console = drive(page, tmp_path, """
return Array.prototype.map.call(document.querySelectorAll('#generation svg.ichart'), function (svg) {
  var box = svg.getBBox(); return [svg.getAttribute('aria-label'), box.width, box.height]; });""")
    assert console == [], console
    drawn = {name: (w, h) for name, w, h in out}
    measured = [m for m in results.generation["retrieved"] if any(
        results.generation[c].get(m) is not None for c in CONDITIONS) and m != "behaviour_ok"]
    assert set(measured) <= set(drawn) and all(w > 200 and h > 100 for w, h in drawn.values())
    chart = re.search(r'<svg class="ichart" role="img" aria-label="correct".*?</svg>', dom, re.S)
    assert chart
    grid = [float(x) for x in re.findall(r'<line x1="([\d.]+)" x2="[\d.]+" y1=', chart.group(0))]
    left, right = grid[0], grid[-1]  # the axis from 0 to 1
    points = re.findall(r"<title>correct, (.*?): ([\d.]+) \[([\d.]+), ([\d.]+)\]</title>\s*"
                        r'<path class="s0" stroke-width="1.6" fill="none" d="M([\d.]+) ([\d.]+)H([\d.]+)M.*?'
                        r'<circle class="f0" cx="([\d.]+)"', chart.group(0), re.S)
    assert len(points) == len(CONDITIONS)
    for (name, mean, low, high, x_low, _, x_high, cx), condition in zip(points, CONDITIONS, strict=True):
        assert name == condition
        value, interval = results.generation[condition]["correct"], results.generation_intervals[condition]["correct"]
        assert mean == f"{value:.3f}" and [low, high] == [f"{x:.3f}" for x in interval]
        for x, v in ((cx, value), (x_low, interval[0]), (x_high, interval[1])):
            assert float(x) == pytest.approx(left + (right - left) * v, abs=0.11)


def test_differences_are_one_row_per_pair_and_agree_with_the_terminal(run_file: Path, page: Path) -> None:
    from evret_core.report.rag_tables import print_rag

    results = RagResults.from_json(run_file)
    html = page.read_text(encoding="utf-8")
    section = re.search(r'<section id="differences">.*?</section>', html, re.S)
    assert section
    rows = re.findall(r"<tr[^>]*><td class=\"nowrap\">(.*?)</td><td class=\"num\">(\d+)</td>(.*?)</tr>",
                      section.group(0), re.S)
    assert len(rows) == 15 == len(results.differences) // 3  # 6 conditions: 15 pairs, not 45 rows
    assert re.findall(r"<th>(\w+)</th>", section.group(0))[-3:] == ["exact", "f1", "correct"]
    terminal = io.StringIO()
    print_rag(results, file=terminal)
    lines = terminal.getvalue().split("differences against retrieved")[1].splitlines()[2:7]
    for line, (label, _, cells) in zip(lines, rows[:5], strict=True):
        condition = line.split()[0]
        assert label == f"{condition} - retrieved"
        values = re.findall(r">(-?[\d.]+ \[-?[\d.]+, -?[\d.]+\])<", cells)
        assert values == re.findall(r"-?[\d.]+ \[-?[\d.]+, -?[\d.]+\]", line)  # one number per quantity
    markdown_rows = [line for line in rag_markdown_of(results).splitlines() if re.match(r"\| \S+ - \S+ \|", line)]
    assert len(markdown_rows) == 15


def rag_markdown_of(results: RagResults) -> str:
    from evret_core.report.rag_compare import rag_markdown

    return rag_markdown({"run": results})


def _rename(data: dict[str, Any], old: str, new: str) -> None:
    """Rename condition ``old`` everywhere a results file names it."""
    data["conditions"] = [new if c == old else c for c in data["conditions"]]
    for part in ("generation", "generation_intervals", "generation_n", "adversarial"):
        data[part] = {new if k == old else k: v for k, v in data[part].items()}
    for d in data["differences"]:
        d["a"], d["b"] = (new if d["a"] == old else d["a"]), (new if d["b"] == old else d["b"])
    for values in data["slices"].values():
        for value, by in values.items():
            values[value] = {new if k == old else k: v for k, v in by.items()}
    for kind in ("skipped", "answers", "relevance"):
        if isinstance(data["unmeasured"].get(kind), dict):
            data["unmeasured"][kind] = {new if k == old else k: v for k, v in data["unmeasured"][kind].items()}
    for q in data["per_question"].values():
        q["conditions"] = {new if k == old else k: v for k, v in q["conditions"].items()}


def test_markup_in_names_stays_text_in_every_new_widget(run_file: Path, tmp_path: Path) -> None:
    """Condition names (filter options, column headers, chart labels, the differences), tag names and values
    (slice options), run names (in the attribution filter's options), search text and address parameters (filter values and sort keys)
    that hold markup and quotes: shown as text, and the filters still work on them."""
    data = json.loads(run_file.read_text(encoding="utf-8"))
    condition = f"inj {HOSTILE}"
    _rename(data, "injection", condition)
    tag, value = f"type {HOSTILE}", f"fact\"oid {HOSTILE}"
    data["slices"] = {tag if k == "type" else k: ({value if v == "factoid" else v: s for v, s in vs.items()}
                                                  if k == "type" else vs) for k, vs in data["slices"].items()}
    for q in data["per_question"].values():
        q["tags"] = {tag if k == "type" else k: (value if v == "factoid" else v) for k, v in q["tags"].items()}
    hostile_file = tmp_path / "hostile.json"
    hostile_file.write_text(json.dumps(data), encoding="utf-8")
    results = RagResults.from_json(hostile_file)
    page = tmp_path / "hostile.html"
    page.write_text(rag_html({f"run {HOSTILE}": results, "plain": RagResults.from_json(run_file)}),
                    encoding="utf-8")
    source = page.read_text(encoding="utf-8")
    assert "<img" not in source and "<script>console" not in source and "<!--" not in source
    assert source.count("<script") == 2 and source.count("</script>") == 2  # the index and the page's script
    escaped = "&lt;/script&gt;&lt;script&gt;console.error(&#34;xss&#34;)&lt;/script&gt;"
    for section in ("overview", "generation", "differences", "adversarial", "slices", "questions"):
        found = re.search(rf'<section id="{section}">.*?</section>', source, re.S)
        assert found and escaped in found.group(0), section
    def js(text: str) -> str:  # a JS string literal that cannot close the test's own <script> element
        return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e")

    actions = f"""
var r = {{searched: document.getElementById('q-search').value, shown: visible().length}};
reset(); r.condition = pick('q-condition', {js(f"run {HOSTILE} · {condition}")});
pick('q-verdict', 'right'); r.right = visible();
reset(); r.slice = pick('q-slice', {js(f"{tag} = {value}")}); r.sliced = visible();
reset(); r.attribution = pick('q-attribution', {js(f"run {HOSTILE}: generator_failure")}); r.odd = visible();
reset(); type({js(HOSTILE)}); r.search = visible().length;
click('.qhead button[data-sort="c3"]'); r.sorted = visible().length;
r.options = Array.prototype.map.call(document.querySelectorAll('#q-slice option'), function (o) {{
  return o.textContent; }});
return r;"""
    dom, out, console = drive(page, tmp_path, actions,
                              fragment="#questions?sort=%3Cimg%20src%3Dx%20onerror%3Dconsole.error(2)%3E"
                                       "&slice=%3C%2Fscript%3E&verdict=%E0%A4%A&search=%3Cb%3Ex")
    assert console == [], console
    assert "<img" not in dom and "<script>console" not in dom and 'data-ready="yes"' in dom
    assert out["searched"] == "<b>x" and out["shown"] == 0  # the address's search is text, matching nothing
    assert out["condition"] != "" and out["slice"] != "" and out["attribution"] != ""
    assert out["right"] == _ids(results, lambda q: q.conditions[condition].correct is True) != []
    assert out["sliced"] == _ids(results, lambda q: q.tags.get(tag) == value) != []
    assert out["odd"] == _ids(results, lambda q: q.attribution == "generator_failure") != []
    # markup is searched as text: every question's tags name the hostile tag; sorting keeps the filter
    assert out["search"] == out["sorted"] == len(_ids(results, lambda q: tag in q.tags)) == 13
    assert f"{tag} = {value} (" in " ".join(out["options"])


def test_the_squad_subset_report_fits_and_filters_at_real_size(tmp_path: Path) -> None:
    """706 questions x 6 conditions (the newcomer's page): within the 5 MB budget, every question listed, and the
    filters work on all of them."""
    dataset = squad_path()
    run = tmp_path / "squad.json"
    assert main(["rag", "--dataset", str(dataset), "--retriever", "bm25", "--generator", "extractive",
                 "--adversarial", "counterfactual,injection,missing-gold,irrelevant-only", "--resamples", "200",
                 "--output", str(run)]) == 0
    page = tmp_path / "squad.html"
    assert main(["report", str(run), "--format", "html", "--dataset", str(dataset), "--output", str(page)]) == 0
    assert page.stat().st_size <= PAGE_BUDGET
    results = RagResults.from_json(run)
    dom, out, console = drive(page, tmp_path, """
var r = {all: visible().length};
pick('q-attribution', 'retrieval_failure'); r.retrieval_failure = visible();
reset(); pick('q-condition', 'counterfactual'); pick('q-verdict', 'wrong'); r.counterfactual_wrong = visible().length;
reset(); pick('q-slice', 'answerable = no'); r.unanswerable = visible().length;
return r;""")
    assert console == [], console
    assert out["all"] == len(results.per_question) == 706
    assert out["retrieval_failure"] == _ids(results, lambda q: q.attribution == "retrieval_failure")
    assert out["counterfactual_wrong"] == len(_ids(results, lambda q: _wrong(q, "counterfactual")))
    assert out["unanswerable"] == len(_ids(results, lambda q: q.tags.get("answerable") == "no")) == 320
    assert dom.count('<svg class="ichart"') >= 16
