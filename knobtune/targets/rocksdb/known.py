"""RocksDB's known configs: the tuning guide's, those published for db_bench, and the starts for point lookups.

Every one is data beside this module. ``rocksdb-guide.toml`` is the RocksDB
wiki's starting point; ``db-bench-*.toml`` are the configs RocksDB's own
benchmarks run db_bench with; all three are what ``knobtune baseline rocksdb
[--name N]`` prints. ``rocksdb-point-lookups.toml`` holds the starts for a
workload that reads single keys and never scans: the data set held in a hash
memtable, with and without universal compaction (the file says where it comes
from and what it measured). Its ``[config]`` is shared, each ``[data_sized]``
knob is a fraction of the workload's data set, and each of its ``[variants]``
is one start. Which workloads read single keys only is the target's to say.
Nothing here runs a process.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, KnobtuneError, UsageError
from knobtune.knobs.catalog import Catalog, Value
from knobtune.targets._base import KnownConfig
from knobtune.targets._heuristics import HeuristicConfig, Machine, fixed_config
from knobtune.workloads import Workload

DATA_DIR = Path(__file__).parent
GUIDE = "rocksdb-guide"  # the heuristic RocksDB users start from
PUBLISHED = ("db-bench-leveled", "db-bench-universal")  # configs published for db_bench (to compare)
POINT_LOOKUPS = "rocksdb-point-lookups"


def compute(name: str, machine: Machine, profile: str | None) -> HeuristicConfig:
    """What `knobtune baseline rocksdb` computes: the fixed config ``name`` (the same on every machine).

    Raises:
        UsageError: a ``profile`` is given (a fixed config has none).
        CatalogError: the file names a knob the catalog lacks or a value it refuses.
    """
    if profile is not None:
        raise UsageError(f"{name} has no profiles (it is one config). Fix: leave out --profile")
    return fixed_config("rocksdb", DATA_DIR / f"{name}.toml", machine)


def guide_config(catalog: Catalog) -> KnownConfig:
    """The RocksDB wiki's starting point ("Setup Options and Basic Tuning"), the same on every machine.

    Raises:
        CatalogError: its file names a knob the catalog lacks or a value it refuses.
    """
    guide = compute(GUIDE, Machine.from_host(), None)
    return KnownConfig(guide.name, dict(catalog.changed(catalog.config(guide.config))), guide.source.get("page", guide.name))


def point_lookup_configs(catalog: Catalog, workload: Workload) -> tuple[KnownConfig, ...]:
    """The starts for ``workload`` (tried first, not verified beside: knobtune's own, not a published heuristic).

    Raises:
        CatalogError: the file names a knob the catalog lacks, a value or a fraction it refuses.
    """
    starts = point_lookup_starts(catalog, workload.records * (workload.key_size + workload.value_size),
                                 workload.key_size)
    return tuple(KnownConfig(label, changed, point_lookup_source(), beside=False) for label, changed in starts.items())


def point_lookup_starts(catalog: Catalog, data_bytes: int, key_size: int) -> dict[str, dict[str, Value]]:
    """The starts for a workload of ``data_bytes`` (records x (key + value)) whose keys are ``key_size`` bytes,
    as label -> changed knobs; none for another system's catalog, or for keys shorter than the prefix the file's
    memtable hashes.

    Raises:
        CatalogError: the file names a knob the catalog lacks, a value or a fraction it refuses.
    """
    if catalog.system != "rocksdb":
        return {}
    path = DATA_DIR / f"{POINT_LOOKUPS}.toml"
    data = _read(path)
    shared = dict(data.get("config", {}))
    if key_size < int(shared.get("prefix_size", 0)):
        return {}
    try:
        sized = {knob: _data_sized(catalog, knob, fraction, data_bytes)
                 for knob, fraction in data.get("data_sized", {}).items()}
        return {label: catalog.changed(catalog.config({**shared, **sized, **own}))
                for label, own in data["variants"].items()}
    except (KnobtuneError, KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"{path}: {exc}. Fix: use the {catalog.system} catalog's knob names and value types, "
                           "fractions between 0 and 1 under [data_sized], and at least one [variants] table") from None


def point_lookup_source() -> str:
    """Where the point-lookup starts come from: their file, and the page their source table names."""
    page = _read(DATA_DIR / f"{POINT_LOOKUPS}.toml").get("source", {}).get("page", "")
    return f"knobtune/targets/rocksdb/{POINT_LOOKUPS}.toml" + (f" ({page})" if page else "")


def _data_sized(catalog: Catalog, name: str, fraction: Any, data_bytes: int) -> int:
    """``fraction`` of the data set for knob ``name``, never below its default nor above its range."""
    knob = catalog[name]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"[data_sized] {name} = {fraction!r} is not a fraction of the data set in (0, 1]")
    wanted = max(int(fraction * data_bytes), int(knob.default))
    return min(wanted, int(knob.max)) if knob.max is not None else wanted


@lru_cache(maxsize=None)
def _read(path: Path) -> dict[str, Any]:
    return read_toml(path, CatalogError, "starting configs")
