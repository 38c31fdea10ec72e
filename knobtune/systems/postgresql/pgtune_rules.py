"""PGTune's rules as data: ``pgtune.toml`` (beside this module), read and checked into typed records.

``pgtune.toml`` holds PGTune's rules as read from its source at the commit
that file names; ``pgtune.py`` applies them to a machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from knobtune.errors import CatalogError, UsageError
from knobtune.datafile import read_toml
from knobtune.knobs.catalog import Value
from knobtune.units import parse_bytes
from knobtune.targets import DISKS

RULES_PATH = Path(__file__).parent / "pgtune.toml"


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
def load_pgtune(path: Path = RULES_PATH) -> Pgtune:
    """Read and check PGTune's rules.

    Raises:
        CatalogError: the file is unreadable, or a field is missing, unknown or of the wrong type.
    """
    data = read_toml(path, CatalogError, "PGTune's rules")
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
