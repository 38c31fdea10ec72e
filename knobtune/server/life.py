"""Servers (PostgreSQL, Cassandra, those a system file describes): one life for all of them, and the hooks through
which each says only what is its own.

Life: ``open`` checks the tools, makes the server's home, lets the subclass
initialise a pristine data folder, starts the server under the default
config, loads the workload's data once, stops it cleanly and keeps that folder
as the pristine copy. A run is given its config: it checks it first
(``check_config``, where the subclass can), restores a copy of the pristine
folder (outside the measured time) and starts the server anew under it, so a
knob the catalog marks restart and one it marks reload both take effect and
neither the server nor its config outlives the run (a config it refuses ends
the start: a REFUSED run with the server's own message; the start-up time is
recorded). It runs the subclass's benchmark while the server's memory is
watched (and, when the subclass samples something while it runs, such as
PostgreSQL's wait events, with its sampler around it, always stopped), then
settles: the server is killed with its work dirty and restarted under the same
config (the time until it answers again is the recovery time), and the
subclass's flush, checkpoint or compaction wait runs; recovery and that wait
count in the run's time. Then the workload's data check, and the server is
stopped. ``close`` kills the server and removes every folder. One run's steps
are one object (``_ServerRun``), which ``run_at`` makes for that run.

The hooks come in two kinds: what runs the server (its tools, pristine folder,
argv, readiness, config check, counters, sampling, settle work) and what the
workload's driver does on it (load the data once, benchmark a rung, check the
data). A hook is given what it needs (the data folder, the run's config); the
running server is ``_server``, the home ``_home``.

Guarantees: the server is knobtune's child, in its own process group, killed
with knobtune and in ``finally`` (``server.process.spawn``); its data lives in
scratch (a home in /tmp named by knobtune's pid when another user runs the
server, reclaimed once that pid is gone); it listens on loopback or a Unix
socket only (each subclass's argv says so); knob values reach it as argv or
files, never through a shell.
"""

from __future__ import annotations

import abc
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knobtune.errors import KnobtuneError
from knobtune.knobs import Value
from knobtune.processes import LeftBehind, left_behind, remove_left_behind
from knobtune.server import loaded
from knobtune.server.memory import MemoryWatch, TreeMemoryWatch
from knobtune.server.process import kill_tree, last_lines, spawn, stop_group
from knobtune.targets import (
    NO_SPACE, FailureKind, Measurement, Phase, RunFailure, Settle, Target, WorkloadFacts, await_server, disk_full,
    nearly_full, no_space_line)
from knobtune.units import human_bytes
from knobtune.workloads import Rung

__all__ = ["Benchmarked", "ServerTarget", "SettleWork", "make_home", "remove_stale_homes", "stale_homes"]

EXIT_WAIT_S = 10.0  # how long a server that left a query unanswered is given to exit before that is the machine's fault


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


