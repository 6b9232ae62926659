"""Which judge an evaluation uses: the default judge, and a judge object or registered name resolved to a judge."""

from __future__ import annotations

from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge
from evret_core.plugins.registry import create_judge

#: The judge an evaluation uses when none is named (``Evaluator(judge=None)``, ``evret evaluate`` without
#: ``--judge``). ``contains`` measures best against human labels on short and long answers alike: see
#: docs/concepts.md ("Which judge") and docs/benchmarks.md ("Judges on human labels").
DEFAULT_JUDGE = "contains"


def resolve_judge(judge: Judge | str | None = None, **options: Any) -> Judge:
    """The judge to use: ``judge`` itself when it is a judge object, the registered judge of that name, or the
    default (:data:`DEFAULT_JUDGE`) when ``judge`` is None. The one place the default is decided; the evaluator
    and the CLI both call it."""
    if judge is None or isinstance(judge, str):
        return create_judge(judge or DEFAULT_JUDGE, **options)
    if options:
        raise EvretError(f"judge options {sorted(options)} were given with a judge object {judge!r}")
    return judge
