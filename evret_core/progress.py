"""Progress on a terminal; silent when output is not a terminal (pipes, files, CI logs).

The protocol every long step uses is a callback ``progress(stage, done, total)``:

- ``progress(stage, 0, total)`` *starts* the stage: its clock starts then and its bar is drawn at
  ``0/total`` (no rate yet). Call it before the stage's first piece of work, so that work done before the first
  item finishes (a judge's ``prepare()`` encoding every text, the first LLM call) is timed and shows as a bar
  that waits, not as a jump from 0 to 100% in 00:00. A stage that never gets this call starts at its first call.
- ``progress(stage, done, total)`` with ``0 < done`` reports ``done`` items finished out of ``total``; ``done``
  only grows within a stage, and the stage ends when ``done >= total``.
- Stages that run at the same time (the RAG pipeline judges each answer while others are still being generated)
  are each reported under their own name; :class:`terminal_progress` then draws one line per stage.

:func:`report_progress` calls an optional callback, so code that may have none needs no ``if`` at each step.
Code deep under a command (reading a results file, writing one) that takes no callback argument reports to
:func:`current_progress`, the callback a command installs around its work with :func:`progress_scope`. Steps that
are usually quick (reading and writing files, the metrics, the statistics, a report's parts) go through
:class:`after_a_while`, so they show a bar only when they take more than a second.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TextIO, TypeVar

_T = TypeVar("_T")

ProgressCallback = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; ``done == 0`` starts the stage (see the module)."""


def report_progress(progress: ProgressCallback | None, stage: str, done: int, total: int) -> None:
    """``progress(stage, done, total)`` when there is a callback."""
    if progress is not None:
        progress(stage, done, total)


STAGE_DELAY = 1.0
"""Seconds a step runs before :class:`after_a_while` shows it."""


class after_a_while:  # noqa: N801 - used like a function
    """A progress callback that passes a stage on to ``progress`` only once it has run ``seconds`` (default
    :data:`STAGE_DELAY`): a step that takes a moment shows nothing, a long one (reading a 500 MB results file,
    writing one, the metrics of 200,000 queries) shows its bar from then on, started at 0 as usual. ``progress``
    None: nothing is ever passed on."""

    def __init__(self, progress: ProgressCallback | None, seconds: float | None = None) -> None:
        self.progress = progress
        self.seconds = STAGE_DELAY if seconds is None else seconds
        self._started: dict[str, tuple[float, int]] = {}  # stage -> (first call, last done), while held back
        self._shown: dict[str, int] = {}  # stage -> last done, once passed on

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        if stage in self._shown:
            if done >= self._shown[stage] and not (done == 0 and self._shown[stage] >= total):
                self._shown[stage] = done
                self.progress(stage, done, total)
                return
            del self._shown[stage]  # the stage started again: held back again
        now = time.monotonic()
        first, last = self._started.get(stage, (now, done))
        if done < last:
            first = now
        if done >= total:
            self._started.pop(stage, None)  # over before it was worth a line
            return
        self._started[stage] = (first, done)
        if now - first >= self.seconds:
            del self._started[stage]
            self._shown[stage] = done
            self.progress(stage, 0, total)
            backdate = getattr(self.progress, "backdate", None)
            if callable(backdate):  # the bar's clock (elapsed, rate, time left) from the stage's real start
                backdate(stage, now - first)
            if done:
                self.progress(stage, done, total)


_current: ContextVar[ProgressCallback | None] = ContextVar("evret_progress", default=None)


@contextmanager
def progress_scope(progress: ProgressCallback | None) -> Iterator[None]:
    """While the block runs, :func:`current_progress` (in this thread or task) is ``progress``: a command wraps its
    work in it so that what reads or writes its files shows progress without a callback on every signature."""
    token = _current.set(progress)
    try:
        yield
    finally:
        _current.reset(token)


def current_progress() -> ProgressCallback | None:
    """The callback of the innermost :func:`progress_scope`, or None."""
    return _current.get()


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


@dataclass
class _Stage:
    done: int
    total: int
    started: float
    finished: float | None = None


