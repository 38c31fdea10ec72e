"""Embedded key-value stores (RocksDB, LevelDB): one fresh database per run, and the bill it leaves, settled.

Every run builds its database in the target's scratch folder through a driver
(db_bench or kvbench) and ends it as a crash would: no clean close, so
memtables stay unflushed, the WAL stays on disk and pending compaction stays
pending. Then kvbench's settle mode reopens the store (the time until it
answers reads is the recovery time), flushes it and waits until compaction is
done, under a time limit of its own. The run's measured time is the workload's
time plus that settle: a config that only defers its work does not look fast.
``settle=False`` measures the raw window instead.
"""

from __future__ import annotations

import abc
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from knobtune.errors import ToolMissingError
from knobtune.installing import NATIVE_PARTS, setup_fix
from knobtune.knobs import Value
from knobtune.units import human_bytes
from knobtune.targets import (
    FailureKind, Measurement, RunFailure, Settle, Target, disk_full, disk_full_of, is_disk_full, nearly_full,
    no_space_line)
from knobtune.names import existing_ancestor
from knobtune.server.loaded import check_room
from knobtune.server.process import ProcessResult, run_logged
from knobtune.workloads import Rung

PROBE_KEYS = 1000  # point reads after the reopen: "answers reads" means these returned
SETTLE_MIN_LIMIT_S = 60.0  # the settle's limit when the run has none (the default's first runs)
SETTLE_LIMIT_FACTOR = 10.0  # ... or this many times the workload's own time, if larger
CLOSE_GRACE_S = 5.0  # time kvbench may take to close the store after giving up on compaction, at the most:
MIN_CLOSE_GRACE_S = 1.0  # a settle limit shorter than the grace gets its own length, at least this
_NOT_SETTLED = 5  # kvbench's exit status: compaction still pending at its limit


def find_kvbench(program: str = "kvbench", env_var: str = "KNOBTUNE_KVBENCH") -> str:
    """A kvbench binary: ``$env_var``, the checkout's native/build/``program``, or ``program`` on PATH.

    ``kvbench-leveldb-tunable`` (``$KNOBTUNE_KVBENCH_TUNABLE``) is kvbench linked with the patched LevelDB.

    Raises:
        ToolMissingError: it is not built.
    """
    candidates = [os.environ.get(env_var),
                  str(Path(__file__).resolve().parents[2] / "native" / "build" / program), shutil.which(program)]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise ToolMissingError(f"the native driver {program} is not built. {native_fix(program)}")


def native_fix(program: str) -> str:
    """The "Fix: ..." of a native/build program that is not built: the set-up part that builds it."""
    return setup_fix(NATIVE_PARTS.get(program, "tests"), f"it builds native/build/{program}")


