"""The embedded stores' own counters: real db_bench and kvbench runs at tiny sizes, every counter described."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.knobs import load_catalog
from knobtune.targets import Measurement, make_target
from knobtune.targets._counters import UNITS, described_counters, with_ratios
from knobtune.targets.rocksdb.db_bench_counters import parse_counters

from conftest import tiny

RECORDS = 20000  # 8 MB of 400-byte values through 1 MiB memtables: flushes, compactions, reads from table files
SMALL_MEMTABLES = {"write_buffer_size": "1MiB"}


def _run(system: str, driver: str, tmp_path: Path, changes: dict, *, settle: bool = False) -> Measurement:
    catalog = load_catalog(system)
    workload = tiny("readrandom", RECORDS)
    with make_target(catalog, workload, tmp_path / "scratch", driver, settle=settle) as target:
        target.apply(catalog.config(changes))
        return target.run(workload.full, timeout_s=120, log_path=tmp_path / "run.log", seed=5)


def _check_described(system: str, counters: dict[str, float]) -> None:
    described = described_counters(system)
    assert set(counters) <= set(described), f"not in {system}/counters.toml: {set(counters) - set(described)}"
    for name, value in counters.items():
        assert value >= 0, (name, value)
        if described[name].unit == "ratio" and not name.startswith(("stall_share", "write_amplification")):
            assert value <= 1, (name, value)


def _check_rocksdb(counters: dict[str, float]) -> None:
    assert counters["user_bytes_written"] > RECORDS * 400  # the fill wrote every value
    assert counters["flush_write_bytes"] > 0
    assert counters["block_cache_hit"] + counters["block_cache_miss"] > 0  # the reads went to table files
    assert 0 <= counters["block_cache_hit_ratio"] <= 1
    assert counters["bloom_useful"] + counters["bloom_full_positive"] > 0  # a filter: 10 bits per key
    assert counters["memtable_hit"] + counters["memtable_miss"] >= RECORDS  # every read asked the memtable first
    assert counters["write_amplification"] >= 0 and 0 <= counters["stall_share"] < 1
    for name in ("stall_s", "stalls_level0", "stalls_pending_compaction", "stalls_memtable", "l0_files_end",
                 "compact_write_bytes", "compact_read_bytes"):
        assert name in counters


def test_every_counter_file_is_valid() -> None:
    for system in ("rocksdb", "leveldb"):
        described = described_counters(system)
        assert described and all(doc.unit in UNITS for doc in described.values())
    assert described_counters("cassandra") == {}


def test_db_bench_run_counts_and_keeps_its_counters_through_the_settle(tmp_path: Path) -> None:
    measurement = _run("rocksdb", "db_bench", tmp_path, {**SMALL_MEMTABLES, "bloom_bits": 10}, settle=True)
    assert measurement.settle is not None
    counters = dict(measurement.counters)
    _check_described("rocksdb", counters)
    _check_rocksdb(counters)
    assert "pending_compaction_bytes_end" not in counters  # db_bench prints no such figure
    assert measurement.summary()["counters"] == counters


def test_kvbench_rocksdb_run_counts_in_the_same_names(tmp_path: Path) -> None:
    measurement = _run("rocksdb", "kvbench", tmp_path, {**SMALL_MEMTABLES, "bloom_bits": 10})
    counters = dict(measurement.counters)
    _check_described("rocksdb", counters)
    _check_rocksdb(counters)
    assert counters["pending_compaction_bytes_end"] >= 0


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
Cumulative stall: 00:00:1.500 H:M:S, 2.0 percent
STATISTICS:
rocksdb.block.cache.miss COUNT : 2035
rocksdb.block.cache.hit COUNT : 159705
rocksdb.stall.micros COUNT : 1250000
rocksdb.bytes.written COUNT : 6550000
rocksdb.flush.write.bytes COUNT : 3116944
rocksdb.compact.write.bytes COUNT : 1376530
rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 P99 : 3.0 P100 : 4.0 COUNT : 9 SUM : 10
"""
    counters = parse_counters(text)
    assert counters == {"l0_files_end": 3, "stalls_level0": 5, "stalls_pending_compaction": 9, "stalls_memtable": 13,
                        "block_cache_miss": 2035, "block_cache_hit": 159705, "stall_s": 1.25,
                        "user_bytes_written": 6550000, "flush_write_bytes": 3116944, "compact_write_bytes": 1376530}
    without_tickers = parse_counters(text.split("STATISTICS:")[0])
    assert without_tickers["stall_s"] == 1.5  # the DB stats' cumulative stall
    ratios = with_ratios(counters, workload_s=10.0)
    assert ratios["stall_share"] == pytest.approx(0.125)
    assert ratios["write_amplification"] == pytest.approx((3116944 + 1376530) / 6550000)
    assert "bloom_useful_ratio" not in ratios  # no filter counts: no ratio made up
