"""What every target gives: a Measurement per run, or a RunFailure saying what went wrong.

A target runs one system under a config, rung after rung, in a scratch
directory of its own, and may outlive many trials (a server loads its data
once). Its life: ``open`` (check the tools; a server also initialises, loads
the workload's data once, starts under the default and waits until it
answers), ``run(config, rung)`` the workload at one rung from the loaded state
under that config (a config the system refuses is a RunFailure, never an error
of the study), ``close`` (idempotent; always runs). It is a context manager:
``open`` on enter, ``close`` on exit.

A run is whole in itself: the config comes with it, and nothing of it waits in
the target for the next run. Where the study runs small rungs scaled
(``scale_rungs``, told once when the target is made), ``run`` scales the
config to the rung's share of the data (``Catalog.at_fraction``) before the
system sees it: once per run, in one place.
"""

from __future__ import annotations

import abc
import enum
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from knobtune.errors import KnobtuneError
from knobtune.knobs import Catalog, Value
from knobtune.targets._facts import WorkloadFacts
from knobtune.targets._formats import ExportFormat
from knobtune.workloads import Objective, Rung, Workload


class FailureKind(enum.StrEnum):
    """Why a run produced no measurement. Only TOOL is knobtune's or the machine's fault."""

    REFUSED = "refused"  # the system rejected the config
    TIMEOUT = "timeout"  # slower than the limit (a multiple of the default's time)
    CRASH = "crash"  # the system died under the config
    DATA_LOSS = "data-loss"  # the workload read back less than it wrote
    MEMORY = "memory"  # used (or would use) more memory than the limit
    TOOL = "tool"  # the machine or knobtune failed: never the config's fault


class RunFailure(Exception):
    """A run that produced no usable measurement, with the reason kept; a failure of the machine (TOOL) may say
    what to do about it (``fix``: a full disk's)."""

    def __init__(self, kind: FailureKind, reason: str, log_path: Path | None = None, fix: str = "") -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason
        self.log_path = log_path
        self.fix = fix


def await_server(process: subprocess.Popen[bytes], answers: Callable[[], bool], *, system: str,
                 why_exited: Callable[[], str], log: Path, default_config: bool, refusal: bool, limit_s: float,
                 poll_s: float) -> None:
    """Wait until a server just started answers (``answers``); if it exits first, fail as what that means.

    Raises:
        KnobtuneError: it exited under the default config (the machine or the set-up is at fault).
        RunFailure: REFUSED when it exited at start-up under a changed config (``refusal``), else CRASH (it
            did not recover); TIMEOUT when it did not answer within ``limit_s``.
    """
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            reason = why_exited()
            if default_config:
                raise KnobtuneError(f"{system} did not start under its default config: {reason}. Fix: see {log}")
            kind = FailureKind.REFUSED if refusal else FailureKind.CRASH
            raise RunFailure(kind, f"{system} {'refused the config' if refusal else 'did not recover'}: {reason}", log)
        if answers():
            return
        time.sleep(poll_s)
    raise RunFailure(FailureKind.TIMEOUT, f"{system} did not answer within {limit_s:.0f} s", log)


@dataclass(frozen=True)
class Phase:
    """One phase of a run (a db_bench benchmark, a kvbench phase)."""

    name: str
    ops: int
    seconds: float
    ops_per_s: float
    found: int | None = None
    expected: int | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    max_us: float | None = None
    mean_us: float | None = None  # the mean latency of the phase's operations (None: the driver does not say)


@dataclass(frozen=True)
class Settle:
    """What the store's debt cost after the workload: reopened as after a crash, flushed, compacted.

    ``recovery_s`` is the reopen until the store answers reads; ``settle_s``
    the whole of it (reopen, probe reads, flush, compaction), which is part of
    the run's measured time.
    """

    recovery_s: float
    settle_s: float
    flush_s: float
    compaction_s: float
    files_by_level: tuple[int, ...]
    sst_bytes: int
    wal_bytes_at_open: int
    reshaped: bool  # compaction was off or deferred past the default's trigger: brought to the default's shape
    log_path: Path