class ServerTarget(Target):
    """A server run as knobtune's child: the one life of every server. A subclass sets the class attributes and
    answers the hooks: those that run its server, and those of the workload's driver on it (the module doc)."""

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
    _open_note: str | None = None  # what opening did (a load and its time, or a reused copy)

    # ------------------------------------------------------------ what runs the server

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

    def keep_pristine(self, pristine: Path) -> None:
        """Tidy the pristine folder after the clean stop that made it."""

    def check_config(self, config: Mapping[str, Value]) -> None:
        """Raises RunFailure (REFUSED) when the server would refuse ``config``; by default it says so at start.
        Each run checks its config first, before the data is restored."""

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

    # ------------------------------------------------------------ the workload on it (its driver's)

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

    @abc.abstractmethod
    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        """Run the workload at ``rung`` against the running server. Raises RunFailure."""

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """The workload's data check after the run under ``config`` and its settle. Raises RunFailure (DATA_LOSS)."""

    # ------------------------------------------------------------ life

    def preflight(self) -> None:
        self.check_tools()
        if self.home_prefix is not None:
            _check_room(Path(tempfile.gettempdir()), self.workload.name, self.data_bytes())

    def open(self) -> None:
        if self._home is not None:
            return
        self.check_tools()
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self._home = make_home(self.scratch_dir, self.noun, self.home_prefix, self.server_user)
        logs, pristine = self.scratch_dir / "server", self._home / "pristine"
        _check_room(self._home, self.workload.name, self.data_bytes())
        started = time.monotonic()
        inputs = self.loaded_inputs()
        key = loaded.loaded_key(inputs) if inputs is not None else None
        kept = loaded.find(key) if key is not None else None
        if kept is not None:
            loaded.copy_tree(kept, pristine)
            self.restore_loaded_state(loaded.state_of(kept))
            self._open_note = (f"reused the data loaded by an earlier study ({kept}), copied in "
                               f"{time.monotonic() - started:.1f} s")
            return
        self.init_pristine(pristine, logs)
        self._start(pristine, self.catalog.defaults(), logs / f"load-{self.noun}.log", refusal=False)
        self.load(logs)
        self._stop_server(clean=True)
        self.keep_pristine(pristine)
        load_s = time.monotonic() - started
        where = loaded.keep(key, pristine, self.loaded_state()) if key is not None else None
        self._open_note = f"loaded {self.workload.name}'s data in {load_s:.0f} s" + (
            f" (kept for later studies in {where})" if where else "")

    def open_note(self) -> str | None:
        return self._open_note

    def close(self) -> None:
        with contextlib.suppress(RunFailure):
            self.stop_sampling()
        self._stop_server(clean=False)
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
        shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        """Check ``config`` (``check_config``), restore the data, start the server under it, run, settle, check.

        Raises:
            RunFailure: REFUSED when the server refuses a value (its own message is the reason); else as ``run``.
        """
        if self._home is None:
            raise RunFailure(FailureKind.TOOL, "the target was not opened")
        self.check_config(config)
        server_log = log_path.with_suffix(f".{self.noun}.log")
        try:
            return _ServerRun(self, config, rung, timeout_s, log_path, seed, server_log).measured()
        except RunFailure as failure:  # told apart while the full disk is still full (the copy is removed later)
            said = no_space_line(failure.log_path, log_path, server_log) or (
                failure.reason if NO_SPACE in failure.reason else None)
            if said is None and not nearly_full(self._home):
                raise
            raise disk_full(self._home, said or failure.reason, failure.log_path or log_path) from None

    def _restore(self) -> Path:
        """A fresh copy of the pristine folder (owner and modes kept), outside the measured time.

        Raises:
            RunFailure: (TOOL) the copy failed.
        """
        copy = self._home / "run"  # type: ignore[operator]
        shutil.rmtree(copy, ignore_errors=True)
        try:
            loaded.copy_tree(self._home / "pristine", copy)  # type: ignore[operator]
        except KnobtuneError as exc:
            raise RunFailure(FailureKind.TOOL, f"restoring the data failed: {exc}") from None
        return copy

    # ------------------------------------------------------------ the process

    def _start(self, data: Path, config: Mapping[str, Value], log: Path, refusal: bool = True) -> None:
        """Start the server in the foreground and wait until it answers.

        Raises:
            RunFailure: REFUSED when it exits at start-up under a changed config (``refusal``), else CRASH;
                TIMEOUT when it does not answer within ``ready_limit_s``.
            KnobtuneError: under the default config (the machine or the set-up is at fault).
        """
        argv = self.start_argv(data, config)
        log.parent.mkdir(parents=True, exist_ok=True)
        mark = log.stat().st_size if log.exists() else 0
        self._server = spawn(argv, log_path=log, env=self.start_env(), user=self.server_user)
        await_server(self._server, self.answers, system=self.label, why_exited=lambda: self.why_exited(log, mark),
                     log=log, default_config=self.is_default(config), refusal=refusal, limit_s=self.ready_limit_s,
                     poll_s=self.poll_s)

    def _stop_server(self, clean: bool) -> None:
        """Stop the server: cleanly (``clean_stop``: it checkpoints or flushes, data kept) or as a crash would.

        A crash kills the server and every process of its tree at once (PostgreSQL's children leave its process
        group), so none of them gets to write out what is still in memory.
        """
        if self._server is None:
            return
        if not clean:
            kill_tree(self._server.pid)
        stop_group(self._server, self.clean_stop if clean else signal.SIGKILL, wait_s=self.stop_limit_s)
        self._server = None


