"""Size and time of the RAG HTML report at real size, and what its bytes are spent on: the SQuAD 2.0 subset (706
questions) with six conditions, the newcomer's page of issue 33.

    python benchmarks/rag_report.py [--results run.json] [--repeat 3] [--out page.html]

Without ``--results`` the run is made first (``evret rag`` with BM25, the extractive generator, the four adversarial
conditions and 200 resamples). The page is written without and with the question set (context texts), each
``--repeat`` times (the median is printed); with Chromium on the PATH, the page with texts is then loaded that many
times, and the time the browser took to parse it and the time its script took are printed (median). To measure
another version of the report code, put its evret_core first on PYTHONPATH (the results file is read by either).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQUAD = ROOT.parent / "shared" / "datasets" / "squad2" / "dev-v2.0-subset.json"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def render(results: Path, with_texts: bool) -> tuple[str, float]:
    from evret_core.rag import QuestionSet
    from evret_core.report.rag_compare import rag_html
    from evret_core.results.files import load_results

    started = time.perf_counter()
    run = load_results(results)
    questions = QuestionSet.load(SQUAD) if with_texts else None
    html = rag_html({results.stem: run}, questions=questions)  # type: ignore[dict-item]
    return html, time.perf_counter() - started


def browser(html: str, repeat: int) -> tuple[float, float, float, float] | None:
    """Medians: milliseconds from navigation to the page's script and of the script itself (read by a script the
    page's policy must allow: None for a page without script), and seconds of a whole ``chromium --dump-dom`` of
    the page and of a blank page (the browser's own start and stop, measured in the same run). None without
    Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    marker = "<script>\n/* Evret RAG report"
    timed = html
    if marker in html:
        at = html.rindex(marker)
        timed = html[:at] + "<script>window.t0 = performance.now();</script>" + html[at:]
    timed += ("<script>document.body.setAttribute('data-ms', (window.t0 === undefined ? performance.now() : "
              "window.t0).toFixed(0) + ' ' + (window.t0 === undefined ? 0 : performance.now() - window.t0)"
              ".toFixed(0));</script>")
    parse, script, whole, blank = [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        page, empty = Path(folder) / "page.html", Path(folder) / "blank.html"
        page.write_text(timed, encoding="utf-8")
        empty.write_text("<!DOCTYPE html><html><body>x</body></html>", encoding="utf-8")
        for i in range(repeat):
            for target, times in ((page, whole), (empty, blank)):
                started = time.perf_counter()
                out = subprocess.run([chromium, *FLAGS, f"--user-data-dir={folder}/profile-{target.stem}-{i}",
                                      "--dump-dom", target.as_uri()], capture_output=True, text=True,
                                     timeout=300).stdout
                times.append(time.perf_counter() - started)
                found = re.search(r'data-ms="(\d+) (\d+)"', out)
                if found and target == page:
                    parse.append(float(found.group(1)))
                    script.append(float(found.group(2)))
    return (statistics.median(parse) if parse else float("nan"), statistics.median(script) if script else float("nan"),
            statistics.median(whole), statistics.median(blank))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, default=None, help="a RAG results file of the SQuAD subset")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write the page with texts here")
    args = parser.parse_args()
    results = args.results
    if results is None:
        results = Path(tempfile.mkdtemp()) / "squad-six.json"
        from evret_core.cli import main as evret

        evret(["rag", "--dataset", str(SQUAD), "--retriever", "bm25", "--generator", "extractive", "--adversarial",
               "counterfactual,injection,missing-gold,irrelevant-only", "--resamples", "200", "--output",
               str(results)])
    for with_texts in (False, True):
        pages = [render(results, with_texts) for _ in range(args.repeat)]
        html = pages[-1][0]
        size = len(html.encode("utf-8"))
        seconds = statistics.median(t for _, t in pages)
        questions = len(re.findall(r'<details class="q"', html))
        print(f"{'with' if with_texts else 'without'} texts: {size:,} bytes ({size / 1e6:.2f} MB), {questions} "
              f"questions, written in {seconds:.2f} s (median of {args.repeat})")
        spans = [(m.start(), m.group(1)) for m in re.finditer(r'<section id="([a-z]+)"', html)]
        for (start, name), (end, _) in zip(spans, spans[1:] + [(len(html), "")], strict=True):
            print(f"  {name:<12} {len(html[start:end].encode('utf-8')):>10,} bytes")
        if with_texts:
            if args.out:
                args.out.write_text(html, encoding="utf-8")
            timing = browser(html, args.repeat)
            if timing:
                parse, script, whole, blank = timing
                read = (f"parsed in {parse / 1000:.2f} s, script {script / 1000:.2f} s; " if parse == parse
                        else "no script the page allows to time it; ")
                print(f"  Chromium: {read}--dump-dom {whole:.2f} s against {blank:.2f} s for a blank page, "
                      f"{whole / blank:.1f}x (medians of {args.repeat})")


if __name__ == "__main__":
    main()
