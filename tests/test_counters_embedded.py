"""The embedded stores' own counters: real db_bench and kvbench runs at tiny sizes, every counter described."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.knobs import load_catalog
from knobtune.targets import UNITS, Measurement, with_ratios
from knobtune.systems import make_target
from knobtune.tuning.search import counter_meanings
from knobtune.systems.rocksdb.db_bench import parse_output
from knobtune.systems.rocksdb.db_bench_counters import parse_counters, parse_event_log

from conftest import tiny

RECORDS = 20000  # 8 MB of 400-byte values through 1 MiB memtables: flushes, compactions, reads from table files
SMALL_MEMTABLES = {"write_buffer_size": "1MiB"}


def _run(system: str, driver: str, tmp_path: Path, changes: dict, **options: object) -> Measurement:
    catalog = load_catalog(system)
    workload = tiny("readrandom", RECORDS)
    options = {"settle": False, **options}
    with make_target(catalog, workload, tmp_path / "scratch", driver, **options) as target:
        return target.run(catalog.config(changes), workload.full, timeout_s=120, log_path=tmp_path / "run.log", seed=5)


def _check_described(system: str, counters: dict[str, float]) -> None:
    described = counter_meanings(system)
    assert set(counters) <= set(described), f"not in {system}/counters.toml: {set(counters) - set(described)}"
    for name, value in counters.items():
        assert value >= 0, (name, value)
        if described[name].unit == "ratio" and not name.startswith(("stall_share", "write_amplification")):
            assert value <= 1, (name, value)


def _check_rocksdb_writes(counters: dict[str, float]) -> None:
    assert counters["user_bytes_written"] > RECORDS * 400  # the fill wrote every value
    assert counters["flush_write_bytes"] > 0
    assert counters["write_amplification"] >= 0 and 0 <= counters["stall_share"] < 1
    for name in ("stall_s", "stalls_level0", "stalls_pending_compaction", "stalls_memtable", "l0_files_end",
                 "compact_write_bytes", "compact_read_bytes"):
        assert name in counters


def _check_rocksdb_reads(counters: dict[str, float]) -> None:
    assert counters["block_cache_hit"] + counters["block_cache_miss"] > 0  # the reads went to table files
    assert 0 <= counters["block_cache_hit_ratio"] <= 1
    assert counters["bloom_useful"] + counters["bloom_full_positive"] > 0  # a filter: 10 bits per key
    assert counters["memtable_hit"] + counters["memtable_miss"] >= RECORDS  # every read asked the memtable first


def test_every_counter_file_is_valid() -> None:
    for system in ("rocksdb", "leveldb", "postgresql", "cassandra"):
        described = counter_meanings(system)
        assert described and all(doc.unit in UNITS for doc in described.values())


def test_db_bench_run_counts_the_free_counters_and_keeps_them_through_the_settle(tmp_path: Path) -> None:
    measurement = _run("rocksdb", "db_bench", tmp_path, {**SMALL_MEMTABLES, "bloom_bits": 10}, settle=True)
    assert measurement.settle is not None
    counters = dict(measurement.counters)
    _check_described("rocksdb", counters)
    _check_rocksdb_writes(counters)
    assert "block_cache_hit" not in counters and "pending_compaction_bytes_end" not in counters  # not asked; none
    assert measurement.summary()["counters"] == counters


def test_db_bench_run_asked_for_tickers_counts_the_reads_too(tmp_path: Path) -> None:
    counters = dict(_run("rocksdb", "db_bench", tmp_path, {**SMALL_MEMTABLES, "bloom_bits": 10},
                         ticker_counters=True).counters)
    _check_described("rocksdb", counters)
    _check_rocksdb_writes(counters)
    _check_rocksdb_reads(counters)


@pytest.mark.parametrize("tickers", [False, True], ids=["free", "tickers"])
def test_kvbench_rocksdb_run_counts_in_the_same_names(tickers: bool, tmp_path: Path) -> None:
    measurement = _run("rocksdb", "kvbench", tmp_path, {**SMALL_MEMTABLES, "bloom_bits": 10}, ticker_counters=tickers)
    counters = dict(measurement.counters)
    _check_described("rocksdb", counters)
    _check_rocksdb_writes(counters)
    assert counters["pending_compaction_bytes_end"] >= 0
    if tickers:
        _check_rocksdb_reads(counters)
    else:
        assert "block_cache_hit" not in counters  # not asked
    assert ('"statistics": true' in (tmp_path / "run.spec.json").read_text()) is tickers


def test_kvbench_leveldb_run_counts(tmp_path: Path) -> None:
    counters = dict(_run("leveldb", "kvbench", tmp_path, SMALL_MEMTABLES).counters)
    _check_described("leveldb", counters)
    assert counters["user_bytes_written"] == RECORDS * (16 + 400)  # every key and value once
    assert counters["compact_write_bytes"] > 0  # the flushes (whole MiB)
    assert counters["max_level0_files"] >= counters["l0_files_end"]
    assert counters["write_amplification"] > 0
    assert counters["slow_writes"] >= 0 and counters["stall_s"] >= 0.001 * counters["slow_writes"]
    assert 0 <= counters["stall_share"] < 1


def test_db_bench_text_gives_the_tickers_the_stall_causes_and_level0() -> None:
    text = """\
