"""RocksDB's own counters from db_bench's text: the ``--statistics`` tickers and the ``stats`` benchmark's output.

db_bench prints two things that hold them, both at the end of the workload and
before db_bench exits (so before the settle):

- ``STATISTICS:``, one line per ticker (``rocksdb.stall.micros COUNT : 12``),
  with ``--statistics``; cumulative over the whole run, reopens included.
- the ``rocksdb.stats`` property, when the benchmark list ends with ``stats``:
  the compaction table (level 0's ``files/compacting``), ``Stalls(count): ...``
  and ``Cumulative stall: H:M:S``. These count since the store was last opened:
  db_bench reopens a fresh store for every fill benchmark, so after two fills
  they cover the second one only.

Names are the vocabulary of ``counters.toml`` beside this module, shared with kvbench.
"""

from __future__ import annotations

import re

# ticker -> (counter, factor to its unit)
TICKERS: dict[str, tuple[str, float]] = {
    "rocksdb.stall.micros": ("stall_s", 1e-6),
    "rocksdb.block.cache.hit": ("block_cache_hit", 1.0),
    "rocksdb.block.cache.miss": ("block_cache_miss", 1.0),
    "rocksdb.bloom.filter.useful": ("bloom_useful", 1.0),
    "rocksdb.bloom.filter.full.positive": ("bloom_full_positive", 1.0),
    "rocksdb.memtable.hit": ("memtable_hit", 1.0),
    "rocksdb.memtable.miss": ("memtable_miss", 1.0),
    "rocksdb.bytes.written": ("user_bytes_written", 1.0),
    "rocksdb.flush.write.bytes": ("flush_write_bytes", 1.0),
    "rocksdb.compact.write.bytes": ("compact_write_bytes", 1.0),
    "rocksdb.compact.read.bytes": ("compact_read_bytes", 1.0),
}
# the causes of "Stalls(count)" -> the counter that sums them (the "_with_compaction" ones are subsets: left out)
STALL_CAUSES: dict[str, str] = {
    "level0_slowdown": "stalls_level0", "level0_numfiles": "stalls_level0",
    "stop for pending_compaction_bytes": "stalls_pending_compaction",
    "slowdown for pending_compaction_bytes": "stalls_pending_compaction",
    "memtable_compaction": "stalls_memtable", "memtable_slowdown": "stalls_memtable",
}

_TICKER = re.compile(r"^(rocksdb\.[\w.]+) COUNT : (\d+)$")
_STALLS = re.compile(r"^Stalls\(count\): (.*)$")
_STALL_CAUSE = re.compile(r"(\d+) ([a-z0-9_ ]+?)\s*(?:,|$)")
_CUMULATIVE_STALL = re.compile(r"^Cumulative stall: (\d+):(\d+):([\d.]+) H:M:S")
_LEVEL0 = re.compile(r"^L0\s+(\d+)/\d+\s")


def parse_counters(text: str) -> dict[str, float]:
    """The counters db_bench printed (none when it printed neither its statistics nor ``stats``).

    The stall time is the ``rocksdb.stall.micros`` ticker when printed, else the DB stats' cumulative stall
    (the same clock, in milliseconds).
    """
    counters: dict[str, float] = {}
    stats_stall_s: float | None = None
    for line in (raw.strip() for raw in text.splitlines()):
        if match := _TICKER.match(line):
            if match.group(1) in TICKERS:
                name, factor = TICKERS[match.group(1)]
                counters[name] = int(match.group(2)) * factor
        elif match := _STALLS.match(line):
            for count, cause in _STALL_CAUSE.findall(match.group(1)):
                if cause in STALL_CAUSES:
                    name = STALL_CAUSES[cause]
                    counters[name] = counters.get(name, 0.0) + int(count)
        elif match := _CUMULATIVE_STALL.match(line):
            hours, minutes, seconds = match.groups()
            stats_stall_s = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        elif (match := _LEVEL0.match(line)) and "l0_files_end" not in counters:
            counters["l0_files_end"] = float(match.group(1))  # the first table: by level (the second: by priority)
    if "stall_s" not in counters and stats_stall_s is not None:
        counters["stall_s"] = stats_stall_s
    return counters