@dataclass(frozen=True)
class Measurement:
    """What one run measured. ``phases`` lists every phase; ``measured`` names those the objective counts.

    ``elapsed_s`` is the measured time: the workload's own time plus, when
    ``settle`` is set, the time the store took to settle afterwards.
    """

    elapsed_s: float
    phases: tuple[Phase, ...]
    measured: tuple[str, ...]
    log_path: Path
    verified: bool  # every read the workload checks found its key
    settle: Settle | None = None  # None: an unsettled run (the raw window)
    peak_rss_bytes: int | None = None  # the most memory the store's processes used
    start_s: float | None = None  # a server's start under the config until it answered (None: nothing to start)
    counters: Mapping[str, float] = field(default_factory=dict)  # the system's own counters over the run (by name)

    @property
    def workload_s(self) -> float:
        return self.elapsed_s - (self.settle.settle_s if self.settle else 0.0)

    @property
    def recovery_s(self) -> float | None:
        return self.settle.recovery_s if self.settle else None

    @property
    def ops_per_s(self) -> float:
        """Operations of the measured phases per second of those phases plus the settle they left behind."""
        counted = [p for p in self.phases if p.name in self.measured]
        seconds = sum(p.seconds for p in counted) + (self.settle.settle_s if self.settle else 0.0)
        return sum(p.ops for p in counted) / seconds if seconds > 0 else 0.0

    @property
    def p99_us(self) -> float | None:
        values = [p.p99_us for p in self.phases if p.name in self.measured and p.p99_us is not None]
        return max(values) if values else None

    def value(self, objective: Objective) -> float:
        """The number a study optimizes.

        Raises:
            RunFailure: (TOOL) the driver printed no latency for a p99 objective.
        """
        if objective is Objective.ELAPSED_S:
            return self.elapsed_s
        if objective is Objective.OPS_PER_S:
            return self.ops_per_s
        if self.p99_us is None:
            raise RunFailure(FailureKind.TOOL, "the run printed no p99 latency", self.log_path)
        return self.p99_us

    def summary(self) -> dict[str, object]:
        """Plain data for storage and JSON output."""
        settle = self.settle
        return {
            "elapsed_s": round(self.elapsed_s, 4),
            "workload_s": round(self.workload_s, 4),
            "settled": settle is not None,
            "settle_s": round(settle.settle_s, 4) if settle else None,
            "recovery_s": round(settle.recovery_s, 4) if settle else None,
            "peak_rss_bytes": self.peak_rss_bytes,
            "start_s": None if self.start_s is None else round(self.start_s, 3),
            **({"counters": dict(self.counters)} if self.counters else {}),
            "ops_per_s": round(self.ops_per_s, 1),
            "p99_us": self.p99_us,
            "verified": self.verified,
            "log": str(self.log_path),
            "phases": [vars(p) for p in self.phases],
            **({"settle": {"flush_s": round(settle.flush_s, 4), "compaction_s": round(settle.compaction_s, 4),
                           "files_by_level": list(settle.files_by_level), "sst_bytes": settle.sst_bytes,
                           "wal_bytes_at_open": settle.wal_bytes_at_open, "reshaped": settle.reshaped,
                           "log": str(settle.log_path)}} if settle else {}),
        }


@dataclass(frozen=True)
class KnownConfig:
    """A config known before the search: a heuristic users start from, or one the workload's shape suggests.

    A new study tries every known config first (never pruned); those ``beside`` the result (PGTune, the RocksDB
    guide: what a user would run instead) are also verified beside the winner. The default is not one of them.
    """

    label: str  # how output names it: "pgtune (oltp)", "rocksdb-guide", "rocksdb-point-lookups-universal"
    changed: Mapping[str, Value]  # the knobs it changes from the default
    source: str  # where the knowledge comes from (a data file, a page): the output says so
    beside: bool = True  # verified beside the result (a heuristic users run instead); False: only tried first


