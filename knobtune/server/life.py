"""Servers (PostgreSQL, Cassandra): one life for all of them; a subclass says only what is its own.

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
stopped. ``close`` kills the server and removes every folder. What each server
says of itself (the hooks) is ``hooks.py``.

Guarantees: the server is knobtune's child, in its own process group, killed
with knobtune and in ``finally`` (``server.process.spawn``); its data lives in
scratch (a home in /tmp named by knobtune's pid when another user runs the
server, reclaimed once that pid is gone); it listens on loopback or a Unix
socket only (each subclass's argv says so); knob values reach it as argv or
files, never through a shell.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import KnobtuneError
from knobtune.knobs import Catalog, Value
from knobtune.units import human_bytes
from knobtune.processes import LeftBehind, left_behind, remove_left_behind
from knobtune.server import loaded
from knobtune.server.hooks import Benchmarked, ServerHooks, SettleWork
from knobtune.server.process import kill_tree, spawn, stop_group
from knobtune.targets import (
    NO_SPACE, FailureKind, Measurement, RunFailure, Settle, await_server, disk_full, nearly_full, no_space_line)
from knobtune.workloads import Rung, Workload

__all__ = ["Benchmarked", "ServerTarget", "SettleWork", "remove_stale_homes", "stale_homes"]


class ServerTarget(ServerHooks):
    """A server run as knobtune's child: the one life of every server. Subclasses set the class attributes and
    implement the hooks (``hooks.ServerHooks``)."""

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, settle: bool = True,
                 memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        self._open_note: str | None = None

    # ------------------------------------------------------------ life

    def preflight(self) -> None:
        self.check_tools()
        if self.home_prefix is not None and (estimate := self.data_bytes()) is not None:
            loaded.check_room(Path(tempfile.gettempdir()), 2 * estimate + (1 << 30), f"{self.workload.name}'s data "
                              f"(a loaded copy and a working copy of ~{human_bytes(estimate)} each, and the WAL a "
                              "run writes)", "free space there, or point TMPDIR at a larger disk")

    def open(self) -> None:
        if self._home is not None:
            return
        self.check_tools()
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self._home = self._make_home()
        logs, pristine = self.scratch_dir / "server", self._home / "pristine"
        if (estimate := self.data_bytes()) is not None:
            loaded.check_room(self._home, 2 * estimate + (1 << 30), f"{self.workload.name}'s data (a loaded copy "
                              f"and a working copy of ~{human_bytes(estimate)} each, and the WAL a run writes)",
                              "free space there, or point TMPDIR at a larger disk")
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
            return self._run(config, rung, timeout_s, log_path, seed, server_log)
        except RunFailure as failure:  # told apart while the full disk is still full (the copy is removed later)
            said = no_space_line(failure.log_path, log_path, server_log) or (
                failure.reason if NO_SPACE in failure.reason else None)
            if said is None and not nearly_full(self._home):
                raise
            raise disk_full(self._home, said or failure.reason, failure.log_path or log_path) from None

    def _run(self, config: Mapping[str, Value], rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
             server_log: Path) -> Measurement:
        data = self._restore()
        try:
            started = time.monotonic()
            self._start(data, config, server_log, refusal=True)
            start_s = time.monotonic() - started
            before = self.read_counters(log_path.with_suffix(".counters.log"))
            ran, peak, sampled = self._sampled(rung, timeout_s, log_path, seed, server_log)
            counters = {**self.counters_over_run(before, self.read_counters(log_path.with_suffix(".counters.log"))),
                        **sampled}
            settle = self._settle(data, config, server_log, log_path, timeout_s, ran.elapsed_s) if self.settle else None
            self.check_data(config, ran, log_path)
        except RunFailure as failure:
            raise self._died(failure, server_log) from None
        finally:
            self._stop_server(clean=False)
        elapsed = ran.elapsed_s + (settle.settle_s if settle else 0.0)
        return Measurement(elapsed_s=elapsed, phases=ran.phases, measured=ran.measured, log_path=log_path,
                           verified=ran.verified, settle=settle, peak_rss_bytes=peak, start_s=start_s,
                           counters=counters)

    def _died(self, failure: RunFailure, server_log: Path) -> RunFailure:
        """``failure``, or the server's crash when the server had died on its own under the config: a query it could
        not answer, a client cut off or a wait that ran out are then its death, never the machine's fault (seen: a
        Cassandra node out of heap while its counters were read stopped a whole study as a tool failure). A full
        disk is still told apart afterwards (``run``)."""
        died = self._server is not None and self._server.poll() is not None
        if not died or failure.kind not in (FailureKind.TOOL, FailureKind.TIMEOUT, FailureKind.CRASH):
            return failure
        return RunFailure(FailureKind.CRASH, f"the {self.noun} died under the config: {self.why_died(server_log)} "
                          f"(then: {failure.reason})", server_log)

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

    def _sampled(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                 server_log: Path) -> tuple[Benchmarked, int | None, dict[str, float]]:
        """The watched benchmark with the subclass's sampling around it, stopped whatever happens; a failure of the
        benchmark wins over one of the sampling."""
        self.start_sampling(log_path.with_suffix(".samples.log"))
        try:
            ran, peak = self._watched(rung, timeout_s, log_path, seed, server_log)
        except BaseException:
            with contextlib.suppress(RunFailure):
                self.stop_sampling()
            raise
        return ran, peak, self.stop_sampling()

    def _watched(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                 server_log: Path) -> tuple[Benchmarked, int | None]:
        """The benchmark under the memory watch, and the most memory the server used."""
        watch = self.watch_memory()
        try:
            with watch:
                ran = self.benchmark(rung, timeout_s, log_path, seed, server_log)
        except RunFailure:
            if not (watch.over and watch.stops_server):
                raise
        if watch.over:
            raise RunFailure(FailureKind.MEMORY, f"the {self.noun} used {human_bytes(watch.peak_bytes or 0)}, over the "
                             f"memory limit of {human_bytes(self.memory_limit_bytes or 0)}", server_log)
        return ran, watch.peak_bytes

    def _settle(self, data: Path, config: Mapping[str, Value], server_log: Path, log_path: Path,
                timeout_s: float | None, workload_s: float) -> Settle:
        """Kill the server with its work dirty, time its recovery under ``config`` (the run's), then the subclass's
        settle: the bill the run left."""
        dirty = self.dirty_bytes(data)
        self._stop_server(clean=False)
        started = time.monotonic()
        self._start(data, config, server_log, refusal=False)
        recovery_s = time.monotonic() - started
        limit = None if timeout_s is None else max(timeout_s - workload_s - recovery_s, 1.0)
        work = self.settle_work(limit, log_path)
        return Settle(recovery_s=recovery_s, settle_s=recovery_s + work.flush_s + work.compaction_s,
                      flush_s=work.flush_s, compaction_s=work.compaction_s, files_by_level=(), sst_bytes=0,
                      wal_bytes_at_open=dirty, reshaped=False, log_path=server_log)

    # ------------------------------------------------------------ the process

    def _make_home(self) -> Path:
        if self.home_prefix is None:
            home = self.scratch_dir / self.noun
            home.mkdir(parents=True, exist_ok=True)
            return home
        remove_stale_homes(self.home_prefix)
        home = Path(tempfile.mkdtemp(prefix=f"{self.home_prefix}{os.getpid()}-"))  # another user reaches /tmp
        if self.server_user is not None:
            user = pwd.getpwnam(self.server_user)
            shutil.chown(home, user.pw_uid, user.pw_gid)
        return home

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


def stale_homes(prefix: str) -> list[LeftBehind]:
    """Server homes in the temporary folder (``$TMPDIR``, else /tmp) left by a knobtune that is gone."""
    return [found for folder in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*"))
            if (found := left_behind(folder, folder.name.removeprefix(prefix).split("-")[0])) is not None]


def remove_stale_homes(prefix: str) -> int:
    """Server homes left in /tmp by a knobtune that was killed (its pid is gone; their servers died with it)
    removed; the bytes freed."""
    return sum(remove_left_behind(folder, folder.name.removeprefix(prefix).split("-")[0])
               for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"))
