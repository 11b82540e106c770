"""A progress bar on stderr for long runs, only when stderr is a terminal (never in CI logs
or pipes, whose output stays quiet and parseable)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

MIN_TOTAL = 500  # shorter runs finish before a bar would help
_WIDTH = 30


class Progress:
    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.label, self.done = total, label, 0
        if enabled is None:
            enabled = total >= MIN_TOTAL and getattr(self.stream, "isatty", lambda: False)()
        self.enabled = enabled
        self._start = time.monotonic()
        self._drawn = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.1 or self.done >= self.total):
            self._drawn = now
            self.stream.write("\r" + self.line(now - self._start))
            self.stream.flush()

    def line(self, elapsed: float) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = int(fraction * _WIDTH)
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = f"ETA {(self.total - self.done) / rate:.0f}s" if rate and self.done < self.total else f"{elapsed:.1f}s"
        return (f"{self.label} {self.done:>{len(str(self.total))}}/{self.total} "
                f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {fraction:4.0%}  {rate:,.0f}/s  {eta}")

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")  # erase the bar: the results follow
            self.stream.flush()
