"""The judge contract: what a judge sees (:class:`JudgmentContext`), the :class:`Judge` base class, how a judge
reports its progress (:func:`report_progress`), and the contexts as columns (:class:`ContextColumns`).

An evaluation of 100,000 text-labelled queries x 100 retrieved texts needs up to ten million
:class:`~evret_core.contracts.judge.JudgmentContext`s, and a pydantic model each costs microseconds. The evaluator keeps
them as columns instead: the distinct answers (query, expected text, aliases), the distinct retrieved texts, and
per context the index of its answer and of its text. :class:`ContextColumns` is a ``Sequence[JudgmentContext]``
over those columns: a judge that indexes or iterates it gets the very contexts it always got (built on access),
so every judge keeps working unchanged; a judge whose work is per text (the lexical judges: normalise each
distinct text once) reads the columns directly (:meth:`ContextColumns.of` gives columns for any sequence of
contexts, so one code path serves both).

numpy is imported inside the functions that compute, so importing this module loads none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, overload

from evret_core.contracts.values import Value, as_list, as_str, value_type

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MEMO_LIMIT", "AnswerKey", "ContextColumns", "Judge", "JudgeProgress", "JudgmentContext", "judge_progress",
           "reference_free_context", "report_progress"]


@value_type(kw_only=True)
class JudgmentContext(Value):
    """What a judge sees: the query, one expected answer text (with its other acceptable strings, ``aliases``)
    and one retrieved text. A judge says "match" when the expected text or any alias matches.

    Hashable and compared by value; ``aliases`` may be given as any list-like of strings (kept as a tuple)."""

    query: str
    expected_text: str
    retrieved_text: str
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (type(self.query) is str and type(self.expected_text) is str and type(self.retrieved_text) is str
                and type(self.aliases) is tuple and all(type(a) is str for a in self.aliases)):
            return
        for name in ("query", "expected_text", "retrieved_text"):
            object.__setattr__(self, name, as_str(getattr(self, name), name))
        object.__setattr__(self, "aliases", tuple(as_list(self.aliases, "aliases", as_str)))

    @property
    def expected_variants(self) -> tuple[str, ...]:
        """Every acceptable string of the expected answer: ``(expected_text, *aliases)``."""
        return (self.expected_text, *self.aliases)


def reference_free_context(query: str, retrieved_text: str) -> JudgmentContext:
    """The context a :attr:`Judge.reference_free` judge is given: the query and one retrieved text, no expected
    answer (``expected_text=""``)."""
    return JudgmentContext(query=query, expected_text="", retrieved_text=retrieved_text)


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

    The evaluator passes ``prepare`` and ``batch_judge`` a :class:`~evret_core.contracts.judge.ContextColumns`: a
    ``Sequence[JudgmentContext]`` that builds each context when indexed, over the distinct answers and texts. A
    judge whose work is per text reads those columns (``ContextColumns.of(contexts)``) and builds no context.
    """

    name: str = "judge"
    #: the score a context needs to match, for judges that score on a scale; None for yes/no judges
    threshold: float | None = None
    #: True for a judge that needs no expected answer: it grades ``(query, retrieved_text)``, and the contexts it
    #: is given carry ``expected_text=""`` (:func:`reference_free_context`)
    reference_free: bool = False
    #: the top grade of a 0..``grades`` integer scale (a 0-3 relevance judge: 3); None for a yes/no judge
    grades: int | None = None
    #: a graded judge's verdict is "match" from this grade on (a 0-3 relevance judge: 2); None for a yes/no judge
    cut: float | None = None

    @abstractmethod
    def judge(self, context: JudgmentContext) -> bool:
        """True when the retrieved text matches the expected text or one of its aliases."""

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Judge every context, in order; the default judges them one by one (``contexts`` may be
        :class:`~evret_core.contracts.judge.ContextColumns`, whose contexts are built as they are read)."""
        return [self.judge(context) for context in contexts]

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """A score in [0, 1] per context, in order (``None`` = unmeasured). The default maps the verdicts of
        :meth:`batch_judge` to 1.0 / 0.0."""
        return [None if verdict is None else float(bool(verdict)) for verdict in self.batch_judge(contexts)]

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """A grade per context, in order, on the judge's 0..:attr:`grades` scale (``None`` = unmeasured). The
        default maps the verdicts of :meth:`batch_judge` to 1.0 / 0.0, so a yes/no judge grades on a 0-1 scale."""
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


_MISSING = object()

#: The most values a :meth:`ContextColumns.memo` holds (the old per-process memo of normalised texts held as many).
MEMO_LIMIT = 65536

AnswerKey = tuple[str, str, tuple[str, ...]]
"""What identifies an expected answer to a judge: ``(query, expected_text, aliases)``."""


class ContextColumns(Sequence[JudgmentContext]):
    """Judgment contexts as columns; a ``Sequence[JudgmentContext]`` that builds each context when indexed.

    :param answers: the distinct answers, each ``(query, expected_text, aliases)`` (``aliases``: the answer's
        other acceptable strings, as in :class:`~evret_core.contracts.judge.JudgmentContext`).
    :param texts: the distinct retrieved texts.
    :param answer_index: per context, the index of its answer in ``answers``.
    :param text_index: per context, the index of its retrieved text in ``texts``.

    Context ``i`` is ``JudgmentContext(query=answers[a][0], expected_text=answers[a][1],
    retrieved_text=texts[t], aliases=answers[a][2])`` with ``a = answer_index[i]`` and ``t = text_index[i]``.
    A slice is again columns over the same ``answers`` and ``texts`` (no copy of them), and shares their
    :meth:`per_text` / :meth:`per_answer` memos, so a judge called chunk by chunk still does its per-text work once
    per evaluation. Pickling keeps only the answers and texts the contexts use.
    """

    __slots__ = ("answer_index", "answers", "text_index", "texts", "_memo")

    def __init__(
        self,
        answers: Sequence[AnswerKey],
        texts: Sequence[str],
        answer_index: np.ndarray | Sequence[int],
        text_index: np.ndarray | Sequence[int],
        _memo: dict[Hashable, dict[Any, Any]] | None = None,
    ) -> None:
        import numpy as np

        self.answers = answers
        self.texts = texts
        self.answer_index = np.asarray(answer_index, dtype=np.int64)
        self.text_index = np.asarray(text_index, dtype=np.int64)
        if self.answer_index.shape != self.text_index.shape or self.answer_index.ndim != 1:
            raise ValueError("ContextColumns: answer_index and text_index must be 1-d and of the same length")
        self._memo: dict[Hashable, dict[Any, Any]] = {} if _memo is None else _memo

    @classmethod
    def of(cls, contexts: Sequence[JudgmentContext]) -> ContextColumns:
        """``contexts`` as columns: itself when it already is, else columns built from the contexts (each
        distinct answer and text once, in first-seen order)."""
        if isinstance(contexts, ContextColumns):
            return contexts
        answer_ids: dict[AnswerKey, int] = {}
        text_ids: dict[str, int] = {}
        answer_index = [answer_ids.setdefault((c.query, c.expected_text, c.aliases), len(answer_ids))
                        for c in contexts]
        text_index = [text_ids.setdefault(c.retrieved_text, len(text_ids)) for c in contexts]
        return cls(list(answer_ids), list(text_ids), answer_index, text_index)

    # -- Sequence --------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.answer_index)

    @overload
    def __getitem__(self, index: int) -> JudgmentContext: ...

    @overload
    def __getitem__(self, index: slice) -> ContextColumns: ...

    def __getitem__(self, index: int | slice) -> JudgmentContext | ContextColumns:
        if isinstance(index, slice):
            return ContextColumns(self.answers, self.texts, self.answer_index[index], self.text_index[index],
                                  self._memo)
        return self._context(int(self.answer_index[index]), int(self.text_index[index]))

    def __iter__(self) -> Iterator[JudgmentContext]:
        for a, t in zip(self.answer_index.tolist(), self.text_index.tolist(), strict=True):
            yield self._context(a, t)

    def _context(self, a: int, t: int) -> JudgmentContext:
        query, expected, aliases = self.answers[a]
        return JudgmentContext(query=query, expected_text=expected, retrieved_text=self.texts[t], aliases=aliases)

    def __repr__(self) -> str:
        return f"ContextColumns({len(self)} contexts, {len(self.answers)} answers, {len(self.texts)} texts)"

    def __reduce__(self) -> tuple[Any, ...]:
        compact = self.compact()
        return (ContextColumns, (compact.answers, compact.texts, compact.answer_index, compact.text_index))

    # -- for judges --------------------------------------------------------------------------------------------------
    def pairs(self) -> Iterator[tuple[int, int]]:
        """``(answer index, text index)`` of each context, in order."""
        return zip(self.answer_index.tolist(), self.text_index.tolist(), strict=True)

    def per_text(self, key: Hashable, compute: Callable[[str], Any]) -> dict[int, Any]:
        """``{text index: compute(text)}`` for every text these contexts use. Values are memoised by text value
        in a memo shared by these columns and all their slices, so chunked calls and a text that occurs twice in
        ``texts`` (retrieved for two queries) do not redo the work. ``key`` names the computation (include every
        setting that changes its result, e.g. ``("normalize", remove_articles)``). The memo holds at most
        :data:`MEMO_LIMIT` values (it starts afresh when full), so memory stays bounded on any run."""
        by_value = self._bounded(("per_text", key))
        texts = self.texts
        out: dict[int, Any] = {}
        for i in dict.fromkeys(self.text_index.tolist()):
            text = texts[i]
            value = by_value.get(text, _MISSING)
            if value is _MISSING:
                value = by_value[text] = compute(text)
            out[i] = value
        return out

    def per_answer(self, key: Hashable, compute: Callable[[AnswerKey], Any]) -> dict[int, Any]:
        """``{answer index: compute(answer)}`` for every answer these contexts use (memoised as in
        :meth:`per_text`, by answer index)."""
        by_index = self._bounded(("per_answer", key))
        answers = self.answers
        out: dict[int, Any] = {}
        for i in dict.fromkeys(self.answer_index.tolist()):
            value = by_index.get(i, _MISSING)
            if value is _MISSING:
                value = by_index[i] = compute(answers[i])
            out[i] = value
        return out

    def memo(self, key: Hashable) -> dict[Any, Any]:
        """A dict shared by these columns and every slice of them, for a judge's own cache (e.g. by string); it
        holds at most :data:`MEMO_LIMIT` entries (it is emptied when a new entry would exceed that)."""
        return self._bounded(("memo", key))

    def _bounded(self, key: Hashable) -> dict[Any, Any]:
        memo = self._memo.get(key)
        if memo is None:
            memo = self._memo[key] = _BoundedMemo()
        return memo

    def compact(self) -> ContextColumns:
        """The same contexts over only the answers and texts they use (what is worth shipping to a worker)."""
        answers, answer_index = _used(self.answers, self.answer_index)
        texts, text_index = _used(self.texts, self.text_index)
        return ContextColumns(answers, texts, answer_index, text_index)


class _BoundedMemo(dict[Any, Any]):
    """A dict that empties itself rather than grow past :data:`MEMO_LIMIT` entries."""

    def __setitem__(self, key: Any, value: Any) -> None:
        if len(self) >= MEMO_LIMIT:
            self.clear()
        super().__setitem__(key, value)


def _used(values: Sequence[Any], index: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The values ``index`` refers to, in first-use order, and ``index`` renumbered into them."""
    import numpy as np

    if not len(index):
        return [], index.copy()
    used, first, inverse = np.unique(index, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return [values[i] for i in used[order].tolist()], rank[inverse].astype(np.int64)
