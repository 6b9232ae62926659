"""Built-in judges: exact, contains, regex, token-overlap, cascade, repeats, and llm (providers come from plugins)."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_judges(register: Register) -> None:
    register("exact", LazyFactory("evret_core.judges.text:ExactJudge"))
    register("contains", LazyFactory("evret_core.judges.text:ContainsJudge"))
    register("regex", LazyFactory("evret_core.judges.text:RegexJudge"))
    register("token-overlap", LazyFactory("evret_core.judges.text:TokenOverlapJudge"))
    register("cascade", LazyFactory("evret_core.judges.cascade:CascadeJudge"))
    register("repeats", LazyFactory("evret_core.judges.repeats:RepeatedJudge"))
    register("llm", LazyFactory("evret_core.judges.llm:LLMJudge"))
