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

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import CatalogError
from knobtune.schema import TEXT, required, setting, table

UNITS = ("s", "bytes", "count", "ratio")


@dataclass(frozen=True, kw_only=True)
class Counter:
    """What one counter means, in which unit, and how each driver reads it (``[counters.NAME]``)."""

    meaning: str = required(**TEXT, example="seconds writes were stalled", note="what a person reads")
    unit: str = required(choices=UNITS, what="a counter's unit")
    read: str = required(**TEXT, example="ticker rocksdb.stall.micros", note="where each driver reads it")
    cost: str = setting("", example="GC pauses", note="a cost the system pays beyond the objective, by this name: "
                        "the verdict shows its median over the verification runs beside peak memory")


@dataclass(frozen=True)
class CountersFile:
    """A system's counter descriptions (``systems/SYSTEM/counters.toml``), by name."""

    counters: Mapping[str, Counter] = table()


@dataclass(frozen=True)
class CounterDoc:
    """What one counter means, in which unit, and how each driver reads it."""

    name: str
    meaning: str
    unit: str  # one of UNITS
    read: str
    cost: str = ""  # the name the verdict's costs give it ("": the counter is no cost shown there)


@cache
def described_counters(path: Path) -> Mapping[str, CounterDoc]:
    """The counters a ``counters.toml`` describes, by name (empty when there is no such file), read through the
    schema (``CountersFile``). Every system's run counters are described this way, and a test checks that every
    counter a real run emits is here.

    Raises:
        CatalogError: the file is not valid TOML, or a field is unknown, missing, blank or of the wrong kind, or a
            unit is unknown: one line per problem.
    """
    if not path.exists():
        return {}
    document = schema.read(CountersFile, read_toml(path, CatalogError, "counter descriptions"),
                           schema.Where(str(path), docs="docs/diagnosis.md"), CatalogError)
    return {name: CounterDoc(name, c.meaning.strip(), c.unit, c.read.strip(), c.cost.strip())
            for name, c in document.counters.items()}


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
