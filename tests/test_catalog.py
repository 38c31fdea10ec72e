"""The shipped RocksDB catalog: valid, big enough, and its defaults are db_bench's own."""

from __future__ import annotations

import pytest

from knobtune.knobs import KnobType, Safety, available_systems, load_catalog
from knobtune.systems.rocksdb.db_bench import db_bench_defaults

REQUIRED = [
    "write_buffer_size", "max_write_buffer_number", "min_write_buffer_number_to_merge", "memtablerep",
    "hash_bucket_count", "memtable_bloom_size_ratio", "allow_concurrent_memtable_write", "enable_pipelined_write",
    "level0_file_num_compaction_trigger", "level0_slowdown_writes_trigger", "level0_stop_writes_trigger",
    "max_background_jobs", "max_background_compactions", "max_background_flushes", "subcompactions",
    "max_bytes_for_level_base", "max_bytes_for_level_multiplier", "target_file_size_base", "num_levels",
    "compaction_style", "compression_type", "block_size", "cache_size", "bloom_bits",
    "cache_index_and_filter_blocks", "partition_index", "bytes_per_sync", "compaction_readahead_size",
    "use_direct_reads", "use_direct_io_for_flush_and_compaction", "advise_random_on_open",
    "table_cache_numshardbits", "disable_auto_compactions", "disable_wal",
]


def test_every_shipped_catalog_loads() -> None:
    for system in available_systems():
        assert load_catalog(system).knobs


def test_rocksdb_catalog_covers_the_published_study(rocksdb) -> None:
    assert len(rocksdb.knobs) >= 35
    missing = [name for name in REQUIRED if name not in rocksdb.knobs]
    assert missing == []


def test_defaults_are_what_db_bench_reports(rocksdb) -> None:
    reported = db_bench_defaults()
    checked = 0
    for knob in rocksdb.knobs.values():
        flag = knob.names["db_bench"]
        assert flag in reported, f"{flag} is not a db_bench flag"
        raw = reported[flag]
        if knob.type is KnobType.ENUM:
            spelled = {v: k for k, v in knob.spell.get("db_bench", {}).items()}
            raw = spelled.get(raw, raw)
        assert knob.parse(raw) == knob.default, f"{knob.name}: db_bench says {raw}, catalog says {knob.default}"
        checked += 1
    assert checked == len(rocksdb.knobs)


@pytest.mark.parametrize("name, safety", [
    ("disable_wal", Safety.DURABILITY), ("manual_wal_flush", Safety.DURABILITY),
    ("compaction_style", Safety.DATA_LOSS), ("fifo_compaction_max_table_files_size_mb", Safety.DATA_LOSS),
    ("disable_auto_compactions", Safety.OPERATIONAL), ("write_buffer_size", Safety.SAFE),
])
def test_safety_classes(rocksdb, name: str, safety: Safety) -> None:
    assert rocksdb.knobs[name].safety is safety


def test_unsafe_values_are_specific(rocksdb) -> None:
    style = rocksdb.knobs["compaction_style"]
    assert style.is_unsafe("fifo") and not style.is_unsafe("universal") and not style.is_unsafe("level")
    assert rocksdb.knobs["disable_wal"].is_unsafe(True) and not rocksdb.knobs["disable_wal"].is_unsafe(False)


def test_a_small_rung_scales_the_data_sized_knobs_and_nothing_else(rocksdb) -> None:
    config = rocksdb.config({"write_buffer_size": "128MiB", "max_bytes_for_level_base": "16MiB", "row_cache_size": 0,
                             "bloom_bits": 10, "memtablerep": "prefix_hash", "hash_bucket_count": 4096,
                             "prefix_size": 8, "allow_concurrent_memtable_write": False})
    small = rocksdb.at_fraction(config, 0.05)
    assert small["write_buffer_size"] == round(128 * 2**20 * 0.05)
    assert small["cache_size"] == round(8 * 2**20 * 0.05)  # the default's cache too: the same share of the data
    assert small["max_bytes_for_level_base"] == round(16 * 2**20 * 0.05)  # below the search range: meant
    assert small["hash_bucket_count"] == 1024  # never below its floor (here the knob's min)
    assert small["row_cache_size"] == 0  # a special value stays
    assert {k: v for k, v in small.items() if not rocksdb.knobs[k].data_sized} == \
        {k: v for k, v in config.items() if not rocksdb.knobs[k].data_sized}
    assert rocksdb.at_fraction(config, 1.0) == config
    assert rocksdb.scales_rungs
