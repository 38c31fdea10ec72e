"""RocksDB's known configs: the tuning guide's and those published for db_bench.

Every one is data beside this module. ``rocksdb-guide.toml`` is the RocksDB
wiki's starting point; ``db-bench-*.toml`` are the configs RocksDB's own
benchmarks run db_bench with; all three are what ``knobtune baseline rocksdb
[--name N]`` prints. The starts a workload's shape or a run's counters call
for (the hash memtable for point lookups) are rules (``rules.toml``).
Nothing here runs a process.
"""

from __future__ import annotations

from pathlib import Path

from knobtune.errors import UsageError
from knobtune.knobs.catalog import Catalog
from knobtune.targets import HeuristicConfig, KnownConfig, Machine, fixed_config

DATA_DIR = Path(__file__).parent
GUIDE = "rocksdb-guide"  # the heuristic RocksDB users start from
PUBLISHED = ("db-bench-leveled", "db-bench-universal")  # configs published for db_bench (to compare)


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
    return KnownConfig(guide.name, dict(catalog.changed(catalog.config(guide.config))),
                       guide.source.get("page", guide.name))
