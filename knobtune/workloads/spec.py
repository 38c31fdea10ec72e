"""Workloads as data: sizes, a fidelity ladder, an objective, and how each driver runs them.

A workload file is TOML (``docs/workloads.md`` is the reference). The shipped
ones live in ``knobtune/workloads/data``; a user's own file is loaded by path.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import WorkloadError
from knobtune.names import NAME_CHARS, name_problem
from knobtune.schema import TEXT, required, setting
from knobtune.workloads.capture import CAPTURE_FILE, CAPTURE_FORMAT, CaptureSummary, capture_dir, check_private

DATA_DIR = Path(__file__).parent / "data"
MIN_RUNG_RECORDS = 500
DOCS = "docs/workloads.md"


class Objective(enum.StrEnum):
    """What a study optimizes. Each knows whether more is better."""

    ELAPSED_S = "elapsed_s"  # wall-clock of the whole run
    OPS_PER_S = "ops_per_s"  # operations per second over the measured phases
    P99_US = "p99_us"  # worst p99 latency of the measured phases

    @property
    def maximize(self) -> bool:
        return self is Objective.OPS_PER_S

    @property
    def unit(self) -> str:
        return {"elapsed_s": "s", "ops_per_s": "ops/s", "p99_us": "µs"}[self.value]

    def show(self, value: float) -> str:
        """``275,310 ops/s``, ``7.156 s``: the value with its unit, as a person reads it."""
        number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
        return f"{number} {self.unit}"

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly better than ``b``."""
        return a > b if self.maximize else a < b

    def speedup(self, value: float, baseline: float) -> float:
        """How many times better ``value`` is than ``baseline`` (>1 is a gain)."""
        return value / baseline if self.maximize else baseline / value


@dataclass(frozen=True, kw_only=True)
class WorkloadDocument:
    """A workload file (docs/workloads.md): its sizes, fidelity ladder and objective, and one section per driver
    (each read by its driver's own schema when a study runs it); a capture's ``capture.toml`` adds ``[capture]``."""

    name: str = required(**TEXT, example="my-workload")
    description: str = setting("", example="what it runs")
    systems: tuple[str, ...] = setting((), example=["rocksdb"])
    objective: str = setting("elapsed_s", choices=tuple(o.value for o in Objective), what="an objective")
    ladder: tuple[float, ...] = required(positive=True, most=1.0, example=[0.05, 0.2, 1.0],
                                         note="fractions of the full size, increasing, ending at 1.0")
    records: int = required(least=1, example=100000, note="the full size")
    key_size: int = setting(16, least=8, example=16, note="bytes; the drivers' keys need 8")
    value_size: int = setting(100, least=1, example=100, note="bytes")
    operations: int | None = setting(None, least=1, example=200000, note="a run phase's operations at full size")
    counts: str = setting("records", **TEXT, example="transactions", note="what records counts")
    drivers: Mapping[str, Mapping[str, Any]] = required(example={"db_bench": {"benchmarks": ["fillrandom"]}})
    capture: CaptureSummary | None = None


