"""Every system knobtune runs: one line per system package, and the seam where systems described as data join.

The CLI, tuning and the report ask these functions which drivers, formats and
heuristics a system has; none of them names a system.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import UsageError
from knobtune.knobs import Catalog
from knobtune.targets import cassandra, leveldb, postgresql, rocksdb
from knobtune.targets._base import Target
from knobtune.targets._formats import ExportFormat
from knobtune.targets._heuristics import HeuristicConfig, Machine
from knobtune.targets._server import remove_stale_homes
from knobtune.targets._system import System
from knobtune.workloads import Workload

BUILT_IN: tuple[System, ...] = (
    rocksdb.SYSTEM,
    leveldb.SYSTEM,
    postgresql.SYSTEM,
    cassandra.SYSTEM,
)


def described_systems() -> tuple[System, ...]:
    """Systems described by a data file (a system file: init, start argv, readiness, load, benchmark, settle,
    checks, formats) rather than a package of their own. None yet: the issue "a system described as data" finds
    them here, each run by one generic server target.
    """
    return ()


SYSTEMS: Mapping[str, System] = {entry.name: entry for entry in (*BUILT_IN, *described_systems())}
TARGETS: Mapping[tuple[str, str], type[Target]] = {
    (entry.name, driver): target for entry in SYSTEMS.values() for driver, target in entry.targets.items()}


def reclaim_server_homes() -> int:
    """Remove the server homes (data folders in /tmp) that knobtune processes on this host left when they were
    killed, for every system; the bytes freed."""
    prefixes = {prefix for target in TARGETS.values() if (prefix := getattr(target, "home_prefix", None))}
    return sum(remove_stale_homes(prefix) for prefix in sorted(prefixes))


def resolve_driver(system: str, driver: str | None) -> str:
    """``driver``, or the system's default driver.

    Raises:
        UsageError: no target runs that system through that driver.
    """
    entry = SYSTEMS.get(system)
    driver = driver or (entry.default_driver if entry else "")
    if (system, driver) not in TARGETS:
        known = ", ".join(f"{s} --driver {d}" for s, d in TARGETS)
        raise UsageError(f"no target runs {system} through driver '{driver}'. Fix: use one of {known}")
    return driver


def export_formats(system: str, driver: str | None) -> tuple[ExportFormat, ...]:
    """The formats a study of ``system`` through ``driver`` exports to, the system's own first.

    Raises:
        UsageError: no target runs that system through that driver.
    """
    return SYSTEMS[system].formats_through(resolve_driver(system, driver))


def export_format(system: str, driver: str | None, name: str) -> ExportFormat:
    """One of the formats a study of ``system`` through ``driver`` exports to.

    Raises:
        UsageError: it has no format of that name.
    """
    formats = export_formats(system, driver)
    for candidate in formats:
        if candidate.name == name:
            return candidate
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


def heuristic_config(system: str, machine: Machine, profile: str | None, name: str | None = None) -> HeuristicConfig:
    """What ``knobtune baseline`` prints: the config ``name`` of ``system`` (by default the heuristic its users
    start from: PGTune for postgresql, the tuning guide's for rocksdb) for ``machine`` under ``profile``.

    Raises:
        UsageError: ``system`` has no heuristics or none called ``name``; ``profile`` is missing where the config
            needs one, not one of its profiles, or given for a fixed config.
    """
    offered = {s.name: s.heuristics for s in SYSTEMS.values() if s.heuristics is not None}
    heuristics = offered.get(system)
    if heuristics is None:  # the messages name the command, `knobtune baseline`
        raise UsageError(f"no baseline for system '{system}'. Fix: baselines exist for "
                         + ", ".join(f"{s} ({h.names[0]})" for s, h in offered.items()))
    if name is not None and name not in heuristics.names:
        raise UsageError(f"{system} has no baseline called '{name}'. Fix: choose one of {', '.join(heuristics.names)}")
    return heuristics.compute(name or heuristics.names[0], machine, profile)
