"""One module per system and driver; each runs a workload under a config and returns a Measurement.

Nothing here knows an optimizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import UsageError
from knobtune.knobs import Catalog
from knobtune.targets._base import FailureKind, KnownConfig, Measurement, Phase, RunFailure, Target
from knobtune.targets.cassandra import CassandraTarget
from knobtune.targets.db_bench import DbBenchTarget
from knobtune.targets.formats import ExportFormat
from knobtune.targets.kvbench import KvbenchTarget, KvbenchTunableTarget
from knobtune.targets.postgresql import PostgresTarget
from knobtune.workloads import Workload

TARGETS: dict[tuple[str, str], type[Target]] = {
    ("rocksdb", "db_bench"): DbBenchTarget,
    ("rocksdb", "kvbench"): KvbenchTarget,
    ("leveldb", "kvbench"): KvbenchTarget,
    ("leveldb", "kvbench-tunable"): KvbenchTunableTarget,  # LevelDB patched by knobtune: dbformat.h's constants as knobs
    ("postgresql", "pgbench"): PostgresTarget,
    ("cassandra", "ycsb"): CassandraTarget,
}
DEFAULT_DRIVER = {"rocksdb": "db_bench", "leveldb": "kvbench", "postgresql": "pgbench", "cassandra": "ycsb"}


def resolve_driver(system: str, driver: str | None) -> str:
    """``driver``, or the system's default driver.

    Raises:
        UsageError: no target runs that system through that driver.
    """
    driver = driver or DEFAULT_DRIVER.get(system, "")
    if (system, driver) not in TARGETS:
        known = ", ".join(f"{s} --driver {d}" for s, d in TARGETS)
        raise UsageError(f"no target runs {system} through driver '{driver}'. Fix: use one of {known}")
    return driver


def export_formats(system: str, driver: str | None) -> tuple[ExportFormat, ...]:
    """The formats a study of ``system`` through ``driver`` exports to, the system's own first."""
    return TARGETS[(system, resolve_driver(system, driver))].formats(system)


def export_format(system: str, driver: str | None, name: str) -> ExportFormat:
    """One of the formats a study of ``system`` through ``driver`` exports to.

    Raises:
        UsageError: it has no format of that name.
    """
    formats = export_formats(system, driver)
    for fmt in formats:
        if fmt.name == name:
            return fmt
    known = ", ".join([f.name for f in formats] + ["json"])
    raise UsageError(f"a {system} study has no export format '{name}'. Fix: use one of {known}")


def workload_section(system: str, driver: str | None, workload: Workload) -> Mapping[str, Any]:
    """How ``driver`` (the system's default if None) runs ``workload``: the workload's section that driver reads.

    Raises:
        UsageError: no target runs that system through that driver.
        WorkloadError: the workload has no section for it.
    """
    return TARGETS[(system, resolve_driver(system, driver))].section(workload)


def target_class(system: str, driver: str) -> type[Target] | None:
    """The target class that runs ``system`` through ``driver``, or None."""
    return TARGETS.get((system, driver))


def make_target(catalog: Catalog, workload: Workload, scratch_dir: Path, driver: str | None = None,
                **options: object) -> Target:
    """The target that runs ``catalog.system`` through ``driver`` (its default driver if None).

    Raises:
        UsageError: no such system or driver here.
    """
    driver = resolve_driver(catalog.system, driver)
    return TARGETS[(catalog.system, driver)](catalog, workload, scratch_dir, **options)


__all__ = ["CassandraTarget", "DbBenchTarget", "ExportFormat", "FailureKind", "KnownConfig", "KvbenchTarget", "KvbenchTunableTarget",
           "Measurement", "PostgresTarget", "Phase", "RunFailure", "Target", "TARGETS", "export_format",
           "export_formats", "make_target", "resolve_driver", "target_class", "workload_section"]