@dataclass(frozen=True)
class Rung:
    """One step of the fidelity ladder."""

    index: int
    fraction: float
    records: int
    operations: int = 0  # for workloads with a run phase of mixed operations (YCSB)
    unit: str = "records"  # what ``records`` counts (the workload's ``counts``: transactions, query runs)

    def __str__(self) -> str:
        count = f"{self.operations:,} operations" if self.operations else f"{self.records:,} {self.unit}"
        return f"rung {self.index} ({self.fraction:g} = {count})"


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    systems: tuple[str, ...]
    objective: Objective
    ladder: tuple[float, ...]
    records: int
    key_size: int
    value_size: int
    drivers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: Path | None = None
    operations: int = 0  # full-size count of a run phase's operations (0: none)
    counts: str = "records"  # what ``records`` counts: a server's run scales transactions or queries, not its data
    capture: CaptureSummary | None = None  # a capture of a user's own work (workloads/capture.py), said without data

    @property
    def rungs(self) -> tuple[Rung, ...]:
        """The ladder's steps. Records are at least ``MIN_RUNG_RECORDS`` (a data set that small says nothing);
        another unit (transactions, query runs) is the fraction of the full count, rounded up."""
        def count(full: int, f: float, unit: str) -> int:
            return max(MIN_RUNG_RECORDS, round(full * f)) if unit == "records" else max(1, math.ceil(full * f - 1e-9))

        return tuple(Rung(i, f, count(self.records, f, self.counts),
                          count(self.operations, f, "records") if self.operations else 0, self.counts)
                     for i, f in enumerate(self.ladder))

    def raised_note(self) -> str | None:
        """One line saying which rungs run more records than their fraction asks (held to ``MIN_RUNG_RECORDS``),
        or None when none does."""
        if self.counts != "records":
            return None
        raised = [(f, round(self.records * f)) for f in self.ladder if round(self.records * f) < MIN_RUNG_RECORDS]
        if not raised:
            return None
        asked = ", ".join(f"{f:g} ({n:,})" for f, n in raised)
        return (f"rung(s) {asked} of {self.records:,} records run {MIN_RUNG_RECORDS} records each: knobtune measures "
                f"no smaller data set (with --records {math.ceil(MIN_RUNG_RECORDS / self.ladder[0])} or more "
                "every rung is its fraction)")

    @property
    def full(self) -> Rung:
        return self.rungs[-1]

    def driver(self, name: str) -> Mapping[str, Any]:
        """This workload's section for one driver.

        Raises:
            WorkloadError: the workload has no section for that driver.
        """
        if name not in self.drivers:
            raise WorkloadError(f"workload '{self.name}' cannot run on driver '{name}' "
                                f"(it has {', '.join(self.drivers) or 'no drivers'}). Fix: "
                                + (f"add --driver {next(iter(self.drivers))}, or choose another workload"
                                   if self.drivers else "choose another workload"))
        return self.drivers[name]

    def scaled(self, records: int) -> Workload:
        """The same workload at another full size (the ladder keeps its fractions; operations scale alike)."""
        operations = round(self.operations * records / self.records) if self.operations else 0
        return dataclasses.replace(self, records=records, operations=operations)


def available_workloads() -> list[str]:
    return sorted(p.stem for p in DATA_DIR.glob("*.toml"))


def load_workload(name_or_path: str | Path) -> Workload:
    """A shipped workload by name, any workload file by path, or a capture folder (``knobtune capture``).

    Raises:
        WorkloadError: naming the file, the field and the fix; a capture that others can read.
    """
    path = Path(name_or_path)
    captured = capture_dir(path)
    if captured is not None:
        check_private(captured)
        path = captured / CAPTURE_FILE
    elif path.suffix != ".toml":
        path = DATA_DIR / f"{name_or_path}.toml"
        if not path.exists():
            raise WorkloadError(f"unknown workload '{name_or_path}'. Fix: choose one of "
                                f"{', '.join(available_workloads())}, give a .toml file or a capture folder")
    return _build(path, read_toml(path, WorkloadError, "workload"))


def _build(path: Path, data: dict[str, Any]) -> Workload:
    """The workload file's data read through its schema (``WorkloadDocument``), then what its fields must agree on.

    Raises:
        WorkloadError: one line per problem, naming the field and the fix.
    """
    document = schema.read(WorkloadDocument, data, schema.Where(str(path), docs=DOCS), WorkloadError)
    problems = []
    if (problem := name_problem(document.name)) is not None:
        problems.append(f"{path}: name {document.name!r} {problem} (it names the study and its folder). Fix: use "
                        f"{NAME_CHARS}, e.g. name = \"my-workload\"")
    ladder = document.ladder
    if ladder[-1] != 1.0 or list(ladder) != sorted(set(ladder)):
        problems.append(f"{path}: ladder {list(ladder)} is not an increasing list of fractions ending at 1.0. Fix: "
                        "e.g. ladder = [0.05, 0.2, 1.0]")
    if document.capture is not None and document.capture.format > CAPTURE_FORMAT:
        problems.append(f"{path}: capture.format {document.capture.format} is newer than this knobtune reads (1 to "
                        f"{CAPTURE_FORMAT}). Fix: tune it with the knobtune that made it, or make the capture again")
    if not document.drivers:
        problems.append(f"{path}: [drivers] has no driver section. Fix: add one, e.g. [drivers.db_bench] with its "
                        f"benchmarks ({DOCS})")
    if problems:
        raise WorkloadError("\n".join(problems))
    return Workload(
        name=document.name, description=document.description, systems=document.systems,
        objective=Objective(document.objective), ladder=ladder, records=document.records,
        key_size=document.key_size, value_size=document.value_size, drivers=document.drivers, source=path,
        operations=document.operations or 0, counts=document.counts, capture=document.capture)
