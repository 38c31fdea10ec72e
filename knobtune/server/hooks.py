"""What a server says of itself to the one server life (``life.ServerTarget``): its class attributes and hooks.

``ServerTarget`` owns the life (the pristine copy, a restore before every run,
the start, the wait, the settle, the stop); a server's own module subclasses
it and answers the hooks here: how to start it, whether it answers, how to
load the workload's data, the benchmark, its counters, its settle work and
its data check. A hook is given what it needs (the data folder, the run's
config); the running server is ``_server``, the home ``_home``.
"""

from __future__ import annotations

import abc
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knobtune.knobs import Value
from knobtune.server.memory import MemoryWatch, TreeMemoryWatch
from knobtune.server.process import last_lines
from knobtune.targets import Phase, Target, WorkloadFacts
from knobtune.workloads import Rung


@dataclass(frozen=True)
class Benchmarked:
    """What a server's benchmark measured, before the settle: its phases and its own elapsed time."""

    phases: tuple[Phase, ...]
    measured: tuple[str, ...]  # the phases the objective counts
    elapsed_s: float
    verified: bool  # the workload's reads (or its data check) prove what it wrote


@dataclass(frozen=True)
class SettleWork:
    """What the server's own settle took after its recovery: a flush or checkpoint, and compaction."""

    flush_s: float
    compaction_s: float


class ServerHooks(Target):
    """What each server says: the class attributes and the hooks ``ServerTarget``'s life calls."""

    label: str  # how messages name the system: "PostgreSQL"
    noun: str = "server"  # how messages and logs name one process of it: "server", "node"
    server_user: str | None = None  # the system user the server runs as (None: knobtune's own)
    home_prefix: str | None = None  # a home in /tmp named "{prefix}{pid}-..."; None: scratch_dir / noun
    ready_limit_s: float = 120.0  # start-up (or crash recovery) may take this long before the run fails
    poll_s: float = 0.02
    clean_stop: int = signal.SIGTERM  # the signal of a clean stop (it checkpoints or flushes)
    stop_limit_s: float = 30.0  # a clean stop may take this long before the server is killed
    _home: Path | None = None  # the server's home (pristine copy, the run's copy), once opened
    _server: subprocess.Popen[bytes] | None = None  # the server started last, while it runs

    @abc.abstractmethod
    def check_tools(self) -> None:
        """Raises ToolMissingError naming what to install when a program the server needs is missing."""

    def init_pristine(self, pristine: Path, logs: Path) -> None:
        """Make the pristine data folder the server starts from (PostgreSQL: initdb). Raises KnobtuneError."""
        pristine.mkdir(parents=True, exist_ok=True)

    @abc.abstractmethod
    def start_argv(self, data: Path, config: Mapping[str, Value]) -> list[str]:
        """The server's command line in the foreground over ``data`` under ``config`` (may write files it reads)."""

    def start_env(self) -> dict[str, str] | None:
        """The server's environment (None: knobtune's)."""
        return None

    @abc.abstractmethod
    def answers(self) -> bool:
        """Whether the server just started answers its clients."""

    def why_exited(self, log: Path, mark: int) -> str:
        """Why the server stopped at start-up, from its log after offset ``mark``."""
        with open(log, "rb") as handle:
            handle.seek(mark)
            return last_lines(handle.read().decode(errors="replace"))

    def why_died(self, log: Path) -> str:
        """Why the server died while it ran (an out-of-memory error, say), from its log ``log``."""
        return last_lines(log.read_text(errors="replace"))

    def is_default(self, config: Mapping[str, Value]) -> bool:
        """Whether ``config`` starts the server as its defaults do (a start failing then is the machine's fault)."""
        return not self.catalog.changed(config)

    @abc.abstractmethod
    def load(self, logs: Path) -> None:
        """Load the workload's data into the running server, once. Raises KnobtuneError or RunFailure (TOOL)."""

    def loaded_inputs(self) -> Mapping[str, object] | None:
        """Everything the loaded data depends on (system version, loader, its inputs): a later study with the same
        reuses the copy kept for it (``server.loaded``). None: never reused."""
        return None

    def loaded_state(self) -> dict[str, object]:
        """What the load left besides the data that later runs need (kept beside the copy)."""
        return {}

    def restore_loaded_state(self, state: Mapping[str, object]) -> None:
        """Take back what ``loaded_state`` kept, when a kept copy is reused."""

    def data_bytes(self) -> int | None:
        """About how large the loaded data will be (for the free-space check before loading); None: unknown."""
        return None

    def workload_facts(self) -> WorkloadFacts:
        """The workload file's facts with the loaded data's size (``data_bytes``), where the server can say."""
        return WorkloadFacts.of(self.workload, data_bytes=self.data_bytes() or None)

    def keep_pristine(self, pristine: Path) -> None:
        """Tidy the pristine folder after the clean stop that made it."""

    def check_config(self, config: Mapping[str, Value]) -> None:
        """Raises RunFailure (REFUSED) when the server would refuse ``config``; by default it says so at start.
        Each run checks its config first, before the data is restored."""

    @abc.abstractmethod
    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        """Run the workload at ``rung`` against the running server. Raises RunFailure."""

    def watch_memory(self) -> MemoryWatch:
        """How the server's memory is watched during the benchmark (by default: its process tree, stopped over the
        limit)."""
        return TreeMemoryWatch(self._server, self.memory_limit_bytes)  # type: ignore[arg-type]

    def read_counters(self, log: Path) -> dict[str, float]:
        """The server's own cumulative counters now (read before and after the benchmark; the run's are the
        differences). None by default."""
        return {}

    def counters_over_run(self, before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
        """The run's counters from the readings before and after it."""
        return {name: after[name] - before.get(name, 0.0) for name in after}

    def start_sampling(self, log: Path) -> None:
        """Start watching the server while the benchmark runs (PostgreSQL: its wait events), output into ``log``.
        Nothing by default."""

    def stop_sampling(self) -> dict[str, float]:
        """Stop what ``start_sampling`` started and return its counters over the run. Idempotent; called in
        ``finally`` and by ``close``, so nothing it started outlives the run.

        Raises:
            RunFailure: (TOOL) the sampling failed while the run went well.
        """
        return {}

    def dirty_bytes(self, data: Path) -> int:
        """The write-ahead log the settle's restart replays (its size before the kill)."""
        return 0

    @abc.abstractmethod
    def settle_work(self, limit_s: float | None, log_path: Path) -> SettleWork:
        """After the recovery, flush, checkpoint or wait for compaction. Raises RunFailure (TIMEOUT at the limit)."""

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """The workload's data check after the run under ``config`` and its settle. Raises RunFailure (DATA_LOSS)."""
