"""Built-in judges: exact, regex, token-overlap."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_judges(register: Register) -> None:
    from evret_core.judges.text import ExactJudge, RegexJudge, TokenOverlapJudge

    register("exact", ExactJudge)
    register("regex", RegexJudge)
    register("token-overlap", TokenOverlapJudge)
