"""The RAG harness: score a RAG system's retrieval and generation separately, then jointly.

``RagEvaluator(retriever, generator).evaluate(QuestionSet.load(path))`` answers each question under the gold and
the retrieved context, judges the answers' claims against their contexts, scores correctness (SQuAD 2.0 exact match
and F1), behaviour (refusals) and retrieval, and attributes each failure to the retriever or the generator.
See docs/rag.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evret_core.lazy import lazy_export

if TYPE_CHECKING:
    from evret_core.contracts.claims import ClaimJudge, ClaimTask, ClaimVerdict
    from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest, Generator
    from evret_core.contracts.perturb import ConditionCase
    from evret_core.contracts.rag_score import RagScore, ScoreInput
    from evret_core.rag.claims.claim_judges import LexicalClaimJudge, claim_scores
    from evret_core.rag.generate.extractive import ExtractiveGenerator
    from evret_core.rag.generate.generators import PrecomputedGenerator, resolve_generator
    from evret_core.rag.harness import RagEvaluator
    from evret_core.rag.questions.conditions import (
        Condition,
        GoldCondition,
        PerturbedCondition,
        RetrievedCondition,
    )
    from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion
    from evret_core.rag.scores.answers import exact_match, normalize_answer, squad_scores, token_f1
    from evret_core.results.rag_results import RagResults

# public name -> the module that defines it; imported on first use, so that importing one RAG module (or
# evret_core.results.rag_results) does not import the whole harness
_EXPORTS: dict[str, str] = {
    "Answer": "evret_core.contracts.generation",
    "Claim": "evret_core.contracts.generation",
    "ClaimJudge": "evret_core.contracts.claims",
    "ClaimTask": "evret_core.contracts.claims",
    "ClaimVerdict": "evret_core.contracts.claims",
    "Condition": "evret_core.rag.questions.conditions",
    "ConditionCase": "evret_core.contracts.perturb",
    "Context": "evret_core.contracts.generation",
    "ExtractiveGenerator": "evret_core.rag.generate.extractive",
    "GenerationRequest": "evret_core.contracts.generation",
    "Generator": "evret_core.contracts.generation",
    "GoldCondition": "evret_core.rag.questions.conditions",
    "LexicalClaimJudge": "evret_core.rag.claims.claim_judges",
    "PerturbedCondition": "evret_core.rag.questions.conditions",
    "PrecomputedGenerator": "evret_core.rag.generate.generators",
    "QuestionSet": "evret_core.rag.questions.question_sets",
    "RagEvaluator": "evret_core.rag.harness",
    "RagQuestion": "evret_core.rag.questions.question_sets",
    "RagResults": "evret_core.results.rag_results",
    "RagScore": "evret_core.contracts.rag_score",
    "RetrievedCondition": "evret_core.rag.questions.conditions",
    "ScoreInput": "evret_core.contracts.rag_score",
    "claim_scores": "evret_core.rag.claims.claim_judges",
    "exact_match": "evret_core.rag.scores.answers",
    "normalize_answer": "evret_core.rag.scores.answers",
    "resolve_generator": "evret_core.rag.generate.generators",
    "squad_scores": "evret_core.rag.scores.answers",
    "token_f1": "evret_core.rag.scores.answers",
}

__all__ = [
    "Answer",
    "Claim",
    "ClaimJudge",
    "ClaimTask",
    "ClaimVerdict",
    "Condition",
    "ConditionCase",
    "Context",
    "ExtractiveGenerator",
    "GenerationRequest",
    "Generator",
    "GoldCondition",
    "LexicalClaimJudge",
    "PerturbedCondition",
    "PrecomputedGenerator",
    "QuestionSet",
    "RagEvaluator",
    "RagQuestion",
    "RagResults",
    "RagScore",
    "RetrievedCondition",
    "ScoreInput",
    "claim_scores",
    "exact_match",
    "normalize_answer",
    "resolve_generator",
    "squad_scores",
    "token_f1",
]


def __getattr__(name: str) -> Any:
    return lazy_export(globals(), _EXPORTS, name)