class terminal_progress:  # noqa: N801 - used like a function
    """A progress callback ``(stage, done, total)`` that draws live bars on stderr when it is a terminal.

    Each line shows the stage, a bar, ``done/total``, the percentage, the rate and the time left (rate and time
    left only once something is done). Stages that overlap in time get one line each, redrawn in place; a line
    stays on screen when its stage ends. Redraws are throttled to one per ``min_interval`` seconds (a stage's
    start and end are always drawn). When the stream is not a terminal nothing is ever written.
    """

    def __init__(self, stream: TextIO | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        try:
            self.enabled = bool(isatty()) if callable(isatty) else False
        except (ValueError, OSError):  # a closed stream is not a terminal
            self.enabled = False
        self.min_interval = min_interval
        self._last = 0.0
        self._block: dict[str, _Stage] = {}  # the stages whose lines are drawn in place, in order
        self._lines = 0  # how many of those lines are on screen (the cursor is at the end of the last)

    def line(self, stage: str, done: int, total: int, elapsed: float, width: int = 80) -> str:
        """The text drawn for one update (without the carriage return)."""
        fraction = min(1.0, done / total) if total > 0 else 1.0
        rate = done / elapsed if elapsed > 0 and done > 0 else None
        if done >= total:
            timing = _duration(elapsed)
        elif rate:
            timing = f"{_duration(elapsed)}<{_duration((total - done) / rate)}"
        else:
            timing = _duration(elapsed)
        speed = f"{rate:,.1f}/s" if rate else "--/s"
        tail = f" {done}/{total} {fraction * 100:3.0f}% {speed} {timing}"
        head = f"{stage:<9} "
        bar_width = max(10, min(40, width - len(head) - len(tail) - 3))
        filled = int(bar_width * fraction)
        return f"{head}[{'#' * filled}{'-' * (bar_width - filled)}]{tail}"

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        state = self._block.get(stage)
        forced = False
        if state is None or done < state.done or (done == 0 and state.finished is not None):
            # a new stage, or this one started again
            if state is None and self._block and all(s.finished is not None for s in self._block.values()):
                self._end_block()
            state = self._block[stage] = _Stage(done, total, now)
            forced = True
        elif state.finished is not None:
            return  # already drawn as finished
        state.done, state.total = done, total
        if done >= total:
            state.finished = now
            forced = True
        if not forced and now - self._last < self.min_interval:
            return
        self._last = now
        self._draw(now)
        if all(s.finished is not None for s in self._block.values()):
            self._end_block()

    def backdate(self, stage: str, seconds: float) -> None:
        """Start ``stage``'s clock ``seconds`` earlier (a stage shown late by :class:`after_a_while`)."""
        state = self._block.get(stage)
        if state is not None and state.finished is None:
            state.started -= seconds

    def _draw(self, now: float) -> None:
        width = shutil.get_terminal_size((80, 24)).columns
        out = ["\r"]
        if self._lines > 1:
            out.append(f"\x1b[{self._lines - 1}A")  # back to the block's first line
        # cut to the terminal's width: a wrapped line would break the cursor-up count of the next redraw
        texts = [self.line(name, s.done, s.total, (s.finished or now) - s.started, width)[: max(1, width - 1)]
                 for name, s in self._block.items()]
        # \x1b[K clears what a longer previous line left behind
        out.append("\n".join(text + "\x1b[K" for text in texts))
        self.stream.write("".join(out))
        self.stream.flush()
        self._lines = len(texts)

    def _end_block(self) -> None:
        if self._lines:
            self.stream.write("\n")
            self.stream.flush()
        self._block = {}
        self._lines = 0

    def close(self) -> None:
        """End the drawing (a newline after the last line when one is on screen)."""
        if self.enabled:
            self._end_block()


def with_terminal_progress(work: Callable[[], _T]) -> _T:
    """``work()`` with a progress line on the terminal (and nowhere else) for each step that takes more than a
    second: what a command that reads and writes files wraps its work in."""
    progress = terminal_progress()
    try:
        with progress_scope(after_a_while(progress)):
            return work()
    finally:
        progress.close()


@contextmanager
def quiet_model_loading() -> Iterator[None]:
    """No third-party progress bar while a model or a store loads: transformers draws a "Loading weights" bar on
    stderr, which would break Evret's own progress line. Only transformers' bars are hushed (through its tqdm
    hook, or by switching them off for the load on releases without one), and only inside the block; the previous
    setting is put back. Without transformers installed it does nothing."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    set_hook = getattr(hf_logging, "set_tqdm_hook", None)
    if set_hook is None:  # older transformers: switch its bars off for the load, then back on if they were
        was_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            yield
        finally:
            if was_on:
                hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        return
    previous = set_hook(lambda factory, args, kwargs: hf_logging.EmptyTqdm(*args, **kwargs))  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        set_hook(previous)
