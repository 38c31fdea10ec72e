"""Starts from a workload's shape: the point-lookup rule of RocksDB's rules file, its sizes, and which workloads
it fires on (nothing run: the rules are read over the shape a target gives, with no counters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.analysis.diagnosis import diagnose
from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.tuning.search import rules_of
from knobtune.workloads import load_workload

ROCKSDB = load_catalog("rocksdb")
GIB = 1 << 30
RULE = "point-lookups-in-memory"


def _shape(data_bytes: int, key_size: int = 16, point_reads_only: bool = True, **more: object) -> dict:
    return {"point_reads_only": point_reads_only, "scans": False, "key_size": key_size, "data_bytes": data_bytes,
            "reads": True, "writes": True, "memory_bytes": 24 * GIB, "cores": 2, "clients": 1, "value_size": 1000,
            **more}


def _starts(data_bytes: int, key_size: int = 16, point_reads_only: bool = True) -> dict[str, dict]:
    found = diagnose(rules_of("rocksdb"), {}, _shape(data_bytes, key_size, point_reads_only), ROCKSDB.defaults())
    return {s.label: {**s.config, **s.sized} for f in found.findings if f.rule == RULE for s in f.starts}


def test_the_buffers_hold_most_of_the_data_set_in_a_hash_memtable_with_and_without_universal() -> None:
    starts = _starts(GIB)
    assert list(starts) == ["rocksdb-point-lookups", "rocksdb-point-lookups-universal"]
    level, universal = starts.values()
    assert level["memtablerep"] == "hash_linkedlist" and level["allow_concurrent_memtable_write"] is False
    assert level["write_buffer_size"] == pytest.approx(0.4 * GIB) and "compaction_style" not in level
    assert universal == {**level, "compaction_style": "universal"}


def test_data_sized_knobs_keep_to_the_default() -> None:
    small = _starts(10 << 20)["rocksdb-point-lookups"]
    assert small["write_buffer_size"] == ROCKSDB["write_buffer_size"].default  # 4 MiB is below the default's 64 MiB


def test_keys_shorter_than_the_hashed_prefix_and_scans_get_none() -> None:
    assert _starts(GIB, key_size=8) == {}
    assert _starts(GIB, point_reads_only=False) == {}


@pytest.mark.parametrize(("workload", "driver", "offered"), [
    ("put-get-delete", "db_bench", True),
    ("readrandom", "db_bench", True),
    ("fillrandom", "db_bench", False),  # no reads: the reopen replays what the buffers held (0.81x measured)
    ("ycsb-c", "kvbench", True),
    ("ycsb-a", "kvbench", True),
    ("ycsb-e", "kvbench", False),  # scans
    ("readseq", "kvbench", False),
])
def test_the_rule_fires_on_workloads_that_read_single_keys_and_never_scan(
        tmp_path: Path, workload: str, driver: str, offered: bool) -> None:
    target = make_target(ROCKSDB, load_workload(workload), tmp_path, driver)
    found = diagnose(rules_of("rocksdb"), {}, target.workload_facts().shape(), ROCKSDB.defaults())
    assert (RULE in found.fired()) is offered
    assert [k.label for k in target.known_configs()] == (["rocksdb-guide"] if driver == "db_bench" else [])


@pytest.mark.parametrize(("workload", "driver", "offered"), [
    ("fillrandom", "db_bench", True),
    ("fillrandom", "kvbench", True),
    ("put-get-delete", "db_bench", False),  # reads: a read from a vector memtable scans it whole
    ("readwhilewriting", "db_bench", False),
    ("ycsb-a", "kvbench", False),
])
def test_a_workload_that_only_writes_starts_from_a_vector_memtable(
        tmp_path: Path, workload: str, driver: str, offered: bool) -> None:
    target = make_target(ROCKSDB, load_workload(workload), tmp_path, driver)
    found = diagnose(rules_of("rocksdb"), {}, target.workload_facts().shape(), ROCKSDB.defaults())
    starts = [s for f in found.findings if f.rule == "writes-only" for s in f.starts]
    assert bool(starts) is offered
    if offered:
        (start,) = starts
        assert start.config["memtablerep"] == "vector" and start.config["allow_concurrent_memtable_write"] is False
        assert ROCKSDB.unsafe_in(ROCKSDB.config(start.config)) == {}, "the script's WAL off stays out"


def test_a_verdict_names_the_known_config_the_result_is() -> None:
    from knobtune.analysis import noise, speedup
    from knobtune.tuning.proof import verdict
    from knobtune.tuning.proof import Candidate, CandidateRuns, Comparison
    from knobtune.workloads import Objective, Rung

    default = CandidateRuns(Candidate("default", {}), values=[6.0, 6.2, 5.9, 6.1, 6.0])
    started = CandidateRuns(Candidate("trial 3", {"memtablerep": "hash_linkedlist"},
                                      tried_first="rocksdb-point-lookups-universal"), values=[3.3, 3.4, 3.2, 3.3, 3.5])
    searched = CandidateRuns(Candidate("trial 9", {"block_size": 8192}), values=[5.9, 6.1, 6.0, 6.0, 5.8])
    runs = (default, started, searched)
    comparison = Comparison(Objective.ELAPSED_S, Rung(2, 1.0, 100), 5, runs,
                            {r.candidate.label: speedup(default.values, r.values, False) for r in runs[1:]},
                            noise(default.values))
    assert verdict(comparison).startswith("trial 3 (rocksdb-point-lookups-universal, tried first) is 1.8")
    assert comparison.to_dict()["candidates"][1]["tried_first"] == "rocksdb-point-lookups-universal"
    assert "tried_first" not in comparison.to_dict()["candidates"][2]  # the search's own config


@pytest.mark.parametrize(("system", "workload", "driver", "scans"), [
    ("rocksdb", "ycsb-e", "kvbench", True),
    ("rocksdb", "readseq", "kvbench", True),
    ("rocksdb", "ycsb-a", "kvbench", False),
    ("rocksdb", "put-get-delete", "db_bench", False),
    ("rocksdb", "fillrandom", "db_bench", False),
    ("leveldb", "ycsb-e", "kvbench", True),
    ("leveldb", "ycsb-a", "kvbench", False),
])
def test_larger_blocks_are_offered_to_workloads_that_scan_ranges(
        tmp_path: Path, system: str, workload: str, driver: str, scans: bool) -> None:
    catalog = load_catalog(system)
    target = make_target(catalog, load_workload(workload), tmp_path, driver)
    shape = target.workload_facts().shape()
    assert shape["scans"] is scans
    found = diagnose(rules_of(system), {}, shape, catalog.defaults())
    assert ("range-scans-in-small-blocks" in found.fired()) is scans
    if scans:
        (suggestion,) = next(f for f in found.findings if f.rule == "range-scans-in-small-blocks").suggest
        assert (suggestion.knob, suggestion.direction, suggestion.low) == ("block_size", "up", 16384)
        already = diagnose(rules_of(system), {}, shape, {**catalog.defaults(), "block_size": 65536})
        assert "range-scans-in-small-blocks" not in already.fired(), "blocks of 16 KiB or more: nothing to say"


def test_the_cache_rule_narrows_from_half_the_data_set_to_four_times_it() -> None:
    shape = _shape(GIB, point_reads_only=False)
    found = diagnose(rules_of("rocksdb"), {}, shape, ROCKSDB.defaults())
    (suggestion,) = next(f for f in found.findings if f.rule == "data-beyond-block-cache").suggest
    assert (suggestion.low, suggestion.high) == (GIB / 2, 4 * GIB)
    small_machine = diagnose(rules_of("rocksdb"), {}, {**shape, "memory_bytes": 8 * GIB}, ROCKSDB.defaults())
    (suggestion,) = next(f for f in small_machine.findings if f.rule == "data-beyond-block-cache").suggest
    assert suggestion.high == 2 * GIB, "a quarter of the machine's memory bounds it"


def test_leveldbs_cache_rule_narrows_from_the_data_set_where_it_stops_firing_to_four_times_it() -> None:
    leveldb = load_catalog("leveldb")
    found = diagnose(rules_of("leveldb"), {}, _shape(GIB, point_reads_only=False), leveldb.defaults())
    (suggestion,) = next(f for f in found.findings if f.rule == "data-beyond-block-cache").suggest
    assert (suggestion.low, suggestion.high) == (GIB, 4 * GIB)  # "data_bytes", a bare name, is read as the name
    held = diagnose(rules_of("leveldb"), {}, _shape(GIB, point_reads_only=False),
                    {**leveldb.defaults(), "block_cache_size": GIB})
    assert "data-beyond-block-cache" not in held.fired()


@pytest.mark.parametrize(("workload", "driver", "offered"), [
    ("put-get-delete", "db_bench", True),  # 10 KiB values
    ("ycsb-a", "kvbench", True),  # 1,000-byte values
    ("readwhilewriting", "db_bench", False),  # 100-byte values
    ("fillrandom", "db_bench", False),
])
def test_large_values_are_offered_blob_files(tmp_path: Path, workload: str, driver: str, offered: bool) -> None:
    target = make_target(ROCKSDB, load_workload(workload), tmp_path, driver)
    shape = target.workload_facts().shape()
    found = diagnose(rules_of("rocksdb"), {}, shape, ROCKSDB.defaults())
    starts = [s for f in found.findings if f.rule == "large-values-in-the-tables" for s in f.starts]
    assert bool(starts) is offered
    if offered:
        (start,) = starts
        config = ROCKSDB.config({**start.config, **start.sized})
        assert config["enable_blob_files"] is True and config["enable_blob_garbage_collection"] is True
        assert config["min_blob_size"] == shape["value_size"] // 2, "the workload's values go to blob files"
        already = diagnose(rules_of("rocksdb"), {}, shape, {**ROCKSDB.defaults(), **config})
        assert "large-values-in-the-tables" not in already.fired(), "blob files on: nothing to say"
