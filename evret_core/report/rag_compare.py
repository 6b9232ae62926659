"""RAG runs in ``evret compare`` and ``evret report``: paired tests between RAG runs, and the report (Markdown or
HTML, through :func:`evret_core.report.render.render_report` like retrieval reports).

Scores are compared under ``SECTION/METRIC`` names (``retrieval/recall@5``, ``gold/f1``, ``retrieved/correct``,
an adversarial condition's ``injection/correct``...): a metric is tested on the questions every run measured it
on (a score that does not apply to a question, such as the F1 of a refusal, is absent), with the paired test and
Holm-Bonferroni correction that retrieval comparisons use.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.rag.questions.question_sets import QuestionSet
from evret_core.report.common import RagReportData
from evret_core.report.render import render_report
from evret_core.results.model import ScoreView
from evret_core.results.rag_results import RagResults
from evret_core.statistics.inference import (
    TESTS,
    Comparison,
    PairComparison,
    cohens_d_paired,
    holm_bonferroni,
    paired_p_value,
)

HEADLINE = ("retrieval/recall@5", "retrieval/mrr@10", "retrieval/ndcg@10")


def compare_rag(runs: Mapping[str, RagResults], test: str = "t", alpha: float = 0.05, n_resamples: int = 10000,
                seed: int = 0, top: int = 5) -> Comparison:
    """Every pair of runs on every score they share, paired over the questions measured in both."""
    if test not in TESTS:
        raise EvretError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if len(runs) < 2:
        raise EvretError("a comparison needs at least two runs")
    flat: dict[str, ScoreView] = {name: r.score_view() for name, r in runs.items()}
    names = list(flat)
    questions = [set(f.per_query) for f in flat.values()]
    if any(q != questions[0] for q in questions):
        raise EvretError("the RAG runs answer different questions; paired tests need the same question set")
    metrics = [m for m in flat[names[0]].scores if all(m in f.scores for f in flat.values())]
    pairs: list[PairComparison] = []
    for metric in metrics:
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                qids = [q for q in flat[a].per_query
                        if metric in flat[a].per_query[q] and metric in flat[b].per_query[q]]
                if len(qids) < 2:
                    continue
                x = np.array([flat[a].per_query[q][metric] for q in qids], dtype=np.float64)
                y = np.array([flat[b].per_query[q][metric] for q in qids], dtype=np.float64)
                diff = y - x
                order = np.argsort(diff, kind="stable")
                pairs.append(PairComparison(
                    metric=metric, a=a, b=b, delta=float(diff.mean()),
                    p_value=paired_p_value(x, y, test, n_resamples, seed), test=test,
                    effect_size=cohens_d_paired(x, y), n=len(qids),
                    gained=[{"query_id": qids[j], "delta": float(diff[j])} for j in order[::-1][:top] if diff[j] > 0],
                    lost=[{"query_id": qids[j], "delta": float(diff[j])} for j in order[:top] if diff[j] < 0]))
    for pair, adjusted in zip(pairs, holm_bonferroni([p.p_value for p in pairs]), strict=True):
        pair.p_adjusted = adjusted
        pair.significant = adjusted < alpha
    tested = list(dict.fromkeys(p.metric for p in pairs))
    return Comparison(runs=names, metrics=tested, test=test, alpha=alpha, query_ids=sorted(questions[0]),
                      pairs=pairs)


def flat_means(runs: Mapping[str, RagResults]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, list[float]]]]:
    """Each run's ``SECTION/METRIC`` means and intervals (for the comparison table)."""
    flat = {name: r.score_view() for name, r in runs.items()}
    return {n: f.scores for n, f in flat.items()}, {n: f.intervals for n, f in flat.items()}


def rag_markdown(runs: Mapping[str, RagResults], comparison: Comparison | None = None) -> str:
    """A Markdown report of one or more RAG runs: retrieval, generation per condition, attribution, condition
    differences, slices by tag and condition, adversarial rates, and the comparison of runs when there are several
    (:func:`evret_core.report.render.render_report` of a :class:`~evret_core.report.common.RagReportData`)."""
    return render_report(RagReportData(dict(runs), comparison), "markdown")


def rag_html(runs: Mapping[str, RagResults], comparison: Comparison | None = None,
             questions: QuestionSet | None = None, warnings: list[str] | None = None) -> str:
    """The same report as one self-contained HTML page (at most 5 MB), with a per-question drill-down that shows
    each context's text when the runs' ``questions`` are given; what was cut to fit goes to ``warnings``."""
    checked = check_questions(runs, questions) if questions is not None else []
    data = RagReportData(dict(runs), comparison, questions)
    html = render_report(data, "html")
    if warnings is not None:
        warnings += checked + data.warnings
    return html


def check_questions(runs: Mapping[str, RagResults], questions: QuestionSet, option: str = "--dataset",
                    corpus_option: str | None = None) -> list[str]:
    """Before any work, an :class:`EvretError` when ``questions`` is not what a run used: it holds none of the run's
    questions (the wrong file), or its questions or corpus differ from the hashes the run recorded
    (``config["question_set"]``, :meth:`~evret_core.rag.questions.question_sets.QuestionSet.fingerprint`), so the
    drill-down would show texts the run never saw. ``option`` and ``corpus_option`` (default ``option``) name
    where each came from. Returns a warning per run that recorded no hashes (written by an earlier Evret): its
    texts cannot be checked."""
    asked = {q.question_id for q in questions.questions}
    warnings = []
    now: dict[str, object] | None = None
    for name, r in runs.items():
        if r.per_question and not asked & set(r.per_question):
            first = next(iter(r.per_question))
            raise EvretError(f"{option}: the question set holds none of the {len(r.per_question)} questions of run "
                             f"{name!r} (e.g. {first!r}); give the question set the run was made with")
        recorded = r.config.get("question_set")
        if recorded is None:
            warnings.append(f"run {name!r} records no hashes of its question set and corpus (written by an earlier "
                            f"Evret): the drill-down's context texts cannot be checked against what the run saw")
            continue
        now = now or questions.fingerprint()
        for key, what, flag in (("questions_sha256", "its questions", option),
                                ("corpus_sha256", "its documents" if corpus_option else "its passages (the corpus)",
                                 corpus_option or option)):
            if not isinstance(recorded, dict) or recorded.get(key) != now[key]:
                shown = recorded.get(key) if isinstance(recorded, dict) else None
                was = f"{shown[:12]}..." if isinstance(shown, str) else repr(shown)
                raise EvretError(f"{flag}: {what} differ from those run {name!r} used (sha256 {str(now[key])[:12]}... "
                                 f"now, {was} recorded by the run): the drill-down would show texts the run did not "
                                 f"see; give the files the run was made with")
    return warnings
