"""One evaluation run over a conversation dataset's labelled turns and query forms.

Each labelled turn is retrieved under every query form (:mod:`evret_core.conversation.forms`); identical texts of
one turn share one query. Every query of every form goes through ONE
:meth:`~evret_core.evaluation.evaluator.Evaluator.evaluate`, so a conversation run has the same retriever, judge,
judge cache, matching, metrics, executor and unmeasured handling as single questions. The per-turn values then
become the aggregates of :mod:`evret_core.conversation.aggregates`, in a
:class:`~evret_core.results.conversation_results.ConversationResults`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import ValidationError

from evret_core.contracts.conversation import Rewriter, RewriteRequest
from evret_core.contracts.errors import EvretError
from evret_core.contracts.kinds import REWRITER
from evret_core.conversation.aggregates import StatisticsSettings, TurnColumns, aggregate
from evret_core.conversation.forms import FORMS, HistoryWindow, form_texts, rewrite_requests
from evret_core.evaluation.evaluator import Evaluator
from evret_core.io.conversations import ConversationSet
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.plugins import builder
from evret_core.results.conversation_results import ConversationResults, FormQuery, TurnRecord
from evret_core.statistics.inference import check_confidence_level, check_resamples
from evret_core.version import __version__

__all__ = ["ConversationEvaluator"]


def _value(per_query: dict[str, Any], query: FormQuery | None, metric: str) -> float:
    """A turn's ``metric`` under one form: its query's value, NaN when the form has no query for the turn."""
    return math.nan if query is None else float(per_query[query.query_id].scores.get(metric, math.nan))


class ConversationEvaluator:
    """Scores a retriever on the labelled turns of a :class:`~evret_core.io.conversations.ConversationSet` under
    several query forms, in one run of ``evaluator`` (an :class:`~evret_core.evaluation.evaluator.Evaluator`).

    :param forms: the query forms (default: ``last_turn``, ``full_history``, ``rewrite``, and ``rewriter`` when a
        rewriter is given).
    :param baseline_form: the form every other one is compared with.
    :param window: the ``full_history`` form's :class:`~evret_core.conversation.forms.HistoryWindow`.
    :param rewriter: a :class:`~evret_core.contracts.conversation.Rewriter` or a registered rewriter name (with
        ``rewriter_options``), for the ``rewriter`` form; run through the evaluator's executor.
    :param unit: ``conversation`` (intervals and tests resample whole conversations) or ``turn``.
    :param test: the paired test of the differences: ``randomization``, ``t`` or ``bootstrap``.
    :param all_pairs: compare every pair of forms, not only each form with the baseline.
    """

    def __init__(
        self,
        evaluator: Evaluator,
        forms: Sequence[str] | None = None,
        baseline_form: str = "last_turn",
        window: HistoryWindow | None = None,
        rewriter: Rewriter | str | None = None,
        rewriter_options: dict[str, Any] | None = None,
        unit: str = "conversation",
        test: str = "randomization",
        all_pairs: bool = False,
        confidence_level: float = 0.95,
        n_resamples: int = 1000,
        test_resamples: int = 10000,
        seed: int = 0,
        min_slice_size: int = 10,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.evaluator = evaluator
        if isinstance(rewriter, str):
            options = dict(rewriter_options or {})
            rewriter = builder.build(REWRITER, rewriter, options, sources=dict.fromkeys(options, "Python"))
        elif rewriter_options:
            raise EvretError("rewriter_options apply to a rewriter given by name, not to a rewriter object")
        self.rewriter = rewriter
        # without named forms, every form (``rewriter`` only with a rewriter); the CLI names them from the data
        # (forms.default_forms)
        self.forms = list(forms) if forms is not None else [f for f in FORMS if rewriter is not None or f != "rewriter"]
        unknown = [f for f in self.forms if f not in FORMS]
        if unknown:
            raise EvretError(f"unknown query form {unknown[0]!r}; use {', '.join(FORMS)}")
        if not self.forms or len(set(self.forms)) != len(self.forms):
            raise EvretError(f"forms must name each query form once, got {', '.join(self.forms) or 'none'}")
        if "rewriter" in self.forms and rewriter is None:
            raise EvretError("the rewriter form needs a rewriter (--rewriter NAME, e.g. carry-terms)")
        if rewriter is not None and "rewriter" not in self.forms:
            raise EvretError("a rewriter is given but the forms leave out 'rewriter'")
        if baseline_form not in self.forms:
            raise EvretError(f"baseline form {baseline_form!r} is not one of the forms ({', '.join(self.forms)})")
        self.baseline_form = baseline_form
        self.window = window or HistoryWindow()
        self.settings = StatisticsSettings(
            unit=unit, test=test, all_pairs=bool(all_pairs),
            confidence_level=check_confidence_level(confidence_level), n_resamples=check_resamples(n_resamples),
            test_resamples=check_resamples(test_resamples, "test_resamples"), seed=int(seed),
            min_slice_size=int(min_slice_size))
        self.progress = progress

    # -- the run ---------------------------------------------------------------------------------------------------
    def _labelled(self, conversations: ConversationSet) -> list[Any]:
        if not isinstance(conversations, ConversationSet):
            raise EvretError(f"evaluate() needs a ConversationSet, got {type(conversations).__name__}")
        labelled = conversations.labelled_turns()
        if not labelled:
            raise EvretError(f"{conversations.name or 'the dataset'}: no conversation has a labelled turn")
        return labelled

    def _rewrite(self, requests: Sequence[RewriteRequest]) -> tuple[dict[str, str | None], dict[str, Any] | None]:
        """The rewriter's text per turn id, through the evaluator's executor (progress stage ``rewrite``)."""
        total = len(requests)

        def report(done: int) -> None:
            if self.progress is not None:
                self.progress("rewrite", done, total)

        report(0)
        run = self.evaluator.executor.rewrite(self.rewriter, requests, self.evaluator.batch_size, report)
        if len(run.texts) != total:
            raise EvretError(f"the rewriter returned {len(run.texts)} texts for {total} turns")
        return {r.turn_id: t for r, t in zip(requests, run.texts, strict=True)}, run.stats

    def plan_queries(self, conversations: ConversationSet, rewritten: dict[str, str | None] | None
                     ) -> tuple[EvaluationDataset, dict[str, dict[str, FormQuery | None]]]:
        """The inner dataset (one query per turn and distinct text, ids ``turn_id#k`` in form order, no tags) and
        turn id -> form -> its query (None: the form has no text for the turn)."""
        texts = form_texts(conversations.conversations, self.forms, self.window, rewritten)
        queries: list[QueryExample] = []
        by_turn: dict[str, dict[str, FormQuery | None]] = {}
        for _, turn in conversations.labelled_turns():
            ids: dict[str, str] = {}
            by_turn[turn.turn_id] = {}
            for form in self.forms:
                text = texts[form].get(turn.turn_id)
                if text is None or not text.strip():
                    by_turn[turn.turn_id][form] = None
                    continue
                if text not in ids:
                    ids[text] = f"{turn.turn_id}#{len(ids) + 1}"
                    queries.append(turn.query(ids[text], text))
                by_turn[turn.turn_id][form] = FormQuery(query_id=ids[text], query=text)
        corpus = None if conversations.corpus is None else {k: dict(v) for k, v in conversations.corpus.items()}
        try:
            dataset = EvaluationDataset(queries=queries, corpus=corpus, name=conversations.name or None)
        except ValidationError as exc:
            raise EvretError(f"{conversations.name or 'the dataset'}: turn ids make clashing query ids "
                             f"({exc.errors()[0].get('msg', exc)}); give every turn a distinct turn_id") from None
        return dataset, by_turn

    def evaluate(self, conversations: ConversationSet) -> ConversationResults:
        """Rewrite (with a rewriter), retrieve, judge and score every labelled turn under every form, then the
        aggregates."""
        labelled = self._labelled(conversations)
        started = time.time()
        rewritten: dict[str, str | None] | None = None
        rewriter_stats: dict[str, Any] | None = None
        if self.rewriter is not None:
            rewritten, rewriter_stats = self._rewrite(rewrite_requests(conversations.conversations))
        dataset, by_turn = self.plan_queries(conversations, rewritten)
        inner = self.evaluator.evaluate(dataset)
        per_query = dict(inner.per_query.items())
        metrics = list(inner.metrics)
        columns = TurnColumns(
            turn_ids=[t.turn_id for _, t in labelled],
            conversation_ids=[c.conversation_id for c, _ in labelled],
            indexes=[t.index for _, t in labelled],
            tags=[{str(k): str(v) for k, v in t.tags.items()} for _, t in labelled],
            values={form: {m: np.array([_value(per_query, by_turn[t.turn_id][form], m) for _, t in labelled],
                                       dtype=np.float64)
                           for m in metrics} for form in self.forms},
        )
        summary = aggregate(columns, self.forms, metrics, self.baseline_form, self.settings)
        per_turn = {t.turn_id: TurnRecord(conversation_id=c.conversation_id, turn_index=t.index,
                                          tags=columns.tags[i],
                                          forms={f: q for f, q in by_turn[t.turn_id].items() if q is not None})
                    for i, (c, t) in enumerate(labelled)}
        missing = {form: [tid for tid, queries in by_turn.items() if queries[form] is None] for form in self.forms}
        history_only = conversations.turn_count() - len(labelled)
        inner_stats = dict(inner.stats)
        stats: dict[str, Any] = {
            "conversations": len(conversations), "turns": conversations.turn_count(), "labelled_turns": len(labelled),
            "queries": len(dataset.queries),
            "texts": sum(q is not None for queries in by_turn.values() for q in queries.values()),
            "rewriter": rewriter_stats, "judge": inner_stats.get("judge"), "evaluation": inner_stats,
            "elapsed_s": round(time.time() - started, 6),
        }
        return ConversationResults(
            forms=list(self.forms), baseline_form=self.baseline_form, metrics=metrics, unit=self.settings.unit,
            test=self.settings.test, confidence_level=self.settings.confidence_level,
            **summary,
            unmeasured={"history_only_turns": history_only, "forms": {f: v for f, v in missing.items() if f in ("rewrite", "rewriter")},
                        "judgments": int(inner_stats.get("unmeasured", {}).get("judgments", 0))},
            manifest=self.manifest(conversations, inner.manifest_dict()),
            config=self.config(inner.config),
            stats=stats,
            per_turn=per_turn,
            queries=per_query,
        )

    def dry_run(self, conversations: ConversationSet) -> dict[str, Any]:
        """What a run would do, without judging or rewriting: the queries (the ``rewriter`` form left out: its texts
        need the rewriter), the evaluator's judgment plan, and the rewriter's own ``plan`` of its calls."""
        labelled = self._labelled(conversations)
        rewriter = self.rewriter
        forms = self.forms
        try:
            self.forms = [f for f in forms if f != "rewriter"] or ["last_turn"]
            dataset, _ = self.plan_queries(conversations, None)
        finally:
            self.forms = forms
        out: dict[str, Any] = {"conversations": len(conversations), "labelled_turns": len(labelled),
                               "queries": len(dataset.queries), "judge": self.evaluator.dry_run(dataset)}
        if rewriter is not None:
            requests = rewrite_requests(conversations.conversations)
            plan = getattr(rewriter, "plan", None)
            out["rewriter"] = dict(plan(requests)) if callable(plan) else {"requests": len(requests)}
        return out

    def config(self, evaluation: dict[str, Any]) -> dict[str, Any]:
        """The run's settings: the evaluator's, then the forms, the history window and the rewriter."""
        rewriter_config = getattr(self.rewriter, "config", None)
        window = self.window
        return {**evaluation, "forms": list(self.forms), "baseline_form": self.baseline_form,
                "history": {"turns": window.turns, "roles": window.roles, "max_words": window.max_words},
                "rewriter": rewriter_config() if callable(rewriter_config) else None,
                "statistics": {"unit": self.settings.unit, "test": self.settings.test,
                               "all_pairs": self.settings.all_pairs, "n_resamples": self.settings.n_resamples,
                               "test_resamples": self.settings.test_resamples, "seed": self.settings.seed,
                               "min_slice_size": self.settings.min_slice_size}}

    @staticmethod
    def manifest(conversations: ConversationSet, inner: dict[str, Any]) -> dict[str, Any]:
        """The inner run's manifest with the conversation dataset named (its hash when the set computes one)."""
        content_hash = getattr(conversations, "content_hash", None)
        return {**inner, "evret_version": __version__,
                "dataset": {"name": conversations.name, "conversations": len(conversations),
                            "turns": conversations.turn_count(),
                            "sha256": content_hash() if callable(content_hash) else None}}
