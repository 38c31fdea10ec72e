"""RocksDB's own counters from what db_bench leaves: its text output and the store's LOG.

db_bench gives them in three places, all written before it exits (so before the settle):

- the ``rocksdb.stats`` property, printed when the benchmark list ends with
  ``stats``: the compaction table (level 0's ``files/compacting``),
  ``Stalls(count): ...``, the DB stats' ``Cumulative stall`` and the bytes the
  writes carried (``ingest``). Free: RocksDB keeps these internal stats anyway.
- the store's ``LOG``, whose ``EVENT_LOG_v1`` lines give every flush's table
  files and every compaction's input and output bytes. Free as well.
- ``STATISTICS:``, one line per ticker (``rocksdb.stall.micros COUNT : 12``),
  only with ``--statistics``, which costs (docs/rocksdb.md, "Counters"): the
  block cache, bloom filter and memtable counts come only from there. Where
  a ticker and a free figure say the same, the ticker wins.

The stats and the LOG count since the store was last opened: db_bench reopens
a fresh store for every fill benchmark, so after two fills they cover the
second one only. The tickers are cumulative over the whole run.

Names are the vocabulary of ``counters.toml`` beside this module, shared with kvbench.
"""

from __future__ import annotations

import json
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
_UPTIME = re.compile(r"^Uptime\(secs\): ([\d.]+) total, ([\d.]+) interval")
_INGEST = re.compile(r"^(Cumulative|Interval) writes: .*ingest: ([\d.]+) (GB|MB)")
_UNIT_BYTES = {"GB": 1 << 30, "MB": 1 << 20}  # RocksDB's stats print binary units
_EVENT = "EVENT_LOG_v1 "


def parse_counters(output: str, event_log: str = "") -> dict[str, float]:
    """The counters in db_bench's ``output`` and the store's LOG text (``event_log``); the tickers win."""
    return {**parse_event_log(event_log), **_parse_stats(output), **_parse_tickers(output)}


def _parse_tickers(text: str) -> dict[str, float]:
    counters: dict[str, float] = {}
    for line in text.splitlines():
        if (match := _TICKER.match(line.strip())) and match.group(1) in TICKERS:
            name, factor = TICKERS[match.group(1)]
            counters[name] = int(match.group(2)) * factor
    return counters


def _parse_stats(text: str) -> dict[str, float]:
    """The stats benchmark's stall causes, stall time, level-0 files and write bytes.

    The bytes: the ``Interval writes`` line (MiB, two decimals) when no periodic dump came before it (its
    uptime's interval is the total), else the ``Cumulative writes`` line (GiB, two decimals).
    """
    counters: dict[str, float] = {}
    since_open = False
    for line in (raw.strip() for raw in text.splitlines()):
        if match := _STALLS.match(line):
            for count, cause in _STALL_CAUSE.findall(match.group(1)):
                if cause in STALL_CAUSES:
                    name = STALL_CAUSES[cause]
                    counters[name] = counters.get(name, 0.0) + int(count)
        elif match := _CUMULATIVE_STALL.match(line):
            hours, minutes, seconds = match.groups()
            counters["stall_s"] = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        elif (match := _LEVEL0.match(line)) and "l0_files_end" not in counters:
            counters["l0_files_end"] = float(match.group(1))  # the first table: by level (the second: by priority)
        elif match := _UPTIME.match(line):
            since_open = match.group(1) == match.group(2)
        elif match := _INGEST.match(line):
            if match.group(1) == "Cumulative" or since_open:
                counters["user_bytes_written"] = float(match.group(2)) * _UNIT_BYTES[match.group(3)]
    return counters


def parse_event_log(text: str) -> dict[str, float]:
    """Flush and compaction bytes from a RocksDB LOG's event lines (none when it has none).

    A flush's bytes are the table files created by a flush job; a compaction's, its ``input_data_size`` and
    ``total_output_size``. They agree with the tickers to within 0.5% (the tickers count a little more I/O).
    """
    flush_jobs: set[int] = set()
    tables: list[tuple[int, int]] = []
    counters: dict[str, float] = {}
    for line in text.splitlines():
        at = line.find(_EVENT)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(_EVENT):])
        except ValueError:
            continue  # a line cut short by the crash that ended the run
        kind = event.get("event")
        if kind == "flush_started":
            flush_jobs.add(event.get("job"))
        elif kind == "table_file_creation":
            tables.append((event.get("job"), int(event.get("file_size", 0))))
        elif kind == "compaction_started":
            counters["compact_read_bytes"] = counters.get("compact_read_bytes", 0.0) + event.get("input_data_size", 0)
        elif kind == "compaction_finished":
            counters["compact_write_bytes"] = (counters.get("compact_write_bytes", 0.0)
                                               + event.get("total_output_size", 0))
    if not text.strip():
        return counters
    counters.setdefault("compact_read_bytes", 0.0)
    counters.setdefault("compact_write_bytes", 0.0)
    counters["flush_write_bytes"] = float(sum(size for job, size in tables if job in flush_jobs))
    return counters
