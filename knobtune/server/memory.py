"""How a server's memory is watched during a run: the peak it used, and whether it went over the limit."""

from __future__ import annotations

import abc
import subprocess
import threading
from pathlib import Path
from typing import Any

from knobtune.server.process import stop_group, tree_pss_bytes


class MemoryWatch(abc.ABC):
    """Watches a server's memory during a benchmark: ``peak_bytes`` used, ``over`` the limit."""

    stops_server = False  # whether going over stops the server (its benchmark then fails: the memory is why)

    def __init__(self, server: subprocess.Popen[bytes], limit_bytes: int | None) -> None:
        self.server, self.limit_bytes = server, limit_bytes
        self.peak_bytes: int | None = None
        self.over = False

    def __enter__(self) -> MemoryWatch:
        return self

    @abc.abstractmethod
    def __exit__(self, *exc: Any) -> None: ...


class TreeMemoryWatch(MemoryWatch):
    """Samples the memory of the server's processes (PSS, shared memory counted once) every 50 ms; stops the server
    once it holds more than the limit."""

    stops_server = True

    def __init__(self, server: subprocess.Popen[bytes], limit_bytes: int | None) -> None:
        super().__init__(server, limit_bytes)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeMemoryWatch:
        self.peak_bytes = tree_pss_bytes(self.server.pid)  # the server before the run: a short run may end first
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            self.peak_bytes = max(self.peak_bytes or 0, tree_pss_bytes(self.server.pid))
            if self.limit_bytes is not None and self.peak_bytes > self.limit_bytes:
                self.over = True
                stop_group(self.server)  # the benchmark then fails on its lost connections
                return


class HighWaterMemoryWatch(MemoryWatch):
    """Reads the server process's own peak resident memory (VmHWM) once the benchmark ends; over the limit is a
    MEMORY failure then (the server is not stopped early)."""

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            return
        try:
            for line in Path(f"/proc/{self.server.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.peak_bytes = int(line.split()[1]) * 1024
        except OSError:
            return
        self.over = self.limit_bytes is not None and self.peak_bytes is not None and self.peak_bytes > self.limit_bytes
