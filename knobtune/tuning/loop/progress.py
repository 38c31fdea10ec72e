"""What a study tells a progress display while it runs: one event per finished run, trial or note."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One event for a progress display."""

    kind: str  # "rung" (a run finished), "trial" (a trial ended), "note" (anything else worth saying)
    message: str
    trial: int | None = None
    rung: int | None = None
    value: float | None = None
    best: float | None = None
    elapsed_s: float = 0.0
    time_left_s: float | None = None


class Reporter:
    """Sends Progress events, each with the best value so far, the time since the study began and the time left."""

    def __init__(self, on_progress: Callable[[Progress], None] | None,
                 time_left_s: Callable[[], float | None] = lambda: None) -> None:
        self._emit = on_progress or (lambda event: None)
        self._started = time.monotonic()
        self.time_left_s = time_left_s  # set by the study once its budget exists
        self.best: float | None = None  # the best feasible full-size value so far, in the study's units

    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def note(self, message: str) -> None:
        self._send("note", message)

    def rung(self, message: str, trial: int, rung: int, value: float) -> None:
        self._send("rung", message, trial, rung, value)

    def trial(self, message: str, trial: int, value: float | None) -> None:
        self._send("trial", message, trial, None, value)

    def _send(self, kind: str, message: str, trial: int | None = None, rung: int | None = None,
              value: float | None = None) -> None:
        self._emit(Progress(kind, message, trial, rung, value, self.best, self.elapsed_s(), self.time_left_s()))
