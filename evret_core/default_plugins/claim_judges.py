"""Built-in claim judges: lexical (an Evret judge per claim and context) and llm (extraction and verification by a
chat model)."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_claim_judges(register: Register) -> None:
    register("lexical", LazyFactory("evret_core.rag.claims:LexicalClaimJudge"))
    register("llm", LazyFactory("evret_core.rag.llm_judge:LLMClaimJudge"))
