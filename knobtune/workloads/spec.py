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

from knobtune.datafile import read_toml
from knobtune.errors import WorkloadError
from knobtune.names import NAME_CHARS, name_problem, nearest
from knobtune.workloads.capture import CAPTURE_FILE, CaptureSummary, capture_dir, check_private, summary_of

DATA_DIR = Path(__file__).parent / "data"
MIN_RUNG_RECORDS = 500
FIELDS = ("name", "description", "systems", "objective", "ladder", "records", "key_size", "value_size", "operations",
          "counts", "drivers", "capture")


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
    def fail(field_name: str, problem: str, fix: str) -> WorkloadError:
        return WorkloadError(f"{path}: field '{field_name}': {problem}. Fix: {fix}")

    for given in data:
        if given not in FIELDS:
            raise fail(given, f"is not a field of a workload{nearest(given, FIELDS)}",
                       f"use {', '.join(FIELDS)} (docs/workloads.md)")
    for required in ("name", "records", "ladder", "drivers"):
        if required not in data:
            raise fail(required, "missing", "add it (see docs/workloads.md)")
    if not isinstance(data["name"], str) or (problem := name_problem(data["name"])) is not None:
        raise fail("name", f"{data['name']!r} {problem or 'is not text'} (it names the study and its folder)",
                   f"use {NAME_CHARS}, e.g. name = \"my-workload\"")
    systems = data.get("systems", [])
    if not isinstance(systems, list) or not all(isinstance(s, str) for s in systems):
        raise fail("systems", f"{systems!r} is not a list of systems", 'e.g. systems = ["rocksdb"]')
    try:
        objective = Objective(data.get("objective", "elapsed_s"))
    except ValueError:
        raise fail("objective", f"{data['objective']!r} is unknown",
                   f"use one of {', '.join(o.value for o in Objective)}") from None
    given_ladder = data["ladder"]
    if not isinstance(given_ladder, list) or not all(isinstance(f, int | float) and not isinstance(f, bool)
                                                     for f in given_ladder):
        raise fail("ladder", f"{given_ladder!r} is not a list of fractions", "e.g. [0.05, 0.2, 1.0]")
    ladder = tuple(float(f) for f in given_ladder)
    if not ladder or ladder[-1] != 1.0 or any(not 0 < f <= 1 for f in ladder) or list(ladder) != sorted(set(ladder)):
        raise fail("ladder", f"{list(ladder)} is not an increasing list of fractions ending at 1.0",
                   "e.g. [0.05, 0.2, 1.0]")
    for size_field in ("records", "key_size", "value_size", "operations"):
        value = data.get(size_field, 1)
        if not isinstance(value, int) or value <= 0 or isinstance(value, bool):
            raise fail(size_field, f"{value!r} is not a positive integer", "give a whole number")
    if data.get("key_size", 16) < 8:
        raise fail("key_size", f"{data['key_size']} is below 8 bytes, which the drivers' keys need", "key_size = 16")
    counts = data.get("counts", "records")
    if not isinstance(counts, str) or not counts.strip():
        raise fail("counts", f"{counts!r} is not a word", 'name what records counts, e.g. "transactions"')
    if not isinstance(data["drivers"], dict) or not data["drivers"]:
        raise fail("drivers", "no driver section", "add e.g. [drivers.db_bench] with its benchmarks")
    return Workload(
        name=str(data["name"]), description=str(data.get("description", "")),
        systems=tuple(data.get("systems", ())), objective=objective, ladder=ladder,
        records=data["records"], key_size=data.get("key_size", 16), value_size=data.get("value_size", 100),
        drivers=data["drivers"], source=path, operations=data.get("operations", 0), counts=counts,
        capture=summary_of(data),
    )