** Compaction Stats [default] **
Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp
  L0      3/1    1.28 MB   0.8      0.0     0.0      0.0       0.0      0.0       0.0   1.0
  L1      1/0    1.31 MB   0.0      0.0     0.0      0.0       0.0      0.0       0.0   0.8
Stalls(count): 2 level0_slowdown, 1 level0_slowdown_with_compaction, 3 level0_numfiles, 0 level0_numfiles_with_compaction, 4 stop for pending_compaction_bytes, 5 slowdown for pending_compaction_bytes, 6 memtable_compaction, 7 memtable_slowdown, interval 27 total count
** DB Stats **
Uptime(secs): 3.0 total, 3.0 interval
Cumulative writes: 50K writes, 50K keys, 50K commit groups, 1.0 writes per commit group, ingest: 0.01 GB, 2.08 MB/s
Cumulative stall: 00:00:1.500 H:M:S, 2.0 percent
Interval writes: 50K writes, 50K keys, 50K commit groups, 1.0 writes per commit group, ingest: 6.25 MB, 2.08 MB/s
STATISTICS:
rocksdb.block.cache.miss COUNT : 2035
rocksdb.block.cache.hit COUNT : 159705
rocksdb.stall.micros COUNT : 1250000
rocksdb.bytes.written COUNT : 6550000
rocksdb.flush.write.bytes COUNT : 3116944
rocksdb.compact.write.bytes COUNT : 1376530
rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 P99 : 3.0 P100 : 4.0 COUNT : 9 SUM : 10
"""  # noqa: E501 (db_bench's own output, verbatim)
    counters = parse_counters(text)
    assert counters == {"l0_files_end": 3, "stalls_level0": 5, "stalls_pending_compaction": 9, "stalls_memtable": 13,
                        "block_cache_miss": 2035, "block_cache_hit": 159705, "stall_s": 1.25,
                        "user_bytes_written": 6550000, "flush_write_bytes": 3116944, "compact_write_bytes": 1376530}
    free = parse_counters(text.split("STATISTICS:")[0])
    assert free["stall_s"] == 1.5  # the DB stats' cumulative stall
    assert free["user_bytes_written"] == 6.25 * 2**20  # the interval's ingest: no periodic dump came before
    dumped = parse_counters(text.split("STATISTICS:")[0].replace("3.0 total, 3.0 interval",
                                                                 "700.0 total, 100.0 interval"))
    assert dumped["user_bytes_written"] == 0.01 * 2**30  # after a periodic dump the interval is not the run
    ratios = with_ratios(counters, workload_s=10.0)
    assert ratios["stall_share"] == pytest.approx(0.125)
    assert ratios["write_amplification"] == pytest.approx((3116944 + 1376530) / 6550000)
    assert "bloom_useful_ratio" not in ratios  # no filter counts: no ratio made up


def test_rocksdb_log_gives_flush_and_compaction_bytes() -> None:
    log = """\
2026/11/25-12:02:11.5 21120 EVENT_LOG_v1 {"time_micros": 1, "job": 2, "event": "flush_started", "num_memtables": 1}
2026/11/25-12:02:11.5 21120 EVENT_LOG_v1 {"time_micros": 2, "cf_name": "default", "job": 2, "event": "table_file_creation", "file_number": 9, "file_size": 446616}
2026/11/25-12:02:11.9 21119 EVENT_LOG_v1 {"time_micros": 3, "job": 6, "event": "compaction_started", "input_data_size": 1777135}
2026/11/25-12:02:11.9 21119 EVENT_LOG_v1 {"time_micros": 4, "cf_name": "default", "job": 6, "event": "table_file_creation", "file_number": 22, "file_size": 1376530}
2026/11/25-12:02:11.9 21119 (Original Log Time 2026/11/25-12:02:11.998757) EVENT_LOG_v1 {"time_micros": 5, "job": 6, "event": "compaction_finished", "total_output_size": 1376530}
2026/11/25-12:02:12.0 21119 EVENT_LOG_v1 {"time_micros": 6, "job": 7, "event": "flush_sta
"""  # noqa: E501 (a RocksDB LOG, verbatim)
    assert parse_event_log(log) == {"flush_write_bytes": 446616, "compact_read_bytes": 1777135,
                                    "compact_write_bytes": 1376530}
    assert parse_event_log("") == {}


def test_the_stats_benchmarks_histograms_are_not_the_last_phases_latency() -> None:
    text = """\
readrandom   :       6.041 micros/op 165447 ops/sec 0.121 seconds 20000 operations;   11.8 MB/s (12860 of 20000 found)
Min: 0  Median: 2.3  Max: 4400
Percentiles: P50: 2.36 P75: 3.34 P99: 9.98 P99.9: 96.40 P99.99: 4400.00
** File Read Latency Histogram By Level [default] **
** Level 0 read latency histogram (micros):
Min: 1  Median: 1.0  Max: 25
Percentiles: P50: 1.00 P75: 1.14 P99: 5.31 P99.9: 25.00 P99.99: 25.00
"""
    (read,) = parse_output(text)
    assert (read.p50_us, read.p99_us, read.max_us) == (2.36, 9.98, 4400)


@pytest.mark.parametrize("driver", ["db_bench", "kvbench"])
def test_a_twin_keeps_the_ask_for_tickers(driver: str, tmp_path: Path) -> None:
    target = make_target(load_catalog("rocksdb"), tiny("fillrandom", 100), tmp_path, driver, ticker_counters=True)
    twin = target.twin()
    assert twin is not None and twin.ticker_counters
