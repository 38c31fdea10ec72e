"""Which RocksDB knobtune measures: the release build ``scripts/rocksdb-release`` makes, as users deploy RocksDB.

Debian's ``rocksdb-tools`` and ``librocksdb-dev`` are built without ``NDEBUG``:
every call checks its assertions (db_bench warns "Assertions are enabled;
benchmarks unnecessarily slow"), which costs up to 1.4x and not evenly across
configs. The set-up builds the same source (Debian's source package) in release
mode into a cache folder outside the checkout; db_bench is taken from there and
kvbench is linked with its library. ``$KNOBTUNE_DB_BENCH`` names another
db_bench; a db_bench found only on PATH is used with its build said.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from knobtune.errors import ToolMissingError
from knobtune.installing import setup_fix

RELEASE_ENV = "KNOBTUNE_ROCKSDB_RELEASE"  # the install prefix of a release build (default: the set-up's cache)
DB_BENCH_ENV = "KNOBTUNE_DB_BENCH"
BUILD_HINT = setup_fix("rocksdb", "it builds RocksDB in release mode with scripts/rocksdb-release")
ASSERTIONS_WARNING = "Assertions are enabled"  # what an assertion-enabled db_bench prints before every run


@dataclass(frozen=True)
class Build:
    """One RocksDB build: where its db_bench is and what it is."""

    db_bench: str
    description: str  # "7.8.3 (release: Debian source package rocksdb=7.8.3-2, built by scripts/rocksdb-release)"
    release: bool  # built with NDEBUG (no assertions)


def release_prefix() -> Path | None:
    """The install folder of the release build: ``$KNOBTUNE_ROCKSDB_RELEASE``, else the newest in the cache."""
    given = os.environ.get(RELEASE_ENV)
    if given:
        return Path(given)
    cache = Path(os.environ.get("KNOBTUNE_CACHE") or Path.home() / ".cache" / "knobtune")
    built = sorted(cache.glob("rocksdb-release/*/install/BUILD.json"))
    return built[-1].parent if built else None


def rocksdb_build() -> Build:
    """The RocksDB build db_bench runs (and kvbench links, when the set-up built both).

    Raises:
        ToolMissingError: no db_bench anywhere.
    """
    given = os.environ.get(DB_BENCH_ENV)
    if given:
        return Build(given, f"the db_bench at ${DB_BENCH_ENV} ({given})", release=False)
    prefix = release_prefix()
    if prefix is not None and (prefix / "bin" / "db_bench").is_file():
        facts = json.loads((prefix / "BUILD.json").read_text())
        return Build(str(prefix / "bin" / "db_bench"), f"{facts['version']} ({facts['build_type']}: {facts['source']})",
                     release=facts.get("build_type") == "release")
    on_path = shutil.which("db_bench")
    if on_path is None:
        raise ToolMissingError(f"RocksDB's release build is not built here, and no db_bench is on PATH. {BUILD_HINT}")
    return Build(on_path, f"db_bench on PATH ({on_path}): Debian's is built with assertions on", release=False)


def find_db_bench() -> str:
    """The path of the db_bench knobtune runs (see the module's doc).

    Raises:
        ToolMissingError: none is built or installed.
    """
    return rocksdb_build().db_bench