@dataclass(frozen=True)
class _ServerRun:
    """One run of a server under a config (``ServerTarget.run_at``, after the config check): the data restored, the
    server started under the config, the benchmark under the memory watch with the target's sampling around it, the
    counters over it, the settle and the data check; the server stopped whatever happens."""

    target: ServerTarget
    config: Mapping[str, Value]
    rung: Rung
    timeout_s: float | None
    log_path: Path
    seed: int
    server_log: Path

    def measured(self) -> Measurement:
        """What the run measured.

        Raises:
            RunFailure: as ``ServerTarget.run_at``; a failure while the server had died on its own is its crash.
        """
        target, log_path = self.target, self.log_path
        data = target._restore()
        try:
            started = time.monotonic()
            target._start(data, self.config, self.server_log, refusal=True)
            start_s = time.monotonic() - started
            before = target.read_counters(log_path.with_suffix(".counters.log"))
            ran, peak, sampled = self._sampled()
            counters = {**target.counters_over_run(before, target.read_counters(log_path.with_suffix(".counters.log"))),
                        **sampled}
            settle = self._settle(data, ran.elapsed_s) if target.settle else None
            target.check_data(self.config, ran, log_path)
        except RunFailure as failure:
            raise self._died(failure) from None
        finally:
            target._stop_server(clean=False)
        elapsed = ran.elapsed_s + (settle.settle_s if settle else 0.0)
        return Measurement(elapsed_s=elapsed, phases=ran.phases, measured=ran.measured, log_path=log_path,
                           verified=ran.verified, settle=settle, peak_rss_bytes=peak, start_s=start_s,
                           counters=counters)

    def _died(self, failure: RunFailure) -> RunFailure:
        """``failure``, or the server's crash when the server had died on its own under the config: a query it could
        not answer, a client cut off or a wait that ran out are then its death, never the machine's fault (seen: a
        Cassandra node out of heap while its counters were read stopped a whole study as a tool failure). A query
        left unanswered gives the server ``EXIT_WAIT_S`` to exit first (``_exited``). A full disk is still told apart
        afterwards (``run_at``)."""
        server = self.target._server
        if server is None or failure.kind not in (FailureKind.TOOL, FailureKind.TIMEOUT, FailureKind.CRASH) \
                or not _exited(server, EXIT_WAIT_S if failure.kind is FailureKind.TOOL else 0.0):
            return failure
        return RunFailure(FailureKind.CRASH, f"the {self.target.noun} died under the config: "
                          f"{self.target.why_died(self.server_log)} (then: {failure.reason})", self.server_log)

    def _sampled(self) -> tuple[Benchmarked, int | None, dict[str, float]]:
        """The watched benchmark with the target's sampling around it, stopped whatever happens; a failure of the
        benchmark wins over one of the sampling."""
        self.target.start_sampling(self.log_path.with_suffix(".samples.log"))
        try:
            ran, peak = self._watched()
        except BaseException:
            with contextlib.suppress(RunFailure):
                self.target.stop_sampling()
            raise
        return ran, peak, self.target.stop_sampling()

    def _watched(self) -> tuple[Benchmarked, int | None]:
        """The benchmark under the memory watch, and the most memory the server used."""
        target = self.target
        watch = target.watch_memory()
        try:
            with watch:
                ran = target.benchmark(self.rung, self.timeout_s, self.log_path, self.seed, self.server_log)
        except RunFailure:
            if not (watch.over and watch.stops_server):
                raise
        if watch.over:
            raise RunFailure(FailureKind.MEMORY, f"the {target.noun} used {human_bytes(watch.peak_bytes or 0)}, over "
                             f"the memory limit of {human_bytes(target.memory_limit_bytes or 0)}", self.server_log)
        return ran, watch.peak_bytes

    def _settle(self, data: Path, workload_s: float) -> Settle:
        """Kill the server with its work dirty, time its recovery under the run's config, then the target's settle
        work: the bill the run left."""
        target = self.target
        dirty = target.dirty_bytes(data)
        target._stop_server(clean=False)
        started = time.monotonic()
        target._start(data, self.config, self.server_log, refusal=False)
        recovery_s = time.monotonic() - started
        limit = None if self.timeout_s is None else max(self.timeout_s - workload_s - recovery_s, 1.0)
        work = target.settle_work(limit, self.log_path)
        return Settle(recovery_s=recovery_s, settle_s=recovery_s + work.flush_s + work.compaction_s,
                      flush_s=work.flush_s, compaction_s=work.compaction_s, files_by_level=(), sst_bytes=0,
                      wal_bytes_at_open=dirty, reshaped=False, log_path=self.server_log)


