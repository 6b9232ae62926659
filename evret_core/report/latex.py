"""LaTeX report: tables (booktabs) of metrics with intervals, the comparison of runs and the slices.

The document compiles with pdflatex and the two Debian packages texlive-latex-base and texlive-latex-recommended
(booktabs), whatever the results hold: every text from data goes through :func:`tex_escape`.
"""

from __future__ import annotations

import re

from evret_core.contracts.errors import visible
from evret_core.report.common import ReportData

# every character TeX reads as markup, as text; the brackets and the star too: a cell that starts a table row with
# "[" or "*" would be read as the optional argument of the previous row's \\
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
            ">": r"\textgreater{}", "|": r"\textbar{}", "[": "{[}", "]": "{]}", "*": "{*}"}
# the characters beyond ASCII that pdflatex sets with the document's default encoding (OT1, utf8 input): Latin-1
# and Latin Extended-A letters and signs but a few (« » Ð Þ ð þ, the ogonek letters, Đ Ħ Ŋ ŧ...), and common
# typographic punctuation; found by compiling each character (tests/results/test_report_escaping.py compiles a
# report holding a sample). Any other character is written as a visible \uXXXX escape instead of stopping pdflatex.
_UNSET = {0xAB, 0xBB, 0xD0, 0xDE, 0xF0, 0xFE, 0x104, 0x105, 0x110, 0x111, 0x118, 0x119, 0x126, 0x127, 0x12E, 0x12F,
          0x138, 0x13F, 0x140, 0x149, 0x14A, 0x14B, 0x166, 0x167, 0x172, 0x173, 0x17F}
_TYPESET = frozenset([*(c for c in range(0xA0, 0x180) if c not in _UNSET), 0x2013, 0x2014, 0x2018, 0x2019, 0x201C,
                      0x201D, 0x2022, 0x2026, 0x20AC, 0x2122])
_LINE_BREAK = re.compile(r"\r\n|[\r\n]")


def _char(ch: str) -> str:
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    code = ord(ch)
    if code < 0x80 or code in _TYPESET:
        return ch
    return rf"\textbackslash{{}}u{code:04x}"


def tex_escape(text: str) -> str:
    """Text from data safe in LaTeX: line breaks (a blank line ends a caption's paragraph) become spaces, control
    characters visible escapes (:func:`evret_core.contracts.errors.visible`), every special character its command, and a
    character pdflatex cannot set without more packages a visible ``\\uXXXX``: the document always compiles."""
    return "".join(_char(ch) for ch in visible(_LINE_BREAK.sub(" ", str(text))))


def _ci(value: float, interval: list[float] | None) -> str:
    if not interval:
        return f"{value:.3f}"
    return f"{value:.3f} {{\\small [{interval[0]:.3f}, {interval[1]:.3f}]}}"


def _table(caption: str, header: list[str], rows: list[list[str]]) -> list[str]:
    spec = "l" * len(header)
    return [r"\begin{table}[ht]", r"\centering", f"\\caption{{{caption}}}", f"\\begin{{tabular}}{{{spec}}}",
            r"\toprule", " & ".join(header) + r" \\", r"\midrule",
            *[" & ".join(row) + r" \\" for row in rows], r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]


def render_latex(data: ReportData) -> str:
    """A standalone document (``\\documentclass{article}`` with booktabs); the tables can be pasted into a paper."""
    level = next((r.confidence_level for r in data.runs.values() if r.confidence_level), None)
    ci = f" with {tex_escape(f'{level:.0%}')} percentile bootstrap intervals" if level else ""
    lines = [r"\documentclass{article}", r"\usepackage{booktabs}", r"\begin{document}", ""]
    lines += _table(f"Retrieval metrics{ci}.", ["Metric"] + [tex_escape(n) for n in data.names],
                    [[tex_escape(m)] + [_ci(r.scores[m], r.intervals.get(m)) for r in data.runs.values()]
                     for m in data.metrics])
    if data.comparison is not None:
        c = data.comparison
        rows = []
        for p in c.pairs:
            delta = f"{p.delta:+.4f}"
            rows.append([tex_escape(p.metric), tex_escape(f"{p.b} vs {p.a}"),
                         f"\\textbf{{{delta}}}" if p.significant else delta,
                         f"{p.p_value:.4g}", f"{p.p_adjusted:.4g}", f"{p.effect_size:+.2f}"])
        lines += _table(
            f"Paired {tex_escape(c.test)} test over {len(c.query_ids)} queries, Holm-Bonferroni adjusted; "
            f"bold: $p_{{adj}} < {c.alpha:g}$.",
            ["Metric", "Pair", r"$\Delta$", "$p$", "$p_{adj}$", "$d$"], rows)
    for name, results in data.runs.items():
        for tag, values in results.slices.items():
            rows = [[tex_escape(v) + (" (small)" if sl.small else ""), str(sl.n)]
                    + [_ci(sl.scores[m], sl.intervals.get(m)) if m in sl.scores else "n/a" for m in data.metrics]
                    for v, sl in values.items()]
            lines += _table(f"{tex_escape(name)} by {tex_escape(tag)}.",
                            ["Value", "$N$"] + [tex_escape(m) for m in data.metrics], rows)
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n"

