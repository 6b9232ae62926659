"""Evret's built-ins, registered through the same hooks as third-party plugins: one :class:`BuiltinPlugin` per
kind, each listed by ``evret plugins`` as ``evret-core:NAME``.

They register :class:`LazyFactory` objects, so that loading and listing plugins imports neither numpy, pydantic
nor asyncio: the class behind a name is imported when that name is first used.
"""

from __future__ import annotations

from typing import Any

from evret_core.contracts.hooks import LazyFactory, Register, hookimpl


class BuiltinPlugin:
    """One built-in plugin: its name in ``evret plugins`` and, per hook it implements, the names it registers and
    the ``"module:attribute"`` each name is built by."""

    def __init__(self, name: str, hook: str, factories: dict[str, str]) -> None:
        self.name = name
        self.factories = factories

        def register_all(register: Register[Any]) -> None:
            for entry, target in factories.items():
                register(entry, LazyFactory(target))

        setattr(self, hook, hookimpl(specname=hook)(register_all))
        self._hook = hook

    def __dir__(self) -> list[str]:
        # pluggy looks for hook implementations among the names dir() lists: the one hook, not object's thirty
        # attributes (each looked up statically, the most of what registering the built-ins cost)
        return [self._hook]

    def __repr__(self) -> str:
        return f"BuiltinPlugin({self.name!r})"


#: Metric family -> class in :mod:`evret_core.metrics.ir`, written out (tests/plugins/test_plugins.py checks it against
#: ``ALL_METRICS``) so that registering them imports no numpy.
FAMILIES = {
    "precision": "Precision", "recall": "Recall", "f1": "F1", "hit_rate": "HitRate", "mrr": "MRR", "ndcg": "NDCG",
    "ap": "AveragePrecision", "r_precision": "RPrecision", "bpref": "Bpref", "err": "ERR", "rbp": "RBP",
    "rbp_residual": "RBPResidual", "num_rel_ret": "NumRelRet", "num_rel": "NumRel", "num_ret": "NumRet",
    "judged": "Judged", "unjudged": "Unjudged", "precision_condensed": "PrecisionCondensed",
    "recall_condensed": "RecallCondensed", "mrr_condensed": "MRRCondensed", "ndcg_condensed": "NDCGCondensed",
    "ap_condensed": "AveragePrecisionCondensed",
}

_RAG = "evret_core.rag"

BUILTIN_PLUGINS: tuple[BuiltinPlugin, ...] = (
    # RAG claim judges: lexical (an Evret judge per claim and context) and llm (extraction and verification)
    BuiltinPlugin("claim_judges", "register_claim_judges", {
        "lexical": f"{_RAG}.claims.claim_judges:LexicalClaimJudge",
        "llm": f"{_RAG}.claims.llm_judge:LLMClaimJudge"}),
    # Criteria judges score records, so they are output evaluator types (same registry, same
    # ``create_evaluator``/``evret score``): a third-party criteria judge registers like any output evaluator.
    BuiltinPlugin("criteria_judges", "register_evaluators", {
        "direct": "evret_core.criteria:DirectJudge",
        "pairwise": "evret_core.criteria:PairwiseJudge"}),
    BuiltinPlugin("evaluators", "register_retrieval_evaluators", {
        "retrieval": "evret_core.evaluation.evaluator:Evaluator"}),
    BuiltinPlugin("executors", "register_executors", {
        "local": "evret_core.evaluation.executors:LocalExecutor"}),
    BuiltinPlugin("generators", "register_generators", {
        "extractive": f"{_RAG}.generate.extractive:ExtractiveGenerator",
        "llm": f"{_RAG}.generate.llm_generator:LLMGenerator"}),
    # LLM providers come from plugins.
    BuiltinPlugin("judges", "register_judges", {
        "exact": "evret_core.judge.lexical:ExactJudge",
        "contains": "evret_core.judge.lexical:ContainsJudge",
        "regex": "evret_core.judge.lexical:RegexJudge",
        "token-overlap": "evret_core.judge.lexical:TokenOverlapJudge",
        "cascade": "evret_core.judge.cascade:CascadeJudge",
        "repeats": "evret_core.judge.repeats:RepeatedJudge",
        "llm": "evret_core.judge.llm:LLMJudge",
        "relevance": "evret_core.judge.relevance_judge:RelevanceJudge"}),
    BuiltinPlugin("metrics", "register_metrics", {
        family: f"evret_core.metrics.ir:{cls}" for family, cls in FAMILIES.items()}),
    BuiltinPlugin("output_evaluators", "register_evaluators", {
        "exact": "evret_core.scoring.text_outputs:ExactOutputEvaluator",
        "regex": "evret_core.scoring.text_outputs:RegexOutputEvaluator",
        "llm-score": "evret_core.scoring.llm_score:LLMScoreEvaluator"}),
    BuiltinPlugin("perturbations", "register_perturbations", {
        "counterfactual": f"{_RAG}.perturb.counterfactual:Counterfactual",
        "injection": f"{_RAG}.perturb.perturbations:Injection",
        "missing-gold": f"{_RAG}.perturb.perturbations:MissingGold",
        "irrelevant-only": f"{_RAG}.perturb.perturbations:IrrelevantOnly"}),
    # claims (groundedness, faithfulness, citations), answer-match (exact, F1), behaviour (refused, behaviour_ok),
    # answer-relevance, correct (answer_judge, correct)
    BuiltinPlugin("rag_scores", "register_rag_scores", {
        "claims": f"{_RAG}.scores.kind:ClaimScores",
        "answer-match": f"{_RAG}.scores.kind:AnswerMatch",
        "behaviour": f"{_RAG}.scores.kind:Behaviour",
        "answer-relevance": f"{_RAG}.scores.kind:AnswerRelevance",
        "correct": f"{_RAG}.scores.kind:Correct"}),
    # ``run``: a precomputed run read from a file; ``rerank``: any retriever's candidates reranked; ``hybrid``:
    # registered retrievers fused into one ranking
    BuiltinPlugin("retrievers", "register_retrievers", {
        "run": "evret_core.retrieve.run_retriever:precomputed_run",
        "rerank": "evret_core.retrieve.rerank_retriever:RerankRetriever",
        "hybrid": "evret_core.retrieve.hybrid:HybridRetriever"}),
    BuiltinPlugin("rerankers", "register_rerankers", {
        "llm": "evret_core.retrieve.rerankers:LLMReranker"}),
    # a conversation turn's message as a standalone query (the ``rewriter`` query form)
    BuiltinPlugin("rewriters", "register_rewriters", {
        "llm": "evret_core.conversation.llm_rewriter:LLMRewriter",
        "carry-terms": "evret_core.conversation.carry_terms:CarryTermsRewriter"}),
)

__all__ = ["BUILTIN_PLUGINS", "FAMILIES", "BuiltinPlugin"]