def _check_room(folder: Path, workload: str, estimate_bytes: int | None) -> None:
    """Raises KnobtuneError when ``folder``'s disk cannot hold the loaded data twice (a loaded copy and a working
    copy, ``estimate_bytes`` each: None, unknown, is not checked) and the WAL a run writes."""
    if estimate_bytes is not None:
        loaded.check_room(folder, 2 * estimate_bytes + (1 << 30), f"{workload}'s data (a loaded copy and a working "
                          f"copy of ~{human_bytes(estimate_bytes)} each, and the WAL a run writes)",
                          "free space there, or point TMPDIR at a larger disk")


def make_home(scratch_dir: Path, noun: str, prefix: str | None, user: str | None) -> Path:
    """A server's home: ``scratch_dir / noun``, or with a ``prefix`` a folder in the temporary folder named by
    knobtune's pid (another user reaches /tmp wherever the studies folder is), owned by ``user``; the homes of that
    prefix a killed knobtune left are removed first."""
    if prefix is None:
        home = scratch_dir / noun
        home.mkdir(parents=True, exist_ok=True)
        return home
    remove_stale_homes(prefix)
    home = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    if user is not None:
        owner = pwd.getpwnam(user)
        shutil.chown(home, owner.pw_uid, owner.pw_gid)
    return home


def stale_homes(prefix: str) -> list[LeftBehind]:
    """Server homes in the temporary folder (``$TMPDIR``, else /tmp) left by a knobtune that is gone."""
    return [found for folder in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*"))
            if (found := left_behind(folder, folder.name.removeprefix(prefix).split("-")[0])) is not None]


def remove_stale_homes(prefix: str) -> int:
    """Server homes left in /tmp by a knobtune that was killed (its pid is gone; their servers died with it)
    removed; the bytes freed."""
    return sum(remove_left_behind(folder, folder.name.removeprefix(prefix).split("-")[0])
               for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"))


def _exited(server: subprocess.Popen[bytes], within_s: float) -> bool:
    """Whether ``server`` has exited, or does within ``within_s`` seconds. A server dying of its own failure cuts its
    clients off before it ends: seen, a Cassandra node out of direct memory reset the counters' query and only then
    logged "Terminating due to java.lang.OutOfMemoryError"; checked at once, it still ran, and its death stopped a
    two-hour study as the machine's failure."""
    try:
        server.wait(timeout=within_s)
    except subprocess.TimeoutExpired:
        return False
    return True
