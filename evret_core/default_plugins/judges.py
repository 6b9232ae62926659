"""Built-in judges: exact, contains, regex, token-overlap, and llm (provider-agnostic; providers come from plugins)."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_judges(register: Register) -> None:
    from evret_core.judges.text import ContainsJudge, ExactJudge, RegexJudge, TokenOverlapJudge

    register("exact", ExactJudge)
    register("contains", ContainsJudge)
    register("regex", RegexJudge)
    register("token-overlap", TokenOverlapJudge)

    from evret_core.judges.llm import LLMJudge

    register("llm", LLMJudge)
