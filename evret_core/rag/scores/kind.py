"""RAG scores: what is computed per question and condition from the answer, the contexts, the claim verdicts and
the question's labels (the ``rag_score`` kind, hook ``register_rag_scores``).

A :class:`RagScore` declares the score names it gives (``metrics``) and returns them from :meth:`RagScore.score`
for one :class:`ScoreInput`: a number (a mean is taken over questions, with a bootstrap interval) or None (not
applicable, left out of the mean). The built-ins, registered through the same hook, are ``claims``
(groundedness, faithfulness, contradiction rate, citation precision and recall, from the claim verdicts; the
history support rate for a turn of a conversation),
``answer-match`` (SQuAD exact match and token F1 against the gold answers) and ``behaviour`` (refused,
behaviour_ok), ``answer-relevance`` (the relevance the run measured) and ``correct`` (the answer judge's verdict
and the ``correct`` verdict; built with the run's answer judge and ``correct_f1``). The harness computes every
registered score, the built-ins first and in :data:`BUILTIN_SCORES` order (the order of each question's scores).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evret_core.contracts.data import Question
from evret_core.contracts.errors import EvretError
from evret_core.contracts.rag_score import RagScore, ScoreInput
from evret_core.rag.claims.claim_judges import claim_scores
from evret_core.rag.scores.adversarial_scores import counterfactual_scores
from evret_core.rag.scores.answers import answer_is_correct, behaviour_of, behaviour_ok, squad_scores

BUILTIN_SCORES = ("claims", "answer-match", "behaviour", "answer-relevance", "correct")
"""The built-in scores, computed first and in this order (the results' per-question score order)."""


class ClaimScores(RagScore):
    """Groundedness, faithfulness, contradiction rate and citation precision / recall from the claim verdicts
    (:func:`~evret_core.rag.claims.claim_judges.claim_scores`), and the history support rate for an answer whose
    claims were judged against a conversation's earlier messages too (none for a single question)."""

    name = "claims"
    metrics = ("groundedness", "faithfulness", "contradiction_rate", "citation_precision", "citation_recall",
               "history_support_rate")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        return claim_scores(item.verdicts, history=bool(item.history))


class AnswerMatch(RagScore):
    """SQuAD exact match and token F1 of the answer against the gold answers (a refusal, an escalation or a
    clarifying question answers ""); none for a question without a label."""

    name = "answer-match"
    metrics = ("exact", "f1")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        golds = item.golds
        if not golds and item.expected_behaviour == "answer":
            return {}
        em, f1 = squad_scores(item.prediction, golds)
        return {"exact": em, "f1": f1}


class Behaviour(RagScore):
    """Whether the answer refused (or escalated; an answer that asks the user back did neither: clarify beats
    both), and whether it behaved as expected (:func:`~evret_core.rag.scores.answers.behaviour_ok`)."""

    name = "behaviour"
    metrics = ("refused", "behaviour_ok")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        a = item.answer
        return {"refused": float(behaviour_of(a.refused, a.escalated, a.clarified) in ("refuse", "escalate")),
                "behaviour_ok": float(behaviour_ok(item.expected_behaviour, a.refused, a.escalated, a.clarified))}


class AnswerRelevance(RagScore):
    """The answer's relevance to the question, as the run's relevance part measured it (None where it could not);
    nothing when ``enabled`` is False (a run without relevance)."""

    name = "answer-relevance"
    metrics: tuple[str, ...] = ("answer_relevance",)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)
        self.metrics = ("answer_relevance",) if self.enabled else ()

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        if not self.enabled:
            return {}
        return {"answer_relevance": None if item.relevance is None else float(item.relevance)}


