"""The RAG harness: retrieve once, answer each question under each condition, judge, score, attribute.

1. retrieval (only when a condition needs it): every question retrieved once
   (:func:`~evret_core.evaluation.retrieved.retrieve_run`, or looked up in a precomputed run), and the labelled
   questions' lists scored by one retrieval :class:`~evret_core.Evaluator` given them as a run, against the gold
   ids (or the answer texts, by the retrieval judge); the generator never changes these scores;
2. contexts per condition (:mod:`evret_core.rag.questions.conditions`);
3. generation, claim judging and answer relevance (:mod:`evret_core.rag.pipeline`): pipelined when a part calls
   an LLM (each answer judged as soon as it arrives, all calls through one shared pool), else one batch each;
4. every registered RAG score per answer, the built-ins first (:mod:`evret_core.rag.scores.kind`: ``correct`` and
   ``answer-relevance`` built with this run's answer judge, ``correct_f1`` and relevance), then behaviour,
   attribution and intervals (:mod:`evret_core.rag.scores.summary`).

Over a conversation dataset (:class:`~evret_core.rag.turns.TurnQuestions`) each question is a turn: retrieval uses
the chosen query form's text (``query_form``; a rewriter's through the executor's rewrite stage), every generation
request carries the turn's reference history, the claim judges see it as ``claims_history`` says, and the
intervals resample whole conversations.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.executor import GenerateRun
from evret_core.contracts.generation import GenerationRequest
from evret_core.contracts.perturb import ConditionCase
from evret_core.contracts.rag_score import ScoreInput
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.conversation.forms import FORMS, HistoryWindow, unknown_form
from evret_core.evaluation.retrieved import retrieve_run
from evret_core.evaluation.run_rows import precomputed_rows
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.plugins.loading import plugin_exits_as_errors
from evret_core.progress import ProgressCallback, report_progress
from evret_core.rag.claims.llm_judge import resolve_claim_judge
from evret_core.rag.generate.generators import resolve_generator
from evret_core.rag.pipeline import Outcome, Slot, claims_history_of, part_recipe, runner_class
from evret_core.rag.planning import plan_run
from evret_core.rag.questions.conditions import Condition, resolve_conditions
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion
from evret_core.rag.scores.adversarial_scores import summarise_adversarial
from evret_core.rag.scores.answers import SHORT_ANSWER_EXTRA_WORDS
from evret_core.rag.scores.kind import BUILTIN_SCORES, apply_scores, check_correct_f1, run_scores
from evret_core.rag.scores.relevance import resolve_relevance
from evret_core.rag.scores.summary import DERIVED_METRICS, GENERATION_METRICS, summarise
from evret_core.rag.turns import (
    HISTORY_SOURCES,
    TurnQuestions,
    generated_history,
    query_texts,
    reads_agent_replies,
    rewrite_requests,
    turn_fields,
    waves,
)
from evret_core.results.rag_results import (
    CARRIED_FAILURE,
    ClaimResult,
    ConditionOutcome,
    QuestionOutcome,
    RagResults,
    attribution_by_turn_index,
)
from evret_core.retrieve.retrievers import PrecomputedRetriever, resolve_retriever

RETRIEVAL_CUTOFFS = (1, 3, 5, 10)
RETRIEVAL_BATCH_SIZE = 256
"""Questions per ``batch_retrieve`` call (the :class:`~evret_core.Evaluator`'s default ``batch_size``)."""
DEFAULT_RETRIEVAL_JUDGE = "token-overlap"
"""The judge of retrieval for questions labelled by answer texts only, when none is named (``evret evaluate``'s
default is the stricter ``contains``)."""


class RagEvaluator:
    """Scores a RAG system's retrieval and generation, separately and jointly.

    :param retriever: anything :class:`~evret_core.Evaluator` accepts (needed for the ``retrieved`` condition).
    :param generator: a registered generator name, a ``.jsonl`` answers file, a generator object, an object with
        ``generate(question, contexts)``, or a function.
    :param conditions: ``gold``, ``retrieved`` and/or :class:`~evret_core.rag.questions.conditions.Condition` objects.
    :param k: contexts the generator sees under ``retrieved`` (context precision is precision@k).
    :param claim_judge: a claim judge object (``judge_claims``), or a registered claim judge's name (``lexical``,
        ``llm`` for the LLM claim judge, a plugin's; options in ``claim_judge_options``), or a registered Evret
        judge's name for the lexical claim judge over it.
    :param answer_judge: an optional Evret judge (name or object) that also decides answer correctness.
    :param correct_f1: an answer counts as right (for correctness and attribution) by
        :func:`~evret_core.rag.scores.answers.answer_is_correct`: it matches exactly, its F1 is above this, or it
        is short and states a gold answer whole, and no number in it disagrees with that gold answer ("2 euros" for
        "5 euros" is wrong at F1 0.5 or 0.75); or when ``answer_judge`` says it matches.
    :param retrieval_judge: the Evret judge (a name, with ``retrieval_judge_options``, or a judge object) that
        decides which retrieved passages hold the answer of a question labelled by answer texts only (default
        :data:`DEFAULT_RETRIEVAL_JUDGE`, ``token-overlap``); recorded in the results' ``config``.
    :param relevance: answer relevance: ``lexical`` (offline, default), ``llm`` (options in
        ``relevance_options``), ``none``, or an object with ``score(question, answer)`` / ``ascore``.
    :param pipelined: judge each answer as soon as it arrives, every LLM call in one shared pool (default);
        False runs generation, judging and relevance one after the other (same results).
    :param executor: where retrieval, its judging and metrics, and generation with its judges run: ``"local"``
        (default), a plugin's (``"ray"`` with evret-ray: chunks of questions on workers that rebuild the parts),
        or an :class:`~evret_core.contracts.executor.Executor`; ``executor_options`` for one given by name.
    :param progress: called as ``progress(stage, done, total)`` (:mod:`evret_core.progress`) while retrieving
        (``retrieve``, and ``judge`` for questions labelled by answer texts), generating (``generate``, per
        answer as it arrives), judging claims (``claims``) and scoring relevance (``relevance``).
    :param query_form: for turns of a conversation dataset, the text they are retrieved with (``last_turn``,
        ``full_history`` over ``history_window``, ``rewrite`` from the data, ``rewriter`` by ``rewriter``; see
        :mod:`evret_core.conversation.forms`); the generator always sees the user's message.
    :param claims_history: what the claim judges see of a turn's history: ``all`` (default), ``user`` or ``none``.
    :param history: where a turn's history comes from: ``reference`` (default: the dataset's own replies, every
        turn independent) or ``generated`` (under each condition the system's own earlier answers; generation runs
        in waves, one executor call per wave, and a turn wrong under ``retrieved`` after an earlier wrong turn is
        answered again with the reference history, for the ``carried_failure`` attribution).
    """

    def __init__(
        self,
        retriever: Any = None,
        generator: Any = "extractive",
        conditions: Sequence[str | Condition] = ("gold", "retrieved"),
        k: int = 5,
        claim_judge: Any = "token-overlap",
        answer_judge: Any = None,
        correct_f1: float = 0.5,
        retrieval_judge: Any = None,
        retrieval_judge_options: dict[str, Any] | None = None,
        generator_options: dict[str, Any] | None = None,
        claim_judge_options: dict[str, Any] | None = None,
        relevance: Any = "lexical",
        relevance_options: dict[str, Any] | None = None,
        pipelined: bool = True,
        executor: Any = None,
        executor_options: dict[str, Any] | None = None,
        confidence_level: float = 0.95,
        n_resamples: int = 1000,
        seed: int = 0,
        progress: ProgressCallback | None = None,
        query_form: str = "last_turn",
        history_window: HistoryWindow | None = None,
        rewriter: Any = None,
        claims_history: str = "all",
        history: str = "reference",
    ) -> None:
        from evret_core.plugins.registry import create_judge
        from evret_core.statistics.inference import check_confidence_level, check_resamples

        self.conditions = resolve_conditions(conditions)
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise EvretError(f"k must be a positive integer, got {k!r}")
        self.k = k
        self.retriever = retriever
        if retriever is None and any(c.needs_retrieval for c in self.conditions):
            raise EvretError("the retrieved condition needs a retriever (or use --conditions gold)")
        from evret_core.evaluation.executors import resolve_executor

        self.executor = resolve_executor(executor, executor_options)
        self.generator = resolve_generator(generator, generator_options)
        self.claim_judge = resolve_claim_judge(claim_judge, claim_judge_options)
        self.relevance = resolve_relevance(relevance, relevance_options)
        # each part's recipe carries the resolver that made it: a worker makes it the same way
        self.recipes = {
            "generator": part_recipe("generator", generator, generator_options, self.generator, resolve_generator),
            "claim_judge": part_recipe("claim_judge", claim_judge, claim_judge_options, self.claim_judge,
                                       resolve_claim_judge),
            "relevance": part_recipe("relevance", relevance, relevance_options, self.relevance, resolve_relevance)}
        self.pipelined = bool(pipelined)
        self.answer_judge = create_judge(answer_judge) if isinstance(answer_judge, str) else answer_judge
        self.correct_f1 = check_correct_f1(correct_f1)
        self.retrieval_judge = _retrieval_judge(retrieval_judge, retrieval_judge_options)
        self.confidence_level = check_confidence_level(confidence_level)
        self.n_resamples = check_resamples(n_resamples)
        from evret_core.limits import MAX_SEED, check_int

        self.seed = check_int(seed, "seed", 0, MAX_SEED)  # numpy refuses a negative seed only after the work
        self.progress = progress
        self.scores = run_scores(relevance=self.relevance is not None, answer_judge=self.answer_judge,
                                 correct_f1=self.correct_f1)
        if query_form not in FORMS:
            raise EvretError(unknown_form(query_form))
        if (query_form == "rewriter") != (rewriter is not None):
            raise EvretError("query form 'rewriter' needs a rewriter (--rewriter NAME), and a rewriter needs "
                             "--query-form rewriter")
        runner_class(claims_history)  # checks the value, before any work
        if history not in HISTORY_SOURCES:
            raise EvretError(f"unknown history {history!r}{did_you_mean(history, HISTORY_SOURCES)}; use "
                             f"{', '.join(HISTORY_SOURCES)}")
        self.query_form = query_form
        self.history_window = history_window or HistoryWindow()
        if history == "generated" and reads_agent_replies(query_form, self.history_window):
            raise EvretError(f"--history generated with --query-form {query_form}"
                             f"{' --history-roles all' if query_form == 'full_history' else ''}: a query built from "
                             f"the system's own replies is not supported; use --history-roles user, another query "
                             f"form, or --history reference")
        self.history = history
        self.history_fallbacks = 0
        self.sent: dict[Slot, GenerationRequest] = {}  # the last run's requests as sent (history included)
        self.rewriter = rewriter
        self.claims_history = claims_history
        self.rewriter_stats: dict[str, Any] | None = None
        self.unasked: set[str] = set()  # the questions the last retrieve() had no query text for

    # -- stages ------------------------------------------------------------------------------------------------
    def retrieval_metrics(self) -> list[str]:
        return retrieval_metric_names(self.k)

    def retrieve(self, questions: QuestionSet, score: bool = True
                 ) -> tuple[list[list[RetrievalResult]] | None, dict[str, Any]]:
        """The retrieved lists (None when no condition needs them) and the retrieval section (empty unless
        ``score``: scoring may call an LLM judge)."""
        self.unasked = set()
        if not any(c.needs_retrieval for c in self.conditions):
            return None, {}
        from evret_core.evaluation.evaluator import Evaluator

        depth = max(10, self.k)
        retriever = resolve_retriever(self.retriever)
        texts = self.query_texts(questions)
        asked = [(q.question_id, t) for q, t in zip(questions.questions, texts, strict=True) if t is not None]
        ids = [qid for qid, _ in asked]
        if isinstance(retriever, PrecomputedRetriever):
            rows, _ = precomputed_rows(retriever.run, ids, depth)
        else:
            rows = retrieve_run(retriever, ids, [t for _, t in asked], depth, self.executor,
                                RETRIEVAL_BATCH_SIZE, self.progress)
        by_id = dict(zip(ids, rows.to_results(), strict=True))
        retrieved = [by_id.get(q.question_id, []) for q in questions.questions]
        labelled = [(q, r) for q, r in zip(questions.questions, retrieved, strict=True)
                    if (q.gold_doc_ids or q.answers) and q.question_id in by_id]
        section: dict[str, Any] = {"per_question": {}, "means": {}, "intervals": {},
                                   "unlabelled": [q.question_id for q in questions.questions
                                                  if not (q.gold_doc_ids or q.answers)],
                                   "no_query": [q.question_id for q in questions.questions if q.question_id not in by_id]}
        self.unasked = set(section["no_query"])
        if labelled and score:
            scoring = Evaluator({q.question_id: r for q, r in labelled}, metrics=self.retrieval_metrics(),
                                judge=self.retrieval_judge, k=depth, confidence_level=self.confidence_level,
                                n_resamples=self.n_resamples, seed=self.seed, min_slice_size=1,
                                executor=self.executor, progress=self.progress)
            dataset = EvaluationDataset(queries=[_retrieval_example(q) for q, _ in labelled])
            scored = scoring.evaluate(dataset)
            section["per_question"] = {qid: qr.scores for qid, qr in scored.per_query.items()}
            section["means"] = scored.scores
            section["intervals"] = scored.intervals
            section["unmeasured_judgments"] = scored.stats.get("unmeasured", {}).get("judgments", 0)
        return retrieved, section

    def query_texts(self, questions: QuestionSet) -> list[str | None]:
        """The text each question is retrieved with: its own, or for the turns of a conversation dataset the
        ``query_form``'s (None: the form has none for the turn, which is then not retrieved; a rewriter's texts
        come from the executor's rewrite stage, reported as ``rewrite``)."""
        if not isinstance(questions, TurnQuestions):
            return [q.question for q in questions.questions]
        rewritten = None
        if self.query_form == "rewriter":
            requests = rewrite_requests(questions)
            total = len(requests)
            report_progress(self.progress, "rewrite", 0, total)
            with plugin_exits_as_errors():
                run = self.executor.rewrite(self.rewriter, requests, RETRIEVAL_BATCH_SIZE,
                                            lambda done: report_progress(self.progress, "rewrite", done, total))
            if len(run.texts) != total:
                raise EvretError(f"the rewriter returned {len(run.texts)} texts for {total} turns")
            rewritten = {r.turn_id: t for r, t in zip(requests, run.texts, strict=True)}
            self.rewriter_stats = run.stats
        return query_texts(questions, self.query_form, self.history_window, rewritten)

    def cases(self, questions: QuestionSet, retrieved: list[list[RetrievalResult]] | None
              ) -> dict[str, list[ConditionCase]]:
        """Condition name -> one case per question (a turn that its query form gives no text is skipped under
        the conditions that retrieve: it was not retrieved)."""
        out: dict[str, list[ConditionCase]] = {}
        for condition in self.conditions:
            column = []
            for i, q in enumerate(questions.questions):
                if condition.needs_retrieval and q.question_id in self.unasked:
                    column.append(ConditionCase([], skip=f"query form {self.query_form} has no text for the turn"))
                    continue
                column.append(condition.case(q, questions, None if retrieved is None else retrieved[i], self.k,
                                             self.seed))
            out[condition.name] = column
        return out

    def requests(self, questions: QuestionSet, cases: dict[str, list[ConditionCase]]
                 ) -> dict[Slot, GenerationRequest]:
        """One generation request per (condition, question index) that has a case; a turn's request carries its
        history."""
        turns = questions.turns if isinstance(questions, TurnQuestions) else {}
        return {(name, i): GenerationRequest(q.question_id, q.question, tuple(case.contexts), name,
                                             **({"history": turns[q.question_id].history} if turns else {}))
                for name, column in cases.items()
                for i, (q, case) in enumerate(zip(questions.questions, column, strict=True)) if case.skip is None}

    def run_generation(self, questions: QuestionSet, cases: dict[str, list[ConditionCase]]) -> dict[Slot, Outcome]:
        """Answers, claim verdicts and relevance for every case (:mod:`evret_core.rag.pipeline`)."""
        outcomes: dict[Slot, Outcome] = self._generate(questions, cases).outcomes
        return outcomes

    def _generate(self, questions: QuestionSet, cases: dict[str, list[ConditionCase]]) -> GenerateRun:
        requests = self.requests(questions, cases)
        self.sent = dict(requests)  # the requests as sent: generated history replaces each turn's below
        if self.history == "generated" and isinstance(questions, TurnQuestions):
            return self._generate_waves(questions, requests)
        return self._run(requests)

    def _generate_waves(self, questions: TurnQuestions, requests: dict[Slot, GenerationRequest]) -> GenerateRun:
        """Generation with each condition's own history: wave by wave (:func:`~evret_core.rag.turns.waves`), one
        executor call each, every request's history rebuilt from the answers of the waves before it under the
        same condition."""
        outcomes: dict[Slot, Outcome] = {}
        stats: dict[str, dict[str, Any]] | None = None
        answered: dict[str, dict[str, str | None]] = {}  # condition -> question id -> answer text
        self.history_fallbacks = 0
        for wave in waves(questions):
            members = set(wave)
            batch: dict[Slot, GenerationRequest] = {}
            for (name, i), request in requests.items():
                if i not in members:
                    continue
                history, fallbacks = generated_history(questions, request.question_id, answered.get(name, {}))
                self.history_fallbacks += fallbacks
                batch[(name, i)] = self.sent[(name, i)] = replace(request, history=history)
            if not batch:
                continue
            run = self._run(batch)
            outcomes.update(run.outcomes)
            stats = _add_stats(stats, run.stats)
            for (name, i), outcome in run.outcomes.items():
                answer = outcome.answer
                answered.setdefault(name, {})[questions.questions[i].question_id] = (
                    None if answer is None else answer.text)
        return GenerateRun({slot: outcomes[slot] for slot in requests if slot in outcomes}, stats)

    def _run(self, requests: dict[Slot, GenerationRequest]) -> GenerateRun:
        """One executor call: the outcome of every request."""
        here: list[bool] = []  # whether the runner ran in this process (and so reported its own progress)

        def progress(stage: str, done: int, total: int) -> None:
            here.append(True)
            report_progress(self.progress, stage, done, total)

        runner = runner_class(self.claims_history)(
            self.generator, self.claim_judge, self.relevance, pipelined=self.pipelined, recipes=self.recipes,
            progress=progress if self.progress is not None else None)
        report_progress(self.progress, "generate", 0, len(requests))
        # an executor running the parts elsewhere reports whole questions done (every stage of each)
        with plugin_exits_as_errors():  # a plugin's sys.exit() in the stage is its PluginError
            run = self.executor.generate(runner, requests, lambda done: None if here else report_progress(
                self.progress, "generate", done, len(requests)))
        if list(run.outcomes) != list(requests):
            raise EvretError(f"executor {self.executor.name!r} returned outcomes for {len(run.outcomes)} of "
                             f"{len(requests)} requests")
        return run

    def check_inputs(self, questions: QuestionSet) -> None:
        """Before any work, what would otherwise surface only after it, or never: each condition's and the
        generator's ``check_inputs(questions, condition_names)`` (gold ids without a corpus; answers or cases for
        questions or conditions that are not in the run)."""
        if not isinstance(questions, TurnQuestions):
            if self.query_form != "last_turn" or self.rewriter is not None:
                raise EvretError(f"query form {self.query_form!r} applies to the turns of a conversation dataset; "
                                 f"these are single questions")
        elif self.query_form == "rewrite" and any(c.needs_retrieval for c in self.conditions) and not any(
                query_texts(questions, "rewrite", self.history_window)):
            raise EvretError(f"--query-form rewrite: none of the {len(questions)} turns has a 'rewrite' in the data; "
                             f"use last_turn, full_history, or rewriter with --rewriter NAME")
        names = [c.name for c in self.conditions]
        for part in (*self.conditions, self.generator):
            check = getattr(part, "check_inputs", None)
            if callable(check):
                check(questions, names)

    # -- the whole run -----------------------------------------------------------------------------------------
    def evaluate(self, questions: QuestionSet) -> RagResults:
        """Run every stage on ``questions`` and return the results."""
        if not isinstance(questions, QuestionSet):
            raise EvretError(f"evaluate() needs a QuestionSet, got {type(questions).__name__}")
        started = time.time()
        self.check_inputs(questions)
        retrieved, retrieval = self.retrieve(questions)
        cases = self.cases(questions, retrieved)
        self.last_cases = cases  # what each condition handed the generator (evret rag --write-cases keeps them)
        for part in (self.generator, self.claim_judge, self.relevance):
            reset = getattr(part, "reset_stats", None)
            if callable(reset):
                reset()
        generated = self._generate(questions, cases)
        outcomes = generated.outcomes
        per_question: dict[str, QuestionOutcome] = {}
        for i, q in enumerate(questions.questions):
            outcome = QuestionOutcome(
                question_id=q.question_id, question=q.question, tags=q.tags, expected_behaviour=q.expected_behaviour,
                answers=q.answers, gold_doc_ids=q.gold_doc_ids,
                retrieved_ids=[r.doc_id for r in retrieved[i]] if retrieved is not None else [],
                retrieval=retrieval.get("per_question", {}).get(q.question_id), **turn_fields(questions, q.question_id),
            )
            if outcome.retrieval is not None:
                outcome.gold_retrieved = outcome.retrieval.get(f"recall@{self.k}", 0.0) > 0
            for name in cases:
                outcome.conditions[name] = self._score(q, cases[name][i], outcomes.get((name, i)), name,
                                                       self.sent.get((name, i)))
            per_question[q.question_id] = outcome
        # the hashes of what the run read: a report's drill-down checks the files it is given against them
        results = RagResults(conditions=[c.name for c in self.conditions], confidence_level=self.confidence_level,
                             retrieval=retrieval.get("means", {}), retrieval_intervals=retrieval.get("intervals", {}),
                             per_question=per_question,
                             config={**self.config(), "question_set": questions.fingerprint()})
        if isinstance(questions, TurnQuestions):
            results.config["conversation"] = self.conversation_config(questions)
        summarise(results, retrieval, self.n_resamples, self.seed, extra_metrics=self.extra_metrics())
        carried = None
        if self.history == "generated" and isinstance(questions, TurnQuestions) and results.attribution:
            carried = self._carry(questions, cases, results)
        results.attribution_by_turn_index = attribution_by_turn_index(results)
        if retrieval.get("no_query"):  # turns the query form has no text for: not retrieved, not generated
            results.unmeasured["retrieval_no_query"] = list(retrieval["no_query"])
        results.adversarial = summarise_adversarial(results, n_resamples=self.n_resamples, seed=self.seed)
        results.stats = {"num_questions": len(questions),
                         "generator_calls": len(outcomes) + (0 if carried is None else len(carried.outcomes)),
                         "claims_judged": sum(len(o.verdicts or []) for o in outcomes.values()),
                         "pipelined": self.pipelined, "elapsed_s": round(time.time() - started, 6)}
        dropped = sum(int(o.answer.metadata.get("dropped_citations") or 0) for o in outcomes.values()
                      if o.answer is not None)
        if dropped:  # citations of ids the generator was not shown (llm generator, answers files), dropped
            results.stats["dropped_citations"] = dropped
        if self.history == "generated" and isinstance(questions, TurnQuestions):
            results.stats["history_fallbacks"] = self.history_fallbacks
            results.stats["reference_history_answers"] = 0 if carried is None else len(carried.outcomes)
            if carried is not None:
                generated = GenerateRun(generated.outcomes, _add_stats(generated.stats, carried.stats))
        llm = {role: part.stats() for role, part in (("generator", self.generator), ("claim_judge", self.claim_judge),
                                                      ("relevance", self.relevance))
               if callable(getattr(part, "clients", None)) and callable(getattr(part, "stats", None))}
        if generated.stats is not None:  # the parts ran on the executor's workers: their counts, not ours
            llm = {role: generated.stats.get(role, stats) for role, stats in llm.items()}
        if self.rewriter_stats is not None and self.query_form == "rewriter":
            llm["rewriter"] = self.rewriter_stats
        if llm:
            results.stats["llm"] = llm
        return results

    def _carry(self, questions: TurnQuestions, cases: dict[str, list[ConditionCase]],
               results: RagResults) -> GenerateRun | None:
        """``carried_failure`` (:data:`~evret_core.results.rag_results.CARRIED_FAILURE`): each turn attributed to
        retrieval or context noise after an earlier turn of its conversation that was wrong under ``retrieved`` is
        answered again under ``retrieved`` with the reference history (one executor call); right that way, its
        attribution becomes ``carried_failure`` with ``carried_from`` the earliest such turn. Returns that call's
        run (None when no turn qualifies); the attribution counts are recounted."""
        per_question = results.per_question
        first_wrong: dict[str, str] = {}  # conversation -> its earliest question wrong under retrieved
        candidates: dict[int, str] = {}
        for i, q in enumerate(questions.questions):
            conversation = questions.turns[q.question_id].conversation_id
            outcome = per_question[q.question_id]
            if conversation in first_wrong and outcome.attribution in ("retrieval_failure", "context_noise"):
                candidates[i] = first_wrong[conversation]
            if outcome.conditions["retrieved"].correct is False:
                first_wrong.setdefault(conversation, q.question_id)
        results.attribution.setdefault(CARRIED_FAILURE, 0)
        if not candidates:
            return None
        reference = self.requests(questions, cases)
        run = self._run({("retrieved", i): reference[("retrieved", i)] for i in candidates})
        for i, earlier in candidates.items():
            q = questions.questions[i]
            again = self._score(q, cases["retrieved"][i], run.outcomes.get(("retrieved", i)), "retrieved",
                                reference[("retrieved", i)])
            if again.correct:
                outcome = per_question[q.question_id]
                results.attribution[str(outcome.attribution)] -= 1
                results.attribution[CARRIED_FAILURE] += 1
                outcome.attribution, outcome.carried_from = CARRIED_FAILURE, earlier
        return run

    def conversation_config(self, questions: TurnQuestions) -> dict[str, Any]:
        """What a results file records about a run over conversation turns: the query form (and its history
        window and rewriter), the history source, what the claim judges see, and the conversations and turns."""
        window = self.history_window
        rewriter = getattr(self.rewriter, "config", None)
        return {"query_form": self.query_form, "history": self.history, "claims_history": self.claims_history,
                "history_window": {"turns": window.turns, "roles": window.roles, "max_words": window.max_words},
                "rewriter": rewriter() if callable(rewriter) else None,
                "conversations": len({t.conversation_id for t in questions.turns.values()}),
                "turns": len(questions.turns)}

    def extra_metrics(self) -> list[str]:
        """The score names of the registered scores that are not built in (a plugin's), in order."""
        return [m for s in self.scores if s.name not in BUILTIN_SCORES for m in s.metrics]

    def dry_run(self, questions: QuestionSet) -> dict[str, Any]:
        """Plan without generating or judging: generator, claim-judge and relevance calls and estimated tokens
        after the cache (:func:`~evret_core.rag.planning.plan_run`). Retrieval runs (it builds the contexts);
        nothing is sent to an LLM."""
        self.check_inputs(questions)
        retrieved, _ = self.retrieve(questions, score=False)
        cases = self.cases(questions, retrieved)
        return plan_run(self, questions, cases, self.requests(questions, cases))

    def _score(self, q: RagQuestion, case: ConditionCase, got: Outcome | None, condition: str = "",
               request: GenerationRequest | None = None) -> ConditionOutcome:
        """The outcome of ``q`` under ``condition``: the answer, its verdicts and its scores; ``request`` (as sent)
        gives the earlier messages the claims were judged against (none for a single question)."""
        expected = case.expected_behaviour or q.expected_behaviour
        answer = None if got is None else got.answer
        verdicts = None if got is None else got.verdicts
        outcome = ConditionOutcome(context_ids=[c.doc_id for c in case.contexts], expected_behaviour=expected,
                                   answer=answer, info=case.info, skipped=case.skip)
        if answer is None or got is None:
            return outcome
        outcome.claims = [ClaimResult(**vars(v)) for v in verdicts or []]
        # the history the claims were judged against, rebuilt from the request as sent, as the runner built it
        # (claim_task_of): an outcome does not carry its claim task, so that every executor's outcomes (Ray's
        # come back pickled from its workers; a third party's are its own) score alike without shipping each
        # answer's contexts back to the driver
        history = () if request is None else claims_history_of(request.history, self.claims_history)
        item = ScoreInput(q, condition, tuple(case.contexts), answer, tuple(verdicts or []), expected,
                          got.relevance, case.info, history)
        scores: dict[str, float | None] = {}
        apply_scores(self.scores, item, scores)  # the built-ins first, in order: the keys' order in the results
        if "correct" in scores:
            outcome.correct = scores["correct"] == 1.0
        outcome.scores = scores
        return outcome

    def config(self) -> dict[str, Any]:
        def conf(obj: Any) -> Any:
            c = getattr(obj, "config", None)
            return c() if callable(c) else (None if obj is None else type(obj).__name__)

        retriever = None
        if self.retriever is not None:
            retriever = conf(self.retriever) if not isinstance(self.retriever, dict) else {"name": "precomputed"}
        retrieves = any(c.needs_retrieval for c in self.conditions)
        return {"retriever": retriever, "generator": conf(self.generator), "claim_judge": conf(self.claim_judge),
                "answer_judge": conf(self.answer_judge), "relevance": conf(self.relevance),
                "retrieval_judge": conf(self.retrieval_judge) if retrieves else None,
                "conditions": [c.config() for c in self.conditions],
                "k": self.k, "correct_f1": self.correct_f1,
                "correct_rule": {"name": "answer_is_correct", "short_answer_extra_words": SHORT_ANSWER_EXTRA_WORDS,
                                 "numbers_must_agree": True, "counterfactual_adoption_is_wrong": True},
                "retrieval_metrics": self.retrieval_metrics(),
                "n_resamples": self.n_resamples, "seed": self.seed, "executor": self.executor.config()}


def retrieval_metric_names(k: int) -> list[str]:
    """The retrieval metrics of a run whose generator sees ``k`` retrieved contexts."""
    return [*(f"recall@{c}" for c in RETRIEVAL_CUTOFFS), "mrr@10", "ndcg@10", f"precision@{k}",
            *([f"recall@{k}"] if k not in RETRIEVAL_CUTOFFS else [])]


def score_names(conditions: Sequence[Condition], k: int, relevance: bool = True, answer_judge: Any = None,
                correct_f1: float = 0.5) -> list[str]:
    """Every score a run over ``conditions`` can have, by the names the gates use
    (:meth:`evret_core.results.model.Results.score_view`): ``retrieval/<metric>`` when a condition retrieves,
    ``<condition>/<metric>`` for each metric its scores give (:func:`~evret_core.rag.scores.kind.run_scores` with
    the run's ``relevance``, ``answer_judge`` and ``correct_f1``; only the scores' metrics are read) and each
    derived rate. Known from the settings alone, so a misspelt ``--fail-under`` fails before any work."""
    names = [f"retrieval/{m}" for m in retrieval_metric_names(k)] if any(c.needs_retrieval for c in conditions) else []
    scores = run_scores(relevance=relevance, answer_judge=answer_judge, correct_f1=correct_f1)
    given = [m for score in scores for m in score.metrics]
    metrics = [m for m in dict.fromkeys((*GENERATION_METRICS, *DERIVED_METRICS, *given))
               if m in given or m in DERIVED_METRICS]
    return names + [f"{c.name}/{m}" for c in conditions for m in metrics]


def _retrieval_judge(judge: Any, options: dict[str, Any] | None) -> Any:
    """The retrieval judge object: a registered judge by name (default :data:`DEFAULT_RETRIEVAL_JUDGE`) built with
    ``options``, or a judge object as it is."""
    from evret_core.plugins.registry import create_judge

    if judge is None or isinstance(judge, str):
        return create_judge(judge or DEFAULT_RETRIEVAL_JUDGE, **(options or {}))
    if options:
        raise EvretError("retrieval_judge_options apply only to a retrieval judge given by name")
    return judge


def uses_retrieval_judge(questions: QuestionSet, conditions: Sequence[Condition]) -> bool:
    """Whether a run over ``conditions`` judges retrieved passages: it retrieves, and a question has answer texts
    but no gold ids."""
    return any(c.needs_retrieval for c in conditions) and any(
        q.answers and not q.gold_doc_ids for q in questions.questions)


def _retrieval_example(q: RagQuestion) -> QueryExample:
    if q.gold_doc_ids:
        return QueryExample(query_id=q.question_id, query_text=q.question, relevant_doc_ids=q.gold_doc_ids,
                            tags=q.tags)
    return QueryExample(query_id=q.question_id, query_text=q.question, expected_answers=q.canonical_answers,
                        tags=q.tags)



def _add_stats(total: dict[str, dict[str, Any]] | None, more: dict[str, dict[str, Any]] | None
               ) -> dict[str, dict[str, Any]] | None:
    """Per-part stats of executor calls added up: numbers summed (nested tables too), anything else the latest."""
    if more is None:
        return total
    if total is None:
        return {role: dict(stats) for role, stats in more.items()}
    for role, stats in more.items():
        total[role] = _sum_table(total.get(role, {}), stats)
    return total


def _sum_table(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        old = out.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(old, (int, float)) \
                and not isinstance(old, bool):
            out[key] = old + value
        elif isinstance(value, dict) and isinstance(old, dict):
            out[key] = _sum_table(old, value)
        else:
            out[key] = value
    return out
