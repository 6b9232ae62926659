"""Progress on a terminal; silent when output is not a terminal (pipes, files, CI logs)."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class terminal_progress:  # noqa: N801 - used like a function
    """A progress callback ``(stage, done, total)`` that redraws one line on stderr when it is a terminal.

    The line shows the stage, a bar, ``done/total``, the percentage, the rate and the time left; redraws are
    throttled to one per ``min_interval`` seconds (the last one of a stage is always drawn). When the stream is
    not a terminal nothing is ever written.
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
        self._drawn = False
        self._stage: str | None = None
        self._started = 0.0

    def line(self, stage: str, done: int, total: int, elapsed: float, width: int = 80) -> str:
        """The text drawn for one update (without the carriage return)."""
        fraction = min(1.0, done / total) if total else 1.0
        rate = done / elapsed if elapsed > 0 else 0.0
        if done >= total:
            timing = f"{_duration(elapsed)}"
        elif rate > 0:
            timing = f"{_duration(elapsed)}<{_duration((total - done) / rate)}"
        else:
            timing = _duration(elapsed)
        tail = f" {done}/{total} {fraction * 100:3.0f}% {rate:,.1f}/s {timing}"
        head = f"{stage:<9} "
        bar_width = max(10, min(40, width - len(head) - len(tail) - 3))
        filled = int(bar_width * fraction)
        return f"{head}[{'#' * filled}{'-' * (bar_width - filled)}]{tail}"

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if stage != self._stage:
            if self._drawn:
                self.stream.write("\n")
                self._drawn = False
            self._stage, self._started, self._last = stage, now, 0.0
        if done < total and now - self._last < self.min_interval:
            return
        self._last = now
        width = shutil.get_terminal_size((80, 24)).columns
        # \x1b[K clears what a longer previous line left behind
        self.stream.write("\r" + self.line(stage, done, total, now - self._started, width) + "\x1b[K")
        self._drawn = True
        if done >= total:
            self.stream.write("\n")
            self._drawn = False
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
