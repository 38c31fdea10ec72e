"""What every target gives: a Measurement per run, or a RunFailure saying what went wrong.

A target runs one system under one config at one fidelity in a scratch
directory of its own. It is a context manager: ``prepare`` on enter, ``stop``
on exit, both idempotent, and ``stop`` always runs.
"""

from __future__ import annotations

import abc
import enum
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from knobtune.errors import UsageError
from knobtune.knobs import Catalog, Value
from knobtune.workloads import Objective, Rung, Workload


class FailureKind(enum.StrEnum):
    """Why a run produced no measurement. Only TOOL is knobtune's or the machine's fault."""

    REFUSED = "refused"  # the system rejected the config
    TIMEOUT = "timeout"  # slower than the limit (a multiple of the default's time)
    CRASH = "crash"  # the system died under the config
    DATA_LOSS = "data-loss"  # the workload read back less than it wrote
    TOOL = "tool"  # the machine or knobtune failed: never the config's fault


class RunFailure(Exception):
    """A run that produced no usable measurement, with the reason kept."""

    def __init__(self, kind: FailureKind, reason: str, log_path: Path | None = None) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason
        self.log_path = log_path


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


@dataclass(frozen=True)
class Measurement:
    """What one run measured. ``phases`` lists every phase; ``measured`` names those the objective counts."""

    elapsed_s: float
    phases: tuple[Phase, ...]
    measured: tuple[str, ...]
    log_path: Path
    verified: bool  # every read the workload checks found its key

    @property
    def ops_per_s(self) -> float:
        counted = [p for p in self.phases if p.name in self.measured]
        seconds = sum(p.seconds for p in counted)
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
        return {
            "elapsed_s": round(self.elapsed_s, 4),
            "ops_per_s": round(self.ops_per_s, 1),
            "p99_us": self.p99_us,
            "verified": self.verified,
            "log": str(self.log_path),
            "phases": [vars(p) for p in self.phases],
        }


class Target(abc.ABC):
    """Runs one system. Subclasses set ``system`` and ``driver`` and implement the methods."""

    system: str
    driver: str
    export_formats: tuple[str, ...] = ("json",)

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        """Whether a workload's section for this driver checks what its reads find."""
        return False

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path) -> None:
        self.catalog = catalog
        self.workload = workload
        self.scratch_dir = scratch_dir

    def __enter__(self) -> Target:
        self.prepare()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @abc.abstractmethod
    def prepare(self) -> None:
        """Check the tools are there and make the scratch directory. Idempotent.

        Raises:
            ToolMissingError: a program the target needs is not installed.
        """

    @abc.abstractmethod
    def apply(self, config: Mapping[str, Value]) -> None:
        """Make ``config`` the one the next runs use."""

    @abc.abstractmethod
    def run(self, rung: Rung, *, timeout_s: float | None, log_path: Path, seed: int) -> Measurement:
        """Run the workload at one rung under the applied config.

        Raises:
            RunFailure: the run gave no usable measurement; ``kind`` says why.
        """

    def stop(self) -> None:
        """Kill anything still running and remove the scratch data. Idempotent.

        Embedded stores run one process per run, which never outlives it: removing the scratch folder is all.
        """
        shutil.rmtree(self.scratch_dir, ignore_errors=True)

    @abc.abstractmethod
    def version(self) -> str:
        """The system's version as it reports it."""

    def export(self, config: Mapping[str, Value], fmt: str) -> str:
        """The config in one of ``export_formats``.

        Raises:
            UsageError: ``fmt`` is not one of them.
        """
        raise UsageError(f"{self.system} has no export format '{fmt}'. Fix: use one of {', '.join(self.export_formats)}")