class Correct(RagScore):
    """``answer_judge``: whether ``answer_judge`` (an Evret judge, optional) says the answer matches a gold answer
    (for an answer, not a refusal nor a clarifying question, to a question with golds); ``correct``: whether the
    answer is right, for a
    labelled question: it behaved as expected and, when an answer is expected,
    :func:`~evret_core.rag.scores.answers.answer_is_correct` at ``correct_f1`` or the answer judge says so; a
    counterfactual case's answer stating the planted value is never right, one correcting it is."""

    name = "correct"
    metrics: tuple[str, ...] = ("answer_judge", "correct")

    def __init__(self, answer_judge: Any = None, correct_f1: float = 0.5) -> None:
        self.answer_judge = answer_judge
        self.correct_f1 = check_correct_f1(correct_f1)
        self.metrics = ("answer_judge", "correct") if answer_judge is not None else ("correct",)

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        q, answer, expected = item.question, item.answer, item.expected_behaviour
        scores: dict[str, float | None] = {}
        refused = answer.refused or answer.escalated or answer.clarified  # nothing stated to judge
        prediction = item.prediction
        golds = item.golds
        has_label = bool(golds) or expected != "answer"
        behaved = behaviour_ok(expected, answer.refused, answer.escalated, answer.clarified)
        if self.answer_judge is not None and golds and not refused:
            scores["answer_judge"] = float(_judge_answer(self.answer_judge, q, prediction))
        if has_label:
            right = behaved
            if expected == "answer":
                said_right = answer_is_correct(prediction, golds, self.correct_f1, q.question)
                right = behaved and (said_right or bool(scores.get("answer_judge")))
                if item.info.get("family") == "counterfactual":
                    # an answer stating the planted value is never right, one correcting it is: decided here, once,
                    # so that every table and the family's rates read the same verdict
                    right = counterfactual_scores(answer, item.info, bool(refused), float(right),
                                                  golds)["correct"] == 1.0
            scores["correct"] = float(right)
        return scores


def check_correct_f1(correct_f1: Any) -> float:
    """``correct_f1`` as a float in [0, 1], else an :class:`EvretError` naming it."""
    try:
        value = float(correct_f1)
    except (TypeError, ValueError):
        raise EvretError(f"correct_f1 must be a number in [0, 1], got {correct_f1!r}") from None
    if not 0.0 <= value <= 1.0:
        raise EvretError(f"correct_f1 must be a number in [0, 1], got {correct_f1!r}")
    return value


def _judge_answer(judge: Any, q: Question, prediction: str) -> bool:
    from evret_core.contracts.judge import JudgmentContext

    contexts = [JudgmentContext(query=q.question, expected_text=g, retrieved_text=prediction) for g in q.answer_strings]
    return any(bool(v) for v in judge.batch_judge(contexts))


def registered_scores(options: Mapping[str, Mapping[str, Any]] | None = None) -> list[RagScore]:
    """Every registered score, the built-ins first (in :data:`BUILTIN_SCORES` order), then the others by name;
    ``options``: score name -> the options it is built with (``{"correct": {"correct_f1": 0.6}}``)."""
    from evret_core.plugins.registry import create_rag_score, rag_score_names

    known = rag_score_names()
    order = [n for n in BUILTIN_SCORES if n in known] + [n for n in known if n not in BUILTIN_SCORES]
    return [create_rag_score(n, **(options or {}).get(n, {})) for n in order]


def run_scores(relevance: bool = True, answer_judge: Any = None, correct_f1: float = 0.5) -> list[RagScore]:
    """The scores of a RAG run: every registered score, ``answer-relevance`` and ``correct`` built with the run's
    settings (whether it measures relevance, its answer judge, ``correct_f1``)."""
    return registered_scores({"answer-relevance": {"enabled": relevance},
                              "correct": {"answer_judge": answer_judge, "correct_f1": correct_f1}})


def apply_scores(scores: list[RagScore], item: ScoreInput, into: dict[str, float | None]) -> None:
    """Add each score's values for ``item`` to ``into``; a value that is not a number, a name the score does not
    declare or one already given is an :class:`EvretError` naming the score."""
    from evret_core.results.rag_results import clean

    for score in scores:
        got = score.score(item)
        if not isinstance(got, Mapping):
            raise EvretError(f"rag score {score.name!r} returned {type(got).__name__}, not a mapping of scores")
        for key, value in got.items():
            if key not in score.metrics:
                raise EvretError(f"rag score {score.name!r} returned {key!r}, which is not in its metrics "
                                 f"({', '.join(score.metrics) or 'none'})")
            if key in into:
                raise EvretError(f"rag score {score.name!r} returned {key!r}, which another score already gives")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise EvretError(f"rag score {score.name!r}: {key} must be a number or None, got {value!r}")
            into[key] = clean(None if value is None else float(value))
