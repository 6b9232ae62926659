"""The judge contract: does a retrieved text match an expected answer (or one of its aliases)?"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.data.models import JudgmentContext
from evret_core.plugins.registry import create_judge

#: The judge an evaluation uses when none is named (``Evaluator(judge=None)``, ``evret evaluate`` without
#: ``--judge``). ``contains`` measures best against human labels on short and long answers alike: see
#: docs/concepts.md ("Which judge") and docs/benchmarks.md ("Judges on human labels").
DEFAULT_JUDGE = "contains"

#: ``(stage, done, total)``: the evaluator's progress callback, as judges see it through :func:`report_progress`
JudgeProgress = Callable[[str, int, int], None]
_progress: ContextVar[JudgeProgress | None] = ContextVar("evret_judge_progress", default=None)


@contextmanager
def judge_progress(callback: JudgeProgress | None) -> Iterator[None]:
    """While the block runs, :func:`report_progress` calls (in this thread or task) reach ``callback``. The
    evaluator wraps its judge stage in it; a context variable rather than a judge attribute, so a judge object
    never holds the callback (nothing to pickle for Ray, nothing left behind after the run)."""
    token = _progress.set(callback)
    try:
        yield
    finally:
        _progress.reset(token)


def report_progress(stage: str, done: int, total: int) -> None:
    """For judges: report the progress of long work outside ``batch_judge``, chiefly the encoding in
    :meth:`Judge.prepare`, as ``(stage, done, total)`` (e.g. ``("encode", 2048, 24235)``) to the evaluator's
    progress callback. Does nothing when no one listens; a judge that never calls it loses nothing."""
    callback = _progress.get()
    if callback is not None:
        callback(stage, done, total)


class Judge(ABC):
    """Decides whether ``context.retrieved_text`` matches ``context.expected_text`` (or any of
    ``context.aliases``) for ``context.query``.

    Subclasses implement :meth:`judge`. Every other method has a typed default that a judge overrides when it can
    do better:

    - :meth:`prepare` sees every context of an evaluation before the (chunked) :meth:`batch_judge` calls, so
      per-text work (embeddings) is done once, in one pass;
    - :meth:`batch_judge` answers one ``bool | None`` per context, in order; ``None`` is a judgment that could
      not be made (an API failure after retries), reported as unmeasured; the built-in judges always answer;
    - :meth:`batch_score` gives a score in [0, 1] per context; for a judge with a :attr:`threshold`,
      ``judge(c) == (score >= threshold)``; the default maps True/False/None to 1.0/0.0/None;
    - :meth:`reset_stats` / :meth:`stats` report cost (texts encoded, API calls, tokens) per evaluation;
    - :meth:`plan` estimates the work before any is done (``--dry-run``).

    The evaluator passes ``prepare`` and ``batch_judge`` a :class:`~evret_core.judge.context_columns.ContextColumns`: a
    ``Sequence[JudgmentContext]`` that builds each context when indexed, over the distinct answers and texts. A
    judge whose work is per text reads those columns (``ContextColumns.of(contexts)``) and builds no context.
    """

    name: str = "judge"
    #: the score a context needs to match, for judges that score on a scale; None for yes/no judges
    threshold: float | None = None

    @abstractmethod
    def judge(self, context: JudgmentContext) -> bool:
        """True when the retrieved text matches the expected text or one of its aliases."""

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Judge every context, in order; the default judges them one by one (``contexts`` may be
        :class:`~evret_core.judge.context_columns.ContextColumns`, whose contexts are built as they are read)."""
        return [self.judge(context) for context in contexts]

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """A score in [0, 1] per context, in order (``None`` = unmeasured). The default maps the verdicts of
        :meth:`batch_judge` to 1.0 / 0.0."""
        return [None if verdict is None else float(bool(verdict)) for verdict in self.batch_judge(contexts)]

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        """Called once with every context an evaluation will judge, before the (possibly chunked) ``batch_judge``
        calls: a judge whose cost is per distinct text (embeddings) does that work here in one pass, reporting
        its progress with :func:`report_progress` (the evaluator's progress bar is otherwise still until the first
        chunk is judged). Default: no-op.
        """

    def reset_stats(self) -> None:
        """Start counting cost afresh (the evaluator calls this once per run). Default: nothing to count."""

    def stats(self) -> dict[str, Any]:
        """The cost of the judgments since :meth:`reset_stats` (``results.stats["judge"]``); empty by default."""
        return {}

    def plan(self, contexts: Sequence[JudgmentContext]) -> dict[str, Any]:
        """What judging ``contexts`` would cost, without doing it. The default: nothing is sent anywhere."""
        unique = len(set(contexts))
        return {"contexts": len(contexts), "unique": unique, "cached": 0, "to_send": 0,
                "note": f"judge {self.name!r} makes no API calls"}

    def config(self) -> dict[str, Any]:
        """The settings that change this judge's answers; part of the results manifest and of cache keys."""
        return {"name": self.name}

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({settings})"


def resolve_judge(judge: Judge | str | None = None, **options: Any) -> Judge:
    """The judge to use: ``judge`` itself when it is a judge object, the registered judge of that name, or the
    default (:data:`DEFAULT_JUDGE`) when ``judge`` is None. The one place the default is decided; the evaluator
    and the CLI both call it."""
    if judge is None or isinstance(judge, str):
        return create_judge(judge or DEFAULT_JUDGE, **options)
    if options:
        raise EvretError(f"judge options {sorted(options)} were given with a judge object {judge!r}")
    return judge
