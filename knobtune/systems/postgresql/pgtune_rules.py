"""PGTune's rules as data: ``pgtune.toml`` (beside this module), read through the schema into typed records.

``pgtune.toml`` holds PGTune's rules as read from its source at the commit
that file names; ``pgtune.py`` applies them to a machine. Its documents are
the records ``pgtune.py`` reads: one schema, its fields as the file spells
them (a size is read to bytes: "16MiB" is 16777216).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, UsageError
from knobtune.schema import TEXT, required, setting, table
from knobtune.targets import DISKS

RULES_PATH = Path(__file__).parent / "pgtune.toml"
FRACTION = "[numerator, denominator] of RAM, floored in kB"
WAL_COMPRESSION = ("off", "on", "pglz", "lz4", "zstd")  # PostgreSQL 15's


@dataclass(frozen=True, kw_only=True)
class PgtuneSource:
    """Where PGTune's rules were read, and the case they are written down for."""

    repository: str = required(pattern=r"[\w.-]+/[\w.-]+", what="a repository (owner/name)", example="le0pard/pgtune")
    file: str = required(**TEXT, example="src/features/configuration/configurationSlice.js")
    commit: str = required(pattern=r"[0-9a-f]{40}", what="a commit (40 hex digits)",
                           example="7caef27c204d304623eda21f23e7d56c1ad78d36")
    postgresql_version: int = required(least=10, example=15, note="the PostgreSQL version the rules are read for")
    os: str = required(choices=("linux",), what="an operating system pgtune.py computes for")
    db_size: str = required(choices=("mid_ram",), what="a database size pgtune.py computes for")


@dataclass(frozen=True, kw_only=True)
class Rules:
    """PGTune's rules that hold for every profile (see pgtune.toml for each one's meaning)."""

    checkpoint_completion_target: float = required(least=0, most=1, example=0.9)
    wal_compression: str = required(choices=WAL_COMPRESSION, what="a wal_compression")
    huge_pages_try_from_bytes: int = required(positive=True, unit="size", example="2GiB",
                                        note="huge_pages = try from this shared_buffers on")
    maintenance_work_mem_cap_bytes: int = required(positive=True, unit="size", example="8GiB")
    wal_buffers_percent: int = required(positive=True, most=100, example=3, note="of shared_buffers")
    wal_buffers_max_bytes: int = required(positive=True, unit="size", example="16MiB")
    wal_buffers_round_up_above_bytes: int = required(positive=True, unit="size", example="14MiB")
    wal_buffers_min_bytes: int = required(positive=True, unit="size", example="32KiB")
    work_mem_min_bytes: int = required(positive=True, unit="size", example="4MiB")
    work_mem_sessions_factor: int = required(positive=True, example=3)
    default_worker_processes: int = required(least=0, example=8, note="PostgreSQL's max_worker_processes")
    parallel_from_cpus: int = required(positive=True, example=4)
    parallel_workers_cap: int = required(positive=True, example=4)
    autovacuum_max_workers: tuple[tuple[Any, ...], ...] = required(
        example=[[32, 5], [16, 4]], note="[at least this many CPUs, value], first match")
    autovacuum_work_mem_bytes: int = required(positive=True, unit="size", example="2GiB")
    memory_warning_below_bytes: int = required(positive=True, unit="size", example="256MiB")
    memory_warning_above_bytes: int = required(positive=True, unit="size", example="100GiB")


@dataclass(frozen=True, kw_only=True)
class Disk:
    """One disk type's planner cost of a random page and its prefetching (Linux)."""

    random_page_cost: float = required(positive=True, example=1.1)
    effective_io_concurrency: int = required(least=0, most=1000, example=200)


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One PGTune "DB type". Fractions are (numerator, denominator) of RAM, floored in kB."""

    max_connections: int = required(positive=True, example=200)
    shared_buffers: tuple[int, ...] = required(items="sequence", example=[1, 4], note=FRACTION)
    effective_cache_size: tuple[int, ...] = required(items="sequence", example=[3, 4], note=FRACTION)
    maintenance_work_mem: tuple[int, ...] = required(items="sequence", example=[1, 16], note=FRACTION)
    min_wal_size: int = required(positive=True, unit="size", example="1GiB")
    max_wal_size: int = required(positive=True, unit="size", example="4GiB")
    default_statistics_target: int = required(least=1, most=10000, example=100)
    work_mem_divisor: int = required(positive=True, example=1, note="divides the work_mem formula's result")
    cap_workers_per_gather: bool = required(example=True)
    jit: bool | None = setting(None, example=False, note="absent: not written (PostgreSQL's default)")
    random_page_cost: float | None = setting(None, positive=True, example=4.0, note="absent: the disk's")
    outside_catalog: Mapping[str, Any] = table(note="a setting PGTune writes that the catalog lacks -> its value")


@dataclass(frozen=True, kw_only=True)
class Pgtune:
    """PGTune's rules: where they were read, the rules every profile shares, per disk type and per profile."""

    source: PgtuneSource = required()
    rules: Rules = required()
    disks: Mapping[str, Disk] = required(note=f"{', '.join(DISKS)}: each once")
    profiles: Mapping[str, Profile] = required(note="PGTune's DB type -> its rules")

    def profile(self, name: str) -> Profile:
        """Raises UsageError naming the valid profiles when ``name`` is not one."""
        if name not in self.profiles:
            raise UsageError(f"unknown PGTune profile {name!r}. Fix: choose one of {', '.join(self.profiles)}")
        return self.profiles[name]


@lru_cache(maxsize=4)
def load_pgtune(path: Path = RULES_PATH) -> Pgtune:
    """Read PGTune's rules through the schema (``Pgtune``), then check what it cannot say: every disk of
    ``DISKS`` and no other, each autovacuum pair two whole numbers, each fraction of RAM two.

    Raises:
        CatalogError: one line per problem naming the file, the field and the fix.
    """
    rules = schema.read(Pgtune, read_toml(path, CatalogError, "PGTune's rules"),
                        schema.Where(str(path), docs="docs/files.md"), CatalogError)
    problems = [f"{path}: no [disks.{name}]. Fix: add a table [disks.{name}] with random_page_cost and "
                "effective_io_concurrency (as [disks.ssd] has)" for name in DISKS if name not in rules.disks]
    problems += [f"{path}: unknown disk 'disks.{name}'. Fix: remove it, or use one of {', '.join(DISKS)}"
                 for name in rules.disks if name not in DISKS]
    problems += [f"{path}: rules.autovacuum_max_workers {list(pair)!r} is not two whole numbers [cpus, value] "
                 "above 0. Fix: e.g. autovacuum_max_workers = [[32, 5], [16, 4]]"
                 for pair in rules.rules.autovacuum_max_workers if not _whole_pair(pair)]
    problems += [f"{path}: profiles.{name}.{field} {list(fraction)!r} is not a fraction of RAM [numerator, "
                 f"denominator], 0 < numerator <= denominator. Fix: e.g. {field} = [1, 4]"
                 for name, profile in rules.profiles.items() for field, fraction in _fractions(profile).items()
                 if not _whole_pair(fraction) or fraction[0] > fraction[1]]
    if problems:
        raise CatalogError("\n".join(problems))
    return rules


def _fractions(profile: Profile) -> dict[str, tuple[int, ...]]:
    return {"shared_buffers": profile.shared_buffers, "effective_cache_size": profile.effective_cache_size,
            "maintenance_work_mem": profile.maintenance_work_mem}


def _whole_pair(pair: tuple[Any, ...]) -> bool:
    """Whether ``pair`` is two whole numbers above zero (true and false are not numbers)."""
    return len(pair) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair)