class EmbeddedTarget(Target):
    """A target whose run builds a database, runs the workload on it, then settles it (see the module doc)."""

    key_format: str  # how the driver spells record i's key: "kvbench" or "db_bench"
    ticker_counters = False  # RocksDB's drivers, asked: keep its tickers (a cost per operation) for the counters
    _runs = 0  # runs so far: each builds its database in a folder of its own

    def preflight(self) -> None:
        check_room(existing_ancestor(self.scratch_dir), self.workload_facts().data_bytes, f"the workload's data set "
                   f"({self.workload.records:,} records of {self.workload.key_size + self.workload.value_size:,} "
                   "bytes)", "a smaller --records, or --dir on a disk with room")
        if self.settle:
            self.find_settler()

    def open(self) -> None:
        """Check the scratch folder's disk can hold the data set (records x (key + value), before compression);
        find the settler.

        Raises:
            KnobtuneError: not enough free space (one line with both sizes and the fix).
            ToolMissingError: the settler is not built.
        """
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        check_room(self.scratch_dir, self.workload_facts().data_bytes, f"the workload's data set "
                   f"({self.workload.records:,} records of {self.workload.key_size + self.workload.value_size:,} "
                   "bytes)", "a smaller --records, or --dir on a disk with room")
        if self.settle:
            self._settler = self.find_settler()

    def find_settler(self) -> str:
        """The kvbench binary that settles this target's stores (one that opens them under the run's config).

        Raises:
            ToolMissingError: it is not built.
        """
        return find_kvbench()

    def keep_costly_counters(self) -> None:
        self.ticker_counters = True

    def twin(self) -> EmbeddedTarget | None:
        if "twin" not in self.section(self.workload):
            return None
        twin = type(self)(self.catalog, self.workload, self.scratch_dir / "twin", twin=True,  # type: ignore[call-arg]
                          settle=self.settle, memory_limit_bytes=self.memory_limit_bytes, scale_rungs=self.scale_rungs)
        twin.ticker_counters = self.ticker_counters
        return twin

    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        """Run the workload on a fresh store in the scratch folder under ``config``, then settle it under the same.

        Raises:
            RunFailure: the run gave no usable measurement; a run whose disk filled up fails as TOOL (the
                machine's, with the folder, its free space and the fix), whatever the store made of it.
        """
        self._runs += 1
        db_dir = self.scratch_dir / f"db-{self._runs}"
        shutil.rmtree(db_dir, ignore_errors=True)
        try:
            measurement = self.run_workload(config, rung, db_dir, timeout_s=timeout_s, log_path=log_path, seed=seed)
            if self.settle:
                measurement = self._settled(config, measurement, rung, db_dir, timeout_s, log_path, seed)
            return self.checked(measurement, rung, db_dir, log_path)
        except RunFailure as failure:  # told apart while the full disk is still full (before the store is removed)
            said = no_space_line(failure.log_path, log_path, log_path.with_suffix(".settle.log"), db_dir / "LOG")
            if said is None and not nearly_full(self.scratch_dir):
                raise
            raise disk_full(self.scratch_dir, said or failure.reason, failure.log_path or log_path) from None
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            raise disk_full_of(exc, self.scratch_dir, log_path) from None
        finally:
            shutil.rmtree(db_dir, ignore_errors=True)

    @abc.abstractmethod
    def run_workload(self, config: Mapping[str, Value], rung: Rung, db_dir: Path, *, timeout_s: float | None,
                     log_path: Path, seed: int) -> Measurement:
        """Run the workload in ``db_dir`` under ``config`` and leave the store as a crash would (when settling).

        Raises:
            RunFailure: the run gave no usable measurement (REFUSED: the driver cannot take the config).
        """

    def checked(self, measurement: Measurement, rung: Rung, db_dir: Path, log_path: Path) -> Measurement:
        """The run's data check on the store it left (after its settle), outside the measured time: the
        measurement as it stands, or a RunFailure (DATA_LOSS). The drivers check their reads inside the run."""
        return measurement

    @abc.abstractmethod
    def settle_config(self, config: Mapping[str, Value]) -> dict[str, str]:
        """The options kvbench needs to reopen the store the run left under ``config`` (kvbench's spelling)."""

    def check_process(self, result: ProcessResult, rung: Rung, timeout_s: float | None, log_path: Path,
                      what: str = "the run") -> None:
        """Raise the RunFailure for a process stopped at its time or memory limit."""
        if result.over_memory:
            raise RunFailure(FailureKind.MEMORY, f"{what} used {human_bytes(result.peak_rss_bytes)}, over the "
                             f"memory limit of {human_bytes(self.memory_limit_bytes or 0)} (at {rung})", log_path)
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT, f"{what} was stopped after {timeout_s:.1f} s (the limit at {rung})",
                             log_path)

    # ------------------------------------------------------------ settle

    def _settled(self, config: Mapping[str, Value], measurement: Measurement, rung: Rung, db_dir: Path,
                 timeout_s: float | None, log_path: Path, seed: int) -> Measurement:
        """``measurement`` with the settle that follows it counted in; the settle gets what is left of the limit."""
        workload_s = measurement.elapsed_s
        if timeout_s is None:
            limit_s = max(SETTLE_MIN_LIMIT_S, SETTLE_LIMIT_FACTOR * workload_s)
        else:
            limit_s = timeout_s - workload_s
        settle = self.settle_store(config, rung, db_dir, limit_s=limit_s,
                                   log_path=log_path.with_suffix(".settle.log"), seed=seed)
        peak = max(measurement.peak_rss_bytes or 0, settle.peak_rss_bytes)
        return replace(measurement, elapsed_s=workload_s + settle.settle.settle_s, settle=settle.settle,
                       peak_rss_bytes=peak)

    def settle_store(self, config: Mapping[str, Value], rung: Rung, db_dir: Path, *, limit_s: float, log_path: Path,
                     seed: int) -> SettleRun:
        """Reopen the store in ``db_dir`` as after a crash under ``config``, flush it and wait for its compaction,
        within ``limit_s``.

        Raises:
            RunFailure: TIMEOUT when it does not settle within the limit (with
                what was still pending), MEMORY over the memory limit, CRASH or
                DATA_LOSS when the store cannot come back, TOOL for our failures.
        """
        if limit_s <= 0:
            raise RunFailure(FailureKind.TIMEOUT, f"no time left to settle the store within the limit at {rung}",
                             log_path)
        spec_path, result_path = log_path.with_suffix(".spec.json"), log_path.with_suffix(".result.json")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        spec_path.write_text(json.dumps({
            "key_size": self.workload.key_size, "key_format": self.key_format, "record_count": rung.records,
            "probe_keys": PROBE_KEYS, "seed": seed, "compaction_limit_s": limit_s,
            "config": self.settle_config(config)}))
        result_path.unlink(missing_ok=True)
        argv = [self._settler, "--engine", self.system, "--db", str(db_dir), "--settle", str(spec_path),
                "--result", str(result_path)]
        stop_s = limit_s + min(CLOSE_GRACE_S, max(MIN_CLOSE_GRACE_S, limit_s))  # a small rung's 1 s limit: 2 s, not 6
        process = run_logged(argv, log_path=log_path, timeout_s=stop_s, memory_limit_bytes=self.memory_limit_bytes)
        if process.timed_out:
            raise RunFailure(FailureKind.TIMEOUT,
                             f"the store did not settle within {limit_s:.1f} s: the settle (reopen, "
                             f"flush, compaction) was stopped after {stop_s:.1f} s", log_path)
        self.check_process(process, rung, stop_s, log_path, what="the settle (reopen, flush, compaction)")
        report = read_result(result_path)
        if report is not None and report.get("engine_errors"):  # it stopped compacting after an error of its own
            abandoned = report.get("left_behind") or []
            left = f" and left {', '.join(abandoned)} in no level" if abandoned else ""
            raise RunFailure(FailureKind.TOOL, f"{self.system} reported an error while the store settled{left}: "
                             f"{report['engine_errors'][0].strip()[:300]} (not the config's failure)", log_path,
                             fix=f"look at the disk and at {log_path}")
        if report is not None and (process.returncode == _NOT_SETTLED or report.get("settle_s", 0) > limit_s):
            pending = report.get("reason") or "it took " + f"{report.get('settle_s', 0):.1f} s"
            raise RunFailure(FailureKind.TIMEOUT, f"the store did not settle within {limit_s:.1f} s: {pending}",
                             log_path)
        if process.returncode != 0 or report is None:
            raise RunFailure(*_settle_failure(process.returncode, log_path), log_path)
        settle = Settle(recovery_s=report["recovery_s"], settle_s=report["settle_s"], flush_s=report["flush_s"],
                        compaction_s=report["compaction_s"], files_by_level=tuple(report["files_by_level"]),
                        sst_bytes=report["sst_bytes"], wal_bytes_at_open=report["wal_bytes_at_open"],
                        reshaped=bool(report.get("reshaped")), log_path=log_path)
        return SettleRun(settle, process.peak_rss_bytes)


@dataclass(frozen=True)
class SettleRun:
    settle: Settle
    peak_rss_bytes: int


def read_result(path: Path) -> dict[str, Any] | None:
    """A JSON result file kvbench wrote, or None when the process ended before writing all of it."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _settle_failure(returncode: int, log_path: Path) -> tuple[FailureKind, str]:
    """Why the settle gave no result. Reopening a store the workload wrote is never the config's refusal."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    message = (lines[-1] if lines else f"exit status {returncode}")[-400:]
    if returncode < 0:
        return FailureKind.CRASH, f"the store died while settling (signal {-returncode}): {message}"
    if returncode == 4:
        return FailureKind.CRASH, f"the store failed while settling: {message}"
    if "Corruption" in text:
        return FailureKind.DATA_LOSS, f"the store could not be reopened after the run (as after a crash): {message}"
    return FailureKind.TOOL, f"settling the store failed (kvbench status {returncode}): {message}"
