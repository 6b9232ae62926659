"""Progress on a terminal; silent when output is not a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class terminal_progress:  # noqa: N801 - used like a function
    """A progress callback ``(stage, done, total)`` that redraws one line on stderr when it is a terminal."""

    def __init__(self, stream: TextIO | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.min_interval = min_interval
        self._last = 0.0
        self._drawn = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < self.min_interval:
            return
        self._last = now
        width = 30
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r{stage:<9} [{bar}] {done}/{total}")
        self.stream.flush()
        self._drawn = True
        if done >= total:
            self.stream.write("\n")
            self._drawn = False

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
