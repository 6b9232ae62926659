"""Built-in judges: exact, regex, token-overlap, cascade, repeats, llm (providers come from plugins)."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_judges(register: Register) -> None:
    from evret_core.judges.text import ExactJudge, RegexJudge, TokenOverlapJudge

    register("exact", ExactJudge)
    register("regex", RegexJudge)
    register("token-overlap", TokenOverlapJudge)

    from evret_core.judges.cascade import CascadeJudge

    register("cascade", CascadeJudge)

    from evret_core.judges.repeats import RepeatedJudge

    register("repeats", RepeatedJudge)

    from evret_core.judges.llm import LLMJudge

    register("llm", LLMJudge)
