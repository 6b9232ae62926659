"""Text from data in the terminal, Markdown and LaTeX (red team 2026-11-28, F8 and TERM1): control characters
(ANSI escapes, other C0/C1 controls, bidirectional overrides) never reach the terminal raw, Markdown cells and
headings hold no live link, image, HTML or extra column, and a LaTeX report compiles with pdflatex, of an ordinary
run and of a hostile one.

The hostile files are built here from a results file the test produces: a tag and its values renamed in the
per-query records and in the slices alike, so the file passes the checks on load and reaches the writers."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import visible
from evret_core.report.api import make_report
from evret_core.report.latex import tex_escape
from evret_core.report.markdown import md_escape
from evret_core.report.terminal import print_scores, text_table
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.files import load_results
from evret_core.testing.shared_data import skip_or_fail

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# what a terminal obeys: ESC (ANSI sequences), BEL, the C1 CSI, a bidirectional override and isolate, CR, NUL
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
ANSI = "\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202eevil\u2066"
LINK = "](javascript:alert(1)) ![x](https://evil.example/t.png) [y"
HTML = "<img src=x onerror=alert(1)> | <script>alert(2)</script> <b>bold</b>"
TEX = "\n\n\\input{/etc/passwd} 95% $x$ #1 a_b {c} ~ ^ & [3pt] *x \\\\ <|> \"q\""
WORLD = "Zoë Ñandú Łódź Œuvre ß € – “q” 中文 😀 Ąę Ðþ « »"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("escaping") / "base.json"
    assert main(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--output", str(out), "--no-progress"]) == 0
    return out


def retag(base: Path, tmp_path: Path, tag: str, suffix: str, name: str = "hostile.json",
          edit: Any = None) -> Path:
    """``base`` with its tag ``topic`` renamed ``tag`` and each of its values given ``suffix``, in the per-query
    records and in the slices alike (so the file is consistent and loads)."""
    data = json.loads(base.read_text(encoding="utf-8"))
    for record in data["per_query"].values():
        tags = record["tags"]
        if "topic" in tags:
            tags[tag] = tags.pop("topic") + suffix
    data["slices"][tag] = {value + suffix: cell for value, cell in data["slices"].pop("topic").items()}
    if edit is not None:
        edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    load_results(path)  # consistent: it reaches the writers
    return path


def test_visible_escapes_every_control_and_keeps_text() -> None:
    assert visible("q1\x1b[31m\x07\x9b\u202e\u2066\n\t\r\x00\x7f") == \
        "q1\\x1b[31m\\x07\\x9b\\u202e\\u2066\\n\\t\\r\\x00\\x7f"
    assert visible("plain ids, Zoë, 中文, 😀, tabs\\x1b as text") == "plain ids, Zoë, 中文, 😀, tabs\\x1b as text"
    assert visible("lone \ud800 surrogate") == "lone \\ud800 surrogate"
    assert visible(visible(ANSI)) == visible(ANSI) and not RAW.search(visible(ANSI))


def test_term1_ids_in_an_error_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TERM1: a question id and a gold id holding ANSI sequences, named by the error `evret rag` prints."""
    questions = tmp_path / "ansi_q.jsonl"
    questions.write_text(json.dumps({"id": "r1\x1b]0;PWNED\x07\x1b[2J", "question": "When does the library open?",
                                     "answers": ["8 am"], "gold_doc_ids": ["zz\x1b[31m\u202e"]}) + "\n",
                         encoding="utf-8")
    assert main(["rag", "--dataset", str(questions), "--corpus", str(EXAMPLES / "rag" / "corpus.jsonl"),
                 "--generator", "extractive", "--conditions", "gold", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and not RAW.search(err), repr(err)
    assert "zz\\x1b[31m\\u202e" in err


def test_terminal_tables_show_data_escaped(base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The terminal summary of a results file whose tag and tag values hold ANSI sequences and bidi overrides,
    and `evret compare`'s warning naming a dataset hash that holds them."""
    path = retag(base, tmp_path, "topic" + ANSI, ANSI)
    results = load_results(path)
    assert isinstance(results, EvaluationResults)
    out = io.StringIO()
    print_scores(results, title="run " + ANSI, file=out)
    shown = out.getvalue()
    assert not RAW.search(shown) and f"slices by topic{visible(ANSI)}" in shown
    assert f"biology{visible(ANSI)}" in shown
    assert not RAW.search("\n".join(text_table([["a\x1b[2J", "b\u202e"]], ["x\x07", "y"])))
    other = retag(base, tmp_path, "topic", "", "other.json",
                  edit=lambda d: d["manifest"]["dataset"].update(hash="\x1b[2J\u202ecafe"))
    capsys.readouterr()
    assert main(["compare", str(base), str(other)]) == 0
    captured = capsys.readouterr()
    assert "datasets differ" in captured.out or "dataset hashes differ" in captured.out
    assert not RAW.search(captured.out + captured.err)


def test_rs21_markdown_on_stdout_holds_no_control(base: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = retag(base, tmp_path, "topic" + ANSI, ANSI)
    capsys.readouterr()
    assert main(["report", str(path), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out) and "## Slices of hostile by topic\\\\x1b" in out


def _rendered(markdown: str) -> str:
    """The HTML a GitHub-flavoured renderer makes of ``markdown`` (CommonMark with tables)."""
    from markdown_it import MarkdownIt

    return str(MarkdownIt("commonmark").enable("table").render(markdown))


def test_md2_markdown_cells_and_headings_hold_no_live_markup(base: Path, tmp_path: Path) -> None:
    """MD2: a tag holding a link and an image; tag values holding HTML, a pipe, blank lines and entities; the
    Markdown renders them as text: no link, image or tag, every table row with its columns."""
    path = retag(base, tmp_path, "topic" + LINK, " " + HTML + "\n\nnext paragraph")
    markdown = make_report({"run|<b>" + LINK: path}, format="markdown")
    html = _rendered(markdown)
    assert "<a " not in html and "<img" not in html and "<script" not in html and "<b>" not in html
    assert "](javascript:alert(1))" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    slices = html[html.index("Slices of"):]
    rows = re.findall(r"<tr>(.*?)</tr>", slices, re.S)
    assert rows and all(row.count("<td") == 0 or row.count("<td") == 2 + 6 for row in rows)
    heading = re.search(r"<h2>(Slices of .*?)</h2>", html)
    assert heading is not None and "javascript" in heading.group(1)


def test_rs08_the_prediction_powered_cell_is_escaped(base: Path) -> None:
    """Results built in Python are not checked as a file is: the Markdown writer escapes the labelled count."""
    results = load_results(base)
    assert isinstance(results, EvaluationResults)
    results.prediction_powered = {"recall@5": {"estimate": 0.9, "interval": [0.8, 0.95],
                                               "n_labelled": "<img src=x onerror=alert(1)> | ![p](https://e.x/p.png)"}}
    markdown = make_report(results, format="markdown")
    html = _rendered(markdown)
    assert "<img" not in html
    row = next(line for line in markdown.splitlines() if line.startswith("| recall@5 | 0.900 [0.800, 0.950] ("))
    assert re.findall(r"(?<!\\)\|", row) == ["|"] * 3  # the pipe in the data does not split the row


def test_md_escape_and_tex_escape() -> None:
    assert md_escape("a|b [l](u) ![i](s) [r][x] [d]: u <b>\n\nx\x1b [0.1, 0.3]") == \
        "a\\|b [l]\\(u) ![i]\\(s) [r]\\[x] [d]\\: u &lt;b&gt;  x\\\\x1b [0.1, 0.3]"
    escaped = tex_escape(TEX)
    assert "\\input" not in escaped and "\n" not in escaped and "%" not in escaped.replace("\\%", "")
    assert tex_escape("95%") == "95\\%" and tex_escape("中") == "\\textbackslash{}u4e2d"


def _pdflatex() -> str:
    path = shutil.which("pdflatex")
    if path is None:
        skip_or_fail("pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended; "
                     ".ci/test-setup.sh does it)")
    kpsewhich = shutil.which("kpsewhich")
    if kpsewhich is None or subprocess.run([kpsewhich, "booktabs.sty"], capture_output=True).returncode != 0:
        skip_or_fail("booktabs.sty is missing (apt-get install texlive-latex-recommended; .ci/test-setup.sh does it)")
    return str(path)


def _compile(tex: str, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    (folder / "report.tex").write_text(tex, encoding="utf-8")
    return subprocess.run([_pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                           "report.tex"], cwd=folder, capture_output=True, text=True, timeout=120)


def test_tex3_the_latex_report_of_an_ordinary_run_compiles(base: Path, tmp_path: Path) -> None:
    """TEX3: the caption's `95%` is escaped; two runs (with the comparison table) compile with pdflatex."""
    tex = make_report(base, base, format="latex")
    assert "95\\% percentile bootstrap intervals" in tex
    proc = _compile(tex, tmp_path / "ordinary")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "ordinary" / "report.pdf").stat().st_size > 1000


def test_tex2_a_hostile_latex_report_compiles(base: Path, tmp_path: Path) -> None:
    """TEX2: a tag with blank lines and `\\input`, tag values with every special character, a row that starts
    with `[`, controls, bidi overrides, letters pdflatex sets and characters it cannot (shown as \\uXXXX), a run
    name with specials, and a slice lacking a metric: the document compiles and reads no file."""
    def lack(data: dict[str, Any]) -> None:
        for cell in next(iter(data["slices"].values())).values():
            cell["scores"].pop("ndcg@10")

    path = retag(base, tmp_path, "topic" + TEX, " " + ANSI + WORLD + TEX, edit=lack)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["per_query"] = {qid: dict(record, tags={**record["tags"], "lead": "[3pt]"})
                         for qid, record in data["per_query"].items()}
    data["slices"]["lead"] = {"[3pt]": dict(data["slices"]["type"][next(iter(data["slices"]["type"]))],
                                            n=len(data["per_query"]))}
    data["slices"]["lead"]["[3pt]"]["scores"] = {m: sum(r["scores"][m] for r in data["per_query"].values())
                                                 / len(data["per_query"]) for m in data["metrics"]}
    data["slices"]["lead"]["[3pt]"]["intervals"] = {}
    path.write_text(json.dumps(data), encoding="utf-8")
    tex = make_report({"run " + TEX: path, "second_run%": base}, format="latex")
    assert "\\input" not in tex and "n/a" in tex
    proc = _compile(tex, tmp_path / "hostile")
    assert proc.returncode == 0, proc.stdout[-3000:]
    log = (tmp_path / "hostile" / "report.log").read_text(encoding="latin-1")
    assert "(/etc/passwd" not in log  # the file was never read
