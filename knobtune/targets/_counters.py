"""A system's own counters over a run: what each means (a data file per system), and the embedded stores' ratios.

Every driver of one system reports its counters under one vocabulary
(snake_case, the unit in the name), so that a diagnosis rule is written once per
system: ``systems/SYSTEM/counters.toml`` describes each name, its unit and
where each driver reads it. A driver gives the counts; ``with_ratios`` derives
the shares and ratios from them, the same way for every driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError

UNITS = ("s", "bytes", "count", "ratio")
_FIELDS = ("meaning", "unit", "read")


@dataclass(frozen=True)
class CounterDoc:
    """What one counter means, in which unit, and how each driver reads it."""

    name: str
    meaning: str
    unit: str  # one of UNITS
    read: str


@cache
def described_counters(path: Path) -> Mapping[str, CounterDoc]:
    """The counters a ``counters.toml`` describes, by name (empty when there is no such file). Every system's run
    counters are described this way, and a test checks that every counter a real run emits is here.

    Raises:
        CatalogError: the file is not valid TOML, or an entry is not a table, lacks a field, has another, or names
            an unknown unit.
    """
    if not path.exists():
        return {}
    docs = {}
    for name, fields in read_toml(path, CatalogError, "counter descriptions").get("counters", {}).items():
        if not isinstance(fields, dict):
            raise CatalogError(f"{path}: counter '{name}' is not a table. Fix: write it as [counters.{name}]")
        missing = [f for f in _FIELDS if not isinstance(fields.get(f), str) or not fields[f].strip()]
        if missing or set(fields) - set(_FIELDS):
            raise CatalogError(f"{path}: counter '{name}' needs meaning, unit and read as text, and nothing else "
                               f"(has {sorted(fields)}). Fix: write the missing fields")
        if fields["unit"] not in UNITS:
            raise CatalogError(f"{path}: counter '{name}': unit '{fields['unit']}' is unknown. "
                               f"Fix: use one of {', '.join(UNITS)}")
        docs[name] = CounterDoc(name, fields["meaning"].strip(), fields["unit"], fields["read"].strip())
    return docs


def numbers(stats: Mapping[str, object]) -> dict[str, float]:
    """The numeric counters of a driver's stats (lists such as files per level are left out)."""
    return {name: float(value) for name, value in stats.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


def with_ratios(counts: Mapping[str, float], workload_s: float) -> dict[str, float]:
    """``counts`` plus the ratios whose parts are there: ``stall_share`` (of ``workload_s``, the workload's own
    seconds), ``block_cache_hit_ratio``, ``bloom_useful_ratio`` (of the filter's answers, those that saved a
    read) and ``write_amplification`` ((flush + compaction writes) / user writes). A ratio whose denominator is 0
    (no reads of the cache, no filter, no writes) is left out rather than made up."""
    counters = dict(counts)

    def share(name: str, part: float, whole: float) -> None:
        if whole > 0:
            counters[name] = part / whole

    if "stall_s" in counts:
        share("stall_share", counts["stall_s"], workload_s)
    if "block_cache_hit" in counts and "block_cache_miss" in counts:
        share("block_cache_hit_ratio", counts["block_cache_hit"],
              counts["block_cache_hit"] + counts["block_cache_miss"])
    if "bloom_useful" in counts and "bloom_full_positive" in counts:
        share("bloom_useful_ratio", counts["bloom_useful"], counts["bloom_useful"] + counts["bloom_full_positive"])
    if "user_bytes_written" in counts and "compact_write_bytes" in counts:
        share("write_amplification", counts.get("flush_write_bytes", 0.0) + counts["compact_write_bytes"],
              counts["user_bytes_written"])
    return counters
