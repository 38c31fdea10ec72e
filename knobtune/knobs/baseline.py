"""Heuristic baselines users already know (PGTune for PostgreSQL), computed for one machine.

The rules are data: ``baselines/pgtune.toml`` holds PGTune's, as read from its
source at the commit that file names. This module applies them to a
``Machine`` and fits the result to a knob catalog: the catalog's names, units
(bytes, seconds) and ranges. It runs no process and knows no optimizer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, KnobtuneError, UsageError
from knobtune.knobs.catalog import Catalog, Knob, KnobType, Value, load_catalog
from knobtune.knobs.display import knob_range, knob_value
from knobtune.knobs.units import human_bytes, parse_bytes

BASELINE_DIR = Path(__file__).parent / "baselines"
BASELINES = {"postgresql": "pgtune", "rocksdb": "rocksdb-guide"}  # system -> the heuristic its users start from
PUBLISHED = {"rocksdb": ("db-bench-leveled", "db-bench-universal")}  # system -> configs published for it (to compare)
GUIDES = frozenset({"rocksdb-guide", *PUBLISHED["rocksdb"]})  # one fixed config each, from a file (no profile)
DISKS = ("ssd", "hdd", "san")
KIB = 1024
# PGTune's settings that are sizes (PGTune computes them in kB); spelled in kB/MB/GB when reported.
_SIZES = frozenset({"shared_buffers", "effective_cache_size", "maintenance_work_mem", "min_wal_size",
                    "max_wal_size", "wal_buffers", "work_mem", "autovacuum_work_mem"})


# ---------------------------------------------------------------- the machine


@dataclass(frozen=True)
class Machine:
    """What PGTune asks about a machine: memory, CPUs, disk type, expected connections (None: the profile's)."""

    memory_bytes: int
    cpus: int
    disk: str = "ssd"
    connections: int | None = None

    def __post_init__(self) -> None:
        """Check the facts.

        Raises:
            UsageError: a disk type other than ssd, hdd or san, fewer than 1 connection, no memory or no CPU.
        """
        if self.disk not in DISKS:
            raise UsageError(f"disk type {self.disk!r} is not one of {', '.join(DISKS)}. Fix: --disk ssd, hdd or san")
        if self.connections is not None and self.connections < 1:
            raise UsageError(f"--connections {self.connections} is below 1. Fix: give the clients you expect, e.g. 100")
        if self.memory_bytes < KIB or self.cpus < 1:
            raise UsageError(f"a machine with {self.memory_bytes} bytes of memory and {self.cpus} CPUs cannot be "
                             "tuned. Fix: give at least 1 KiB and 1 CPU")

    @classmethod
    def from_host(cls, disk: str | None = None, connections: int | None = None) -> Machine:
        """This machine: physical memory (os.sysconf), CPUs (os.cpu_count), and, unless ``disk`` is given,
        "hdd" when one of its disks says it spins (``rotational_disks``), else "ssd".

        Raises:
            UsageError: ``disk`` or ``connections`` is invalid.
        """
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        detected = "hdd" if rotational_disks() else "ssd"
        return cls(memory_bytes, os.cpu_count() or 1, disk or detected, connections)


def rotational_disks(sys_block: Path = Path("/sys/block")) -> list[str]:
    """Block devices that say they spin (``queue/rotational`` is 1); virtual ones (loop, zram) are skipped.

    A virtual machine's virtio disk says 1 unless its host tells it otherwise, whatever lies beneath.
    """
    found = []
    for device in sorted(sys_block.glob("*")):
        flag = device / "queue" / "rotational"
        try:
            if "/virtual/" not in str(device.resolve()) and flag.read_text().strip() == "1":
                found.append(device.name)
        except OSError:
            continue
    return found


def disk_detection(sys_block: Path = Path("/sys/block")) -> str:
    """How ``Machine.from_host`` reads the disk type here, in one sentence for the user."""
    spinning = rotational_disks(sys_block)
    if not spinning:
        return f"disk type ssd: no disk in {sys_block} says it spins; --disk hdd or san to override"
    return (f"disk type hdd: {', '.join(spinning)} says it spins ({sys_block}/*/queue/rotational = 1; a virtual "
            "machine's virtio disk says so whatever lies beneath); --disk ssd or san to override")


# ---------------------------------------------------------------- the rules, as read from pgtune.toml


@dataclass(frozen=True)
class Disk:
    random_page_cost: float
    effective_io_concurrency: int


@dataclass(frozen=True)
class Profile:
    """One PGTune "DB type". Fractions are (numerator, denominator) of RAM, floored in kB."""

    name: str
    max_connections: int
    shared_buffers: tuple[int, int]
    effective_cache_size: tuple[int, int]
    maintenance_work_mem: tuple[int, int]
    min_wal_size_bytes: int
    max_wal_size_bytes: int
    default_statistics_target: int
    work_mem_divisor: int
    cap_workers_per_gather: bool
    jit: bool | None = None  # None: not written (PostgreSQL's default)
    random_page_cost: float | None = None  # None: the disk's
    outside_catalog: Mapping[str, Value] = field(default_factory=dict)


@dataclass(frozen=True)
class Rules:
    """PGTune's rules that hold for every profile (see pgtune.toml for each one's meaning)."""

    checkpoint_completion_target: float
    wal_compression: str
    huge_pages_try_from_bytes: int
    maintenance_work_mem_cap_bytes: int
    wal_buffers_percent: int
    wal_buffers_max_bytes: int
    wal_buffers_round_up_above_bytes: int
    wal_buffers_min_bytes: int
    work_mem_min_bytes: int
    work_mem_sessions_factor: int
    default_worker_processes: int
    parallel_from_cpus: int
    parallel_workers_cap: int
    autovacuum_max_workers: tuple[tuple[int, int], ...]
    autovacuum_work_mem_bytes: int
    memory_warning_below_bytes: int
    memory_warning_above_bytes: int


@dataclass(frozen=True)
class Pgtune:
    """The whole rules file: where it was read, the common rules, per disk type and per profile."""

    source: Mapping[str, Any]
    rules: Rules
    disks: Mapping[str, Disk]
    profiles: Mapping[str, Profile]

    def profile(self, name: str) -> Profile:
        """Raises UsageError naming the valid profiles when ``name`` is not one."""
        if name not in self.profiles:
            raise UsageError(f"unknown PGTune profile {name!r}. Fix: choose one of {', '.join(self.profiles)}")
        return self.profiles[name]


@lru_cache(maxsize=4)
def load_pgtune(path: Path = BASELINE_DIR / "pgtune.toml") -> Pgtune:
    """Read and check PGTune's rules.

    Raises:
        CatalogError: the file is unreadable, or a field is missing, unknown or of the wrong type.
    """
    data = read_toml(path, CatalogError, "baseline rules")
    missing = [table for table in ("source", "rules", "disks", "profiles") if not isinstance(data.get(table), dict)]
    if missing:
        raise CatalogError(f"{path}: missing table [{missing[0]}]. Fix: add it (see the file's header)")
    disks = {name: _build(Disk, data["disks"].get(name, {}), f"disks.{name}", path) for name in DISKS}
    profiles = {name: _build(Profile, spec, f"profiles.{name}", path, name=name)
                for name, spec in data["profiles"].items()}
    return Pgtune(dict(data["source"]), _build(Rules, data["rules"], "rules", path), disks, profiles)


def _build(cls: type, table: Mapping[str, Any], where: str, path: Path, **given: Any) -> Any:
    """An instance of dataclass ``cls`` from a TOML table; a field ``x_bytes`` is read from key ``x`` ("16MiB").

    Raises:
        CatalogError: naming the file and the field that is missing, unknown or of the wrong type.
    """
    keys = {spec.name.removesuffix("_bytes"): spec for spec in fields(cls) if spec.name not in given}
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise CatalogError(f"{path}: {where}: unknown field '{unknown[0]}'. Fix: use only {', '.join(keys)}")
    values = dict(given)
    for key, spec in keys.items():
        if key in table:
            values[spec.name] = _field_value(spec, table[key], f"{path}: {where}.{key}")
        elif spec.default is MISSING and spec.default_factory is MISSING:
            raise CatalogError(f"{path}: {where}: missing field '{key}'. Fix: add it (see the file's header)")
    return cls(**values)


def _field_value(spec: Field, raw: Any, where: str) -> Any:
    """``raw`` as field ``spec`` holds it: sizes parsed to bytes, lists frozen to tuples, scalars type-checked.

    Raises:
        CatalogError: naming ``where``, when the value is not of the field's type.
    """
    kind = str(spec.type)
    try:
        if spec.name.endswith("_bytes"):
            return parse_bytes(raw)
        if kind.startswith("tuple"):
            return tuple(tuple(item) if isinstance(item, list) else item for item in raw)
        base = kind.split(" ")[0]
        if base == "float" and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        expected = {"int": int, "float": float, "bool": bool, "str": str}.get(base)
        if expected and (not isinstance(raw, expected) or (expected is int and isinstance(raw, bool))):
            raise ValueError(f"{raw!r} is not of type {kind}")
    except (ValueError, TypeError) as exc:
        raise CatalogError(f"{where}: {exc}. Fix: give a value of type {kind}") from None
    return raw


# ---------------------------------------------------------------- applying them


@dataclass(frozen=True)
class Baseline:
    """A heuristic's config for one machine, fitted to our catalog, with what it could not express."""

    system: str
    name: str
    profile: str
    machine: Machine
    max_connections: int
    config: Mapping[str, Value]  # our catalog's knob names and units
    notes: tuple[str, ...]
    source: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``compare --config FILE`` reads its "config"."""
        return {"system": self.system, "baseline": self.name, "profile": self.profile,
                "machine": asdict(self.machine), "max_connections": self.max_connections,
                "config": dict(self.config), "notes": list(self.notes), "source": dict(self.source)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def describe(self) -> list[str]:
        """Lines a person reads: the source, the machine, every setting beside the default, the notes."""
        catalog = load_catalog(self.system)
        m = self.machine
        if "page" in self.source:  # a guide: one config, whatever the machine
            lines = [f"{self.name} for {self.system}: {self.source['page']} ({self.source.get('section', '')})"]
        elif not self.profile:  # a config published in a repository's file
            lines = [f"{self.name} for {self.system}: {self.source['repository']} {self.source['file']} at "
                     f"{self.source['tag']} (commit {self.source['commit']}): {self.source['what']}"]
        else:
            lines = [f"{self.name} for {self.system}, profile {self.profile}: rules of {self.source['repository']} "
                     f"{self.source['file']} at commit {self.source['commit']}",
                     f"machine: {human_bytes(m.memory_bytes)} memory ({m.memory_bytes} bytes), {m.cpus} CPUs, "
                     f"disk {m.disk}, max_connections {self.max_connections}"]
        width = max(map(len, self.config), default=0)
        for name, value in self.config.items():
            knob = catalog.knobs[name]
            default = "the default" if value == knob.default else f"default {knob_value(knob, knob.default)}"
            lines.append(f"  {name:<{width}}  {knob_value(knob, value)}  ({default})")
        return lines + [f"note: {note}" for note in self.notes]


def known_configs(system: str) -> tuple[str, ...]:
    """The names of ``system``'s baselines: the heuristic its users start from, then the configs published for it."""
    return ((BASELINES[system],) if system in BASELINES else ()) + PUBLISHED.get(system, ())


def compute_baseline(system: str, machine: Machine, profile: str | None, name: str | None = None) -> Baseline:
    """The baseline ``name`` of ``system`` (by default the heuristic its users start from: PGTune for postgresql,
    the tuning guide's config for rocksdb) for ``machine`` under ``profile`` (PGTune's; a fixed config has none).

    Raises:
        UsageError: ``system`` has no baseline or none called ``name``, ``profile`` is missing for PGTune or not
            one of its profiles, or given for a fixed config.
    """
    if system not in BASELINES:
        raise UsageError(f"no baseline for system '{system}'. Fix: baselines exist for "
                         + ", ".join(f"{s} ({b})" for s, b in BASELINES.items()))
    if name is not None and name not in known_configs(system):
        raise UsageError(f"{system} has no baseline called '{name}'. Fix: choose one of "
                         f"{', '.join(known_configs(system))}")
    name = name or BASELINES[system]
    if name in GUIDES:
        if profile is not None:
            raise UsageError(f"{name} has no profiles (it is one config). Fix: leave out --profile")
        return guide_baseline(system, name, machine)
    if profile is None:
        raise UsageError("PGTune needs the database type. Fix: add --profile web, oltp, dw, desktop or mixed")
    return pgtune_baseline(machine, profile)


def guide_baseline(system: str, name: str, machine: Machine) -> Baseline:
    """A fixed config (``baselines/NAME.toml``: a tuning guide's, or one published for a benchmark) in ``system``'s
    catalog names and units; a value outside the catalog's range is clamped into it, with a note, and the file's
    ``left_out`` settings (knobs the catalog lacks) are named in notes too.

    Raises:
        CatalogError: the file names a knob the catalog lacks or a value it refuses.
    """
    path = BASELINE_DIR / f"{name}.toml"
    data = read_toml(path, CatalogError, "baseline config")
    catalog = load_catalog(system)
    notes = [f"{setting} is left out: {why}" for setting, why in data.get("left_out", {}).items()]
    try:
        fitted = {knob: _clamp(catalog[knob], catalog[knob].typed(raw), notes, name)
                  for knob, raw in data["config"].items()}
        config = catalog.config(fitted)
    except (KnobtuneError, KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"{path}: {exc}. Fix: use the {system} catalog's knob names and value types") from None
    changed = {k: v for k, v in config.items() if k in data["config"]}
    return Baseline(system, name, "", machine, 0, changed, tuple(notes), dict(data["source"]))


def pgtune(machine: Machine, profile: str) -> dict[str, Value]:
    """PGTune's config for ``machine`` in our PostgreSQL catalog's names, units and ranges.

    Raises:
        UsageError: ``profile`` is not web, oltp, dw, desktop or mixed.
    """
    return dict(pgtune_baseline(machine, profile).config)


def pgtune_baseline(machine: Machine, profile: str, rules: Pgtune | None = None) -> Baseline:
    """PGTune's config with the notes: max_connections, values clamped, settings the catalog lacks.

    Raises:
        UsageError: ``profile`` is not one of the rules' profiles.
        CatalogError: the rules file is invalid.
    """
    rules = rules or load_pgtune()
    chosen = rules.profile(profile)
    connections = machine.connections or chosen.max_connections
    catalog = load_catalog("postgresql")
    notes = [_connections_note(connections, chosen, machine)] + _memory_warnings(rules.rules, machine)
    config = _fit(_pgtune_settings(rules, chosen, machine, connections), catalog, notes)
    catalog.config(config)  # every value fits; a broken relation would be a bug in the rules
    return Baseline("postgresql", "pgtune", profile, machine, connections, config, tuple(notes), rules.source)


def _pgtune_settings(rules: Pgtune, profile: Profile, machine: Machine, connections: int) -> dict[str, Value]:
    """Every setting PGTune writes, in PostgreSQL's names; sizes in bytes, computed in kB as PGTune does."""
    common, disk = rules.rules, rules.disks[machine.disk]
    memory_kb = machine.memory_bytes // KIB
    shared_kb = _share_kb(memory_kb, profile.shared_buffers)
    maintenance_kb = min(_share_kb(memory_kb, profile.maintenance_work_mem), common.maintenance_work_mem_cap_bytes // KIB)
    parallel = _parallel(common, profile, machine.cpus)
    workers = parallel.get("max_worker_processes", common.default_worker_processes)
    settings: dict[str, Value] = {
        "shared_buffers": shared_kb * KIB,
        "huge_pages": "try" if shared_kb * KIB >= common.huge_pages_try_from_bytes else "off",
        "effective_cache_size": _share_kb(memory_kb, profile.effective_cache_size) * KIB,
        "maintenance_work_mem": maintenance_kb * KIB,
        "min_wal_size": profile.min_wal_size_bytes,
        "max_wal_size": profile.max_wal_size_bytes,
        "checkpoint_completion_target": common.checkpoint_completion_target,
        "wal_buffers": _wal_buffers_kb(common, shared_kb) * KIB,
        "default_statistics_target": profile.default_statistics_target,
        "random_page_cost": disk.random_page_cost if profile.random_page_cost is None else profile.random_page_cost,
        "effective_io_concurrency": disk.effective_io_concurrency,
        "work_mem": _work_mem_kb(common, profile, memory_kb - shared_kb, connections + workers) * KIB,
        "wal_compression": common.wal_compression,
    }
    if profile.jit is not None:
        settings["jit"] = profile.jit
    return settings | parallel | _autovacuum(common, machine.cpus, maintenance_kb) | dict(profile.outside_catalog)


def _share_kb(memory_kb: int, fraction: tuple[int, int]) -> int:
    numerator, denominator = fraction
    return memory_kb * numerator // denominator


def _wal_buffers_kb(rules: Rules, shared_kb: int) -> int:
    """3% of shared_buffers, at most 16 MiB, rounded up to 16 MiB above 14 MiB, at least 32 KiB."""
    most_kb = rules.wal_buffers_max_bytes // KIB
    value = min(rules.wal_buffers_percent * shared_kb // 100, most_kb)
    if rules.wal_buffers_round_up_above_bytes // KIB < value < most_kb:
        value = most_kb
    return max(value, rules.wal_buffers_min_bytes // KIB)


def _work_mem_kb(rules: Rules, profile: Profile, free_kb: int, sessions: int) -> int:
    """(RAM - shared_buffers) / (sessions x 3), divided by the profile's divisor, floored; at least 4 MiB."""
    share = free_kb // (sessions * rules.work_mem_sessions_factor * profile.work_mem_divisor)
    return max(share, rules.work_mem_min_bytes // KIB)


def _parallel(rules: Rules, profile: Profile, cpus: int) -> dict[str, Value]:
    """The parallel settings, only with enough CPUs: all of them as workers, half of them per query."""
    if cpus < rules.parallel_from_cpus:
        return {}
    half = (cpus + 1) // 2
    per_gather = min(half, rules.parallel_workers_cap) if profile.cap_workers_per_gather else half
    return {"max_worker_processes": cpus, "max_parallel_workers_per_gather": per_gather,
            "max_parallel_workers": cpus, "max_parallel_maintenance_workers": min(half, rules.parallel_workers_cap)}


def _autovacuum(rules: Rules, cpus: int, maintenance_kb: int) -> dict[str, Value]:
    settings: dict[str, Value] = {}
    workers = next((value for at_least, value in rules.autovacuum_max_workers if cpus >= at_least), None)
    if workers is not None:
        settings["autovacuum_max_workers"] = workers
    if maintenance_kb * KIB >= rules.autovacuum_work_mem_bytes:
        settings["autovacuum_work_mem"] = rules.autovacuum_work_mem_bytes
    return settings


def _connections_note(connections: int, profile: Profile, machine: Machine) -> str:
    given = "--connections" if machine.connections else f"PGTune's for {profile.name}; --connections N to change"
    return (f"max_connections = {connections} ({given}) enters work_mem but is not a knob of the catalog: "
            "the scratch server keeps PostgreSQL's 100, enough for pgbench's clients")


def _memory_warnings(rules: Rules, machine: Machine) -> list[str]:
    if machine.memory_bytes < rules.memory_warning_below_bytes:
        return [f"PGTune warns its rules are not optimal below {human_bytes(rules.memory_warning_below_bytes)}"]
    if machine.memory_bytes > rules.memory_warning_above_bytes:
        return [f"PGTune warns its rules are not optimal above {human_bytes(rules.memory_warning_above_bytes)}"]
    return []


# ---------------------------------------------------------------- fitting to the catalog


def _fit(settings: Mapping[str, Value], catalog: Catalog, notes: list[str]) -> dict[str, Value]:
    """The settings the catalog has, in its types and clamped into its ranges; a note for each left out or clamped."""
    config: dict[str, Value] = {}
    for name, value in settings.items():
        knob = catalog.knobs.get(name)
        if knob is None:
            notes.append(f"PGTune also sets {name} = {_postgres_spelling(name, value)}; "
                         "the catalog has no such knob: left out")
        elif knob.type is KnobType.ENUM and value not in knob.choices:
            notes.append(f"PGTune sets {name} = {value}, not one of {', '.join(knob.choices)}: left out")
        else:
            config[name] = _clamp(knob, _typed(knob, value), notes, "PGTune")
    return config


def _typed(knob: Knob, value: Value) -> Value:
    if knob.type is KnobType.FLOAT:
        return float(value)
    if knob.type in (KnobType.INT, KnobType.BYTES):
        return int(value)
    return value


def _clamp(knob: Knob, value: Value, notes: list[str], who: str) -> Value:
    if not knob.is_numeric or value in knob.special or knob.min is None or knob.max is None:
        return value
    clamped = min(max(value, knob.min), knob.max)
    clamped = float(clamped) if knob.type is KnobType.FLOAT else int(clamped)
    if clamped != value:
        notes.append(f"{knob.name}: {who} gives {knob_value(knob, value)}, outside the catalog's range "
                     f"{knob_range(knob)}: clamped to {knob_value(knob, clamped)}")
    return clamped


def _postgres_spelling(name: str, value: Value) -> str:
    """A value as postgresql.conf takes it; sizes in GB, MB or kB as PGTune writes them."""
    if name not in _SIZES or not isinstance(value, int):
        return str(value).lower() if isinstance(value, bool) else str(value)
    kb = value // KIB
    for unit, size_kb in (("GB", KIB * KIB), ("MB", KIB)):
        if kb % size_kb == 0:
            return f"{kb // size_kb}{unit}"
    return f"{kb}kB"
