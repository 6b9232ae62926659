"""LaTeX report: tables (booktabs) of metrics with intervals, the comparison of runs and the slices."""

from __future__ import annotations

from evret_core.report.common import ReportData, clean_text

_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(text: str) -> str:
    """Text safe in LaTeX: every special character replaced by its command."""
    return "".join(_SPECIAL.get(ch, ch) for ch in clean_text(str(text)))


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
    ci = f" with {level:.0%} percentile bootstrap intervals" if level else ""
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
                    + [_ci(sl.scores[m], sl.intervals.get(m)) for m in data.metrics] for v, sl in values.items()]
            lines += _table(f"{tex_escape(name)} by {tex_escape(tag)}.",
                            ["Value", "$N$"] + [tex_escape(m) for m in data.metrics], rows)
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n"
