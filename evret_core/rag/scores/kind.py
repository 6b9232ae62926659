"""RAG scores: what is computed per question and condition from the answer, the contexts, the claim verdicts and
the question's labels (the ``rag_score`` kind, hook ``register_rag_scores``).

A :class:`RagScore` declares the score names it gives (``metrics``) and returns them from :meth:`RagScore.score`
for one :class:`ScoreInput`: a number (a mean is taken over questions, with a bootstrap interval) or None (not
applicable, left out of the mean). The built-ins, registered through the same hook, are ``claims``
(groundedness, faithfulness, contradiction rate, citation precision and recall, from the claim verdicts),
``answer-match`` (SQuAD exact match and token F1 against the gold answers) and ``behaviour`` (refused,
behaviour_ok). The harness computes every registered score, the built-ins first; answer relevance, the answer
judge and correctness stay the harness's (they need its parts and settings).
"""

from __future__ import annotations

from collections.abc import Mapping

from evret_core.contracts.errors import EvretError
from evret_core.contracts.rag_score import RagScore, ScoreInput
from evret_core.rag.claims.claim_judges import claim_scores
from evret_core.rag.scores.answers import behaviour_ok, squad_scores

BUILTIN_SCORES = ("claims", "answer-match", "behaviour")
"""The built-in scores, computed first and in this order (the results' per-question score order)."""


class ClaimScores(RagScore):
    """Groundedness, faithfulness, contradiction rate and citation precision / recall from the claim verdicts
    (:func:`~evret_core.rag.claims.claim_judges.claim_scores`)."""

    name = "claims"
    metrics = ("groundedness", "faithfulness", "contradiction_rate", "citation_precision", "citation_recall")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        return claim_scores(item.verdicts)


class AnswerMatch(RagScore):
    """SQuAD exact match and token F1 of the answer against the gold answers (a refusal answers ""); none for a
    question without a label."""

    name = "answer-match"
    metrics = ("exact", "f1")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        golds = item.golds
        if not golds and item.expected_behaviour == "answer":
            return {}
        em, f1 = squad_scores(item.prediction, golds)
        return {"exact": em, "f1": f1}


class Behaviour(RagScore):
    """Whether the answer refused (or escalated), and whether it behaved as expected."""

    name = "behaviour"
    metrics = ("refused", "behaviour_ok")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        answer = item.answer
        return {"refused": float(answer.refused or answer.escalated),
                "behaviour_ok": float(behaviour_ok(item.expected_behaviour, answer.refused, answer.escalated))}


def registered_scores() -> list[RagScore]:
    """Every registered score, the built-ins first (in :data:`BUILTIN_SCORES` order), then the others by name."""
    from evret_core.plugins.registry import create_rag_score, rag_score_names

    known = rag_score_names()
    order = [n for n in BUILTIN_SCORES if n in known] + [n for n in known if n not in BUILTIN_SCORES]
    return [create_rag_score(n) for n in order]


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