class Target(abc.ABC):
    """Runs one system. Subclasses set ``system`` and ``driver`` and implement the methods."""

    system: str
    driver: str
    driver_formats: tuple[ExportFormat, ...] = ()  # formats of this driver's own, beside the system's (System.formats)
    spelling: str | None = None  # the catalog format whose names this driver takes (None: the driver's own name)

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        """Whether a workload's section for this driver checks what its reads find."""
        return False

    @classmethod
    def installed(cls) -> str | None:
        """Where the driver's program is, or None when it is not installed."""
        return None

    @classmethod
    def build(cls) -> str | None:
        """Which build of the system the driver runs (version, build type, where from), or None when it cannot say."""
        return None

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """How this driver runs ``workload``: the workload's section for it.

        Raises:
            WorkloadError: the workload has no section this driver reads.
        """
        return workload.driver(cls.driver)

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, settle: bool = True,
                 memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        """``settle=False`` measures the raw window only; a run holding more than ``memory_limit_bytes`` is stopped;
        ``scale_rungs=True`` runs each config at a rung with its data-sized knobs scaled to the rung's share of the
        data (a study's ``research.scale_rungs``; False: every rung runs the config as it is)."""
        self.catalog = catalog
        self.workload = workload
        self.scratch_dir = scratch_dir
        self.settle = settle
        self.memory_limit_bytes = memory_limit_bytes
        self.scale_rungs = scale_rungs

    def __enter__(self) -> Target:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @abc.abstractmethod
    def preflight(self) -> None:
        """What ``open`` would refuse, checked without starting a process or writing a file: the tools are there and
        the data fits. Commands call it before they announce anything (nothing to undo when it raises).

        Raises:
            ToolMissingError: a program the target needs is not installed.
            KnobtuneError: not enough free space for the data.
        """

    def open(self) -> None:
        """Check the tools, make the scratch directory (a server: init, load, start, wait). Idempotent.

        Raises:
            ToolMissingError: a program the target needs is not installed.
            KnobtuneError: the system cannot be brought up under its default config.
        """

    def run(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
            seed: int) -> Measurement:
        """Run the workload at ``rung`` under ``config`` (a whole config: ``Catalog.config``), scaled to the rung
        when the target runs rungs scaled (``config_at``). Nothing of the config stays in the target afterwards.

        Raises:
            RunFailure: the run gave no usable measurement; ``kind`` says why (REFUSED: the system or its driver
                cannot take the config, and the reason says why).
        """
        return self.run_at(self.config_at(config, rung), rung, timeout_s=timeout_s, log_path=log_path, seed=seed)

    def config_at(self, config: Mapping[str, Value], rung: Rung) -> dict[str, Value]:
        """``config`` as a run at ``rung`` takes it: its data-sized knobs scaled to the rung's share of the data when
        the target scales rungs (the full size: the config as it is)."""
        return self.catalog.at_fraction(config, rung.fraction) if self.scale_rungs else dict(config)

    @abc.abstractmethod
    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        """What ``run`` does once it has scaled the config: the workload at ``rung`` under ``config`` exactly as
        given. Called by ``run`` only; a target implements this, callers call ``run``.

        Raises:
            RunFailure: as ``run``.
        """

    def close(self) -> None:
        """Kill anything still running and remove the scratch data. Idempotent; always runs.

        Embedded stores run one process per run, which never outlives it: removing the scratch folder is all.
        """
        shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def open_note(self) -> str | None:
        """What opening did that a person should know (a server's load and its time, or a reused copy)."""
        return None

    @abc.abstractmethod
    def version(self) -> str:
        """The system's version as it reports it."""

    def twin(self) -> Target | None:
        """A target like this one that runs the workload's verifiable twin, or None when it has none."""
        return None

    def impossible_values(self) -> dict[str, tuple[Value, ...]]:
        """Values of enum or bool knobs the system cannot take on this machine (knob -> values).

        They are left out of a search.
        """
        return {}

    def has_crash_check(self) -> bool:
        """Whether ``crash_check`` has anything to count for this workload."""
        return False

    def crash_check(self, config: Mapping[str, Value], log_dir: Path) -> str | None:
        """Kill the system in the middle of a run under ``config``; why acknowledged writes were lost, or None.

        Targets whose every run already ends in a crash and a data check may have nothing more to do.

        Raises:
            RunFailure: the check could not run (the config refused, the machine failed).
        """
        return None

    def known_configs(self) -> tuple[KnownConfig, ...]:
        """The configs known before the search, in the order a new study tries them; those ``beside`` are also
        verified beside the result."""
        return ()

    def keep_costly_counters(self) -> None:
        """Also collect the counters that cost run time (RocksDB's tickers: ~6% of a point read): for a single
        diagnosis run, never for runs that are compared (a study's runs do without them)."""

    def workload_facts(self) -> WorkloadFacts:
        """What this target knows of its workload (its data set, clients, reads, writes, scans): by default only
        what the workload file says; a target whose driver knows more says so."""
        return WorkloadFacts.of(self.workload)
