"""The Python API of comparisons and reports; ``evret compare`` and ``evret report`` are thin layers over it.

Runs are given as results (:class:`~evret_core.results.evaluation.EvaluationResults`, or
:class:`~evret_core.results.rag_results.RagResults` for RAG runs), as paths of results files of either kind, or as
one mapping of run name -> either; unnamed runs are called ``run1``, ``run2``... (files: their name without
``.json``). The runs of one call are all retrieval or all RAG runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from evret_core.contracts.errors import EvretError
from evret_core.io.outputs import write_output
from evret_core.report.common import RagReportData, ReportData, build_report_data, compare_runs
from evret_core.report.render import FORMATS, render_report
from evret_core.results.conversation_results import ConversationResults
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.files import load_results, run_names
from evret_core.results.model import Results
from evret_core.results.rag_results import RagResults
from evret_core.statistics.inference import DEFAULT_TEST_RESAMPLES, Comparison, compare_scores

Run = Results | str | os.PathLike[str]
SUFFIXES = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown", ".tex": "latex"}


def any_runs(runs: tuple[Run | Mapping[str, Run], ...]) -> dict[str, Results]:
    """``runs`` as run name -> results of either kind (retrieval or RAG, not mixed), reading files where paths are
    given (:func:`~evret_core.results.files.load_results`; a file's results are redacted before they are shown)."""
    if len(runs) == 1 and isinstance(runs[0], Mapping):
        items = list(runs[0].items())
    else:
        loose: list[Run] = []
        for i, run in enumerate(runs):
            if isinstance(run, Mapping):
                raise EvretError("give the runs either as one mapping of name -> results or as separate arguments")
            if not isinstance(run, (Results, str, os.PathLike)):
                raise EvretError(f"run {i + 1}: expected EvaluationResults or a results file path, "
                                 f"got {type(run).__name__}")
            loose.append(run)
        paths = [r for r in loose if not isinstance(r, Results)]
        file_names = iter(run_names([Path(p) for p in paths]))
        items = [(next(file_names) if not isinstance(r, Results) else f"run{i + 1}", r)
                 for i, r in enumerate(loose)]
    if not items:
        raise EvretError("give at least one run (results or a results file)")
    out: dict[str, Results] = {}
    for name, run in items:
        if not isinstance(name, str) or not name:
            raise EvretError(f"run names must be non-empty strings, got {name!r}")
        if name in out:
            raise EvretError(f"two runs are named {name!r}")
        if isinstance(run, Results):
            out[name] = run
        elif isinstance(run, (str, os.PathLike)):
            # a file written before redaction existed may hold a key in a URL or an option: redact before showing
            out[name] = load_results(Path(run)).redacted()
        else:
            raise EvretError(f"run {name!r}: expected EvaluationResults or a results file path, "
                             f"got {type(run).__name__}")
    if len({type(r) for r in out.values()}) > 1:
        raise EvretError("compare RAG runs (evret rag) with RAG runs and retrieval runs with retrieval runs")
    return out


def _no_traces(runs: Mapping[str, Results]) -> None:
    """Agent-trace results have no paired comparison and no retrieval report data: an error saying where they are
    read (``evret report`` renders them), instead of an empty comparison."""
    if any(r.KIND == "trace" for r in runs.values()):
        raise EvretError("agent-trace results (evret trace) are not compared run against run; read each with "
                         "evret report (markdown or html)")


def _retrieval(runs: Mapping[str, Results]) -> dict[str, EvaluationResults]:
    return {name: r for name, r in runs.items() if isinstance(r, EvaluationResults)}


def rag_runs(runs: Mapping[str, Results]) -> dict[str, RagResults] | None:
    """``runs`` when they are RAG runs, else None."""
    rag = {name: r for name, r in runs.items() if isinstance(r, RagResults)}
    return rag if rag and len(rag) == len(runs) else None


def compare_conversation_runs(runs: Mapping[str, ConversationResults], test: str = "t", alpha: float = 0.05,
                              n_resamples: int = DEFAULT_TEST_RESAMPLES, seed: int = 0) -> Comparison:
    """Conversation runs compared on their common ``form/metric`` scores, paired by turn id over the turns every
    run measured under every one of those scores (a warning says how many turns that leaves out)."""
    views = {name: r.score_view() for name, r in runs.items()}
    first = next(iter(views.values()))
    names = [m for m in first.scores if all(m in v.scores for v in views.values())]
    if not names:
        raise EvretError("the conversation runs have no form/metric score in common")
    turns = [t for t, row in first.per_query.items()
             if all(t in v.per_query and all(m in v.per_query[t] for m in names) for v in views.values())]
    per_turn = {name: {t: v.per_query[t] for t in turns} for name, v in views.items()}
    comparison = compare_scores(per_turn, names, test=test, alpha=alpha, n_resamples=n_resamples, seed=seed)
    left_out = len(first.per_query) - len(turns)
    if left_out:
        comparison.warnings.append(f"compared on the {len(turns)} turns every run measured under "
                                   f"{', '.join(names)}; {left_out} turns left out")
    return comparison


def compare(
    *runs: Run | Mapping[str, Run],
    test: str = "t",
    alpha: float = 0.05,
    n_resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    intersection: bool = False,
) -> Comparison:
    """Paired significance tests between two or more runs, every pair on every metric they share.

    ``test`` is ``t``, ``randomization`` or ``bootstrap``; p-values are Holm-Bonferroni adjusted over all the
    comparisons and ``significant`` means ``p_adjusted < alpha``. The runs must score the same queries unless
    ``intersection`` is true (then the common queries are compared and ``Comparison.warnings`` says how many were
    dropped). Returns a :class:`~evret_core.statistics.inference.Comparison`: ``pairs`` holds one
    :class:`~evret_core.statistics.inference.PairComparison` per (metric, pair) with ``delta`` = mean of b - mean of a.
    """
    named = any_runs(runs)
    if len(named) < 2:
        raise EvretError("a comparison needs at least two runs")
    rag = rag_runs(named)
    if rag is not None:  # on the questions every run measured each score on
        from evret_core.report.rag_compare import compare_rag

        return compare_rag(rag, test=test, alpha=alpha, n_resamples=n_resamples, seed=seed)
    _no_traces(named)
    conversation = {name: r for name, r in named.items() if isinstance(r, ConversationResults)}
    if conversation:
        return compare_conversation_runs(conversation, test=test, alpha=alpha, n_resamples=n_resamples, seed=seed)
    return compare_runs(_retrieval(named), test=test, alpha=alpha, n_resamples=n_resamples, seed=seed,
                        intersection=intersection)


def report_data(
    *runs: Run | Mapping[str, Run],
    test: str = "t",
    alpha: float = 0.05,
    seed: int = 0,
    max_k: int | None = None,
) -> ReportData | RagReportData:
    """What every report format shows, computed once: the runs, their metric@k curves (up to ``max_k``) and,
    with several runs, their comparison (``test``, ``alpha``) on the queries they share (a warning in
    ``comparison.warnings`` when the query sets differ). Pass it to :func:`make_report` for each format.
    RAG runs give a :class:`RagReportData` (with their comparison when there are several)."""
    if max_k is not None and (isinstance(max_k, bool) or not isinstance(max_k, int) or max_k <= 0):
        raise EvretError(f"max_k must be a positive integer, got {max_k!r}")
    named = any_runs(runs)
    rag = rag_runs(named)
    if rag is not None:
        from evret_core.report.rag_compare import compare_rag

        return RagReportData(rag, compare_rag(rag, test=test, alpha=alpha, seed=seed) if len(rag) > 1 else None)
    _no_traces(named)
    return build_report_data(_retrieval(named), test=test, alpha=alpha, seed=seed, max_k=max_k)


def make_report(
    *runs: Run | Mapping[str, Run] | ReportData | RagReportData,
    format: str = "html",
    test: str = "t",
    alpha: float = 0.05,
    seed: int = 0,
    max_k: int | None = None,
) -> str:
    """The report of one or more runs as text: ``html`` (one self-contained page), ``markdown`` or ``latex``.

    With several runs it holds their comparison (``test``, ``alpha``; see :func:`report_data`); ``max_k``
    bounds the metric@k curves. A single :class:`ReportData` from :func:`report_data` is rendered as it is. RAG
    runs are reported as ``html`` or ``markdown``, by the same renderers.
    """
    if format not in FORMATS:
        raise EvretError(f"unknown report format {format!r}; use one of {', '.join(FORMATS)}")
    if len(runs) == 1 and isinstance(runs[0], (ReportData, RagReportData)):
        return render_report(runs[0], format)
    given: list[Run | Mapping[str, Run]] = []
    for run in runs:
        if isinstance(run, (ReportData, RagReportData)):
            raise EvretError("a ReportData is rendered alone: give it as the only run")
        given.append(run)
    return render_report(report_data(*given, test=test, alpha=alpha, seed=seed, max_k=max_k), format)


def report_format(path: str | os.PathLike[str]) -> str:
    """The report format a file name asks for by its suffix (``.html``, ``.md``, ``.tex``)."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise EvretError(f"{path}: cannot tell the report format from the suffix {suffix!r}; give format= "
                         f"({', '.join(FORMATS)})")
    return SUFFIXES[suffix]


def write_report(
    path: str | os.PathLike[str],
    *runs: Run | Mapping[str, Run] | ReportData | RagReportData,
    format: str | None = None,
    test: str = "t",
    alpha: float = 0.05,
    seed: int = 0,
    max_k: int | None = None,
) -> Path:
    """Write :func:`make_report` of ``runs`` to ``path`` (replaced atomically) and return the path.

    ``format`` defaults to the one the suffix names (``.html``/``.htm``, ``.md``, ``.tex``).
    """
    text = make_report(*runs, format=format or report_format(path), test=test, alpha=alpha, seed=seed,
                       max_k=max_k)
    write_output(Path(path), text)
    return Path(path)
