"""Every system knobtune runs: one line per system package, and the seam where systems described as data join.

The CLI, tuning and the report ask these functions which drivers, formats and
heuristics a system has; none of them names a system.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, UsageError
from knobtune.knobs import Catalog
from knobtune.knobs.catalog import SYSTEMS_DIR, catalog_path, forget_catalog, register_catalog
from knobtune.systems import cassandra, leveldb, postgresql, rocksdb
from knobtune.targets import Capturing, ExportFormat, HeuristicConfig, Machine, System, Target
from knobtune.described.target import target_classes
from knobtune.processes import LeftBehind
from knobtune.server.life import remove_stale_homes, stale_homes
from knobtune.described.system_file import SystemFile, load_system_file
from knobtune.workloads import Workload

BUILT_IN: tuple[System, ...] = (
    rocksdb.SYSTEM,
    leveldb.SYSTEM,
    postgresql.SYSTEM,
    cassandra.SYSTEM,
)


SHIPPED_FILES = SYSTEMS_DIR  # knobtune/systems/NAME/system.toml: the folder the catalogs of shipped files are found in


def described_system(path: Path) -> System:
    """The system a system file describes (``described/system_file.py``), run by the one generic server target
    (``described/target.py``); its catalog is registered under its name, so every command finds it by name.

    Raises:
        CatalogError: the file (or its catalog) is not valid; one line naming the field and the fix.
    """
    return _described(load_system_file(path))


def _described(files: SystemFile) -> System:
    register_catalog(files.name, files.catalog_path)
    return System(files.name, files.default_driver, target_classes(files), files.formats,
                  rules=files.rules, counters=files.counters_doc)


def described_systems() -> tuple[System, ...]:
    """The systems knobtune ships as data only (``knobtune/systems/*/system.toml``)."""
    return tuple(described_system(path) for path in sorted(SHIPPED_FILES.glob("*/system.toml")))


def _targets_of(systems: Mapping[str, System]) -> dict[tuple[str, str], type[Target]]:
    return {(entry.name, driver): target for entry in systems.values() for driver, target in entry.targets.items()}


SYSTEMS: dict[str, System] = {entry.name: entry for entry in (*BUILT_IN, *described_systems())}
TARGETS: dict[tuple[str, str], type[Target]] = _targets_of(SYSTEMS)
_SHIPPED: dict[str, System] = dict(SYSTEMS)  # as knobtune ships them, whatever users' files add later
_SHIPPED_CATALOGS = {name: catalog_path(name) for name in SYSTEMS  # the catalogs of the shipped system files
                     if name not in {entry.name for entry in BUILT_IN}}


_USER_FILES: dict[str, Path] = {}


def use_system(value: str) -> str:
    """A system's name, or the path of a system file (``*.toml``): the system it describes, known from now on to
    every command of this process like a shipped one (docs/system-file.md). A catalog file (``knobtune knobs
    FILE``) is its path.

    Raises:
        UsageError: the file does not exist.
        CatalogError: the file is not a valid system file.
    """
    if not value.endswith(".toml"):
        return value
    path = Path(value)
    if not path.is_file():
        raise UsageError(f"no system file {value}. Fix: give the path of a system file (docs/system-file.md) or a "
                         "system's name (`knobtune systems`)")
    if "knobs" in read_toml(path, CatalogError, "system file"):
        return value  # a catalog file (`knobtune knobs FILE`), not a system file
    return use_system_file(path)


def use_system_file(path: Path) -> str:
    """Make the system a user's file describes known to every command of this process, like a shipped one; its
    name.

    Raises:
        CatalogError: the file is not valid.
        UsageError: it names a system knobtune ships as code.
    """
    files = load_system_file(path)
    if files.name in {s.name for s in BUILT_IN}:
        raise UsageError(f"{path} describes '{files.name}', which knobtune runs as a package of its own. "
                         "Fix: give the system another name")
    entry = _described(files)
    SYSTEMS[entry.name] = entry
    TARGETS.update({(entry.name, d): t for d, t in entry.targets.items()})
    _USER_FILES[entry.name] = path.resolve()
    return entry.name


def forget_system_files() -> None:
    """Forget every system a user's file made known to this process (``use_system_file``): the systems, their
    targets and their catalogs are the shipped ones again."""
    for name in _USER_FILES:
        if name in _SHIPPED_CATALOGS:
            register_catalog(name, _SHIPPED_CATALOGS[name])
        else:
            forget_catalog(name)
    _USER_FILES.clear()
    SYSTEMS.clear()
    SYSTEMS.update(_SHIPPED)
    TARGETS.clear()
    TARGETS.update(_targets_of(_SHIPPED))


def user_system_file(system: str) -> Path | None:
    """The user's system file ``system`` came from in this process (None: a shipped system)."""
    return _USER_FILES.get(system)


def know_system(system: str, file: str | None) -> None:
    """Make a study's system known again from the user's system file it recorded, when this process does not know
    it (``show`` of a study tuned with ``tune path/to/system.toml``).

    Raises:
        UsageError: the file is gone.
    """
    if system in SYSTEMS or file is None:
        return
    if not Path(file).is_file():
        raise UsageError(f"the study's system '{system}' came from {file}, which is gone. Fix: put the system file "
                         "back there")
    use_system_file(Path(file))


def stale_server_homes() -> list[LeftBehind]:
    """The server homes (data folders in the temporary folder) that knobtune processes on this host left when they
    were killed, for every system."""
    prefixes = {prefix for target in TARGETS.values() if (prefix := getattr(target, "home_prefix", None))}
    return [found for prefix in sorted(prefixes) for found in stale_homes(prefix)]


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


def driver_for(system: str, driver: str | None, workload: Workload) -> str:
    """``driver``, or the driver that runs ``workload`` on ``system``: the system's default when the workload has a
    section for it, else the one driver of the system the workload has a section for (a capture's ``replay``).

    Raises:
        UsageError: no target runs that system through that driver.
    """
    entry = SYSTEMS.get(system)
    if driver is None and entry is not None and entry.default_driver not in workload.drivers:
        own = [name for name in entry.targets if name in workload.drivers]
        if len(own) == 1:
            driver = own[0]
    return resolve_driver(system, driver)


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


def spelling_of(system: str, driver: str) -> str:
    """How ``driver`` names ``system``'s knobs: the catalog format it takes (a replay takes kvbench's names)."""
    target = TARGETS.get((system, driver))
    return (target.spelling if target is not None else None) or driver


def target_class(system: str, driver: str) -> type[Target] | None:
    """The target class that runs ``system`` through ``driver``, or None."""
    return TARGETS.get((system, driver))


def make_target(catalog: Catalog, workload: Workload, scratch_dir: Path, driver: str | None = None,
                **options: Any) -> Target:
    """The target that runs ``catalog.system`` through ``driver`` (if None: the one ``driver_for`` finds).

    Raises:
        UsageError: no such system or driver here.
    """
    driver = driver_for(catalog.system, driver, workload)
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


def capturing(system: str) -> Capturing:
    """How ``knobtune capture`` makes a capture of ``system``'s work.

    Raises:
        UsageError: the system cannot be captured yet (naming those that can).
    """
    entry = SYSTEMS.get(system)
    if entry is None or entry.capturing is None:
        able = ", ".join(s.name for s in SYSTEMS.values() if s.capturing is not None) or "none yet"
        raise UsageError(f"knobtune cannot capture {system}'s work yet (docs/replay.md says what it would take). "
                         f"Fix: capture one of {able}")
    return entry.capturing
