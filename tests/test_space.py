"""The search space: unsafe values kept out, conditions, special values, implications and relations."""

from __future__ import annotations

import optuna
import pytest

from knobtune.errors import ConfigError, UsageError
from knobtune.knobs import Safety, load_catalog
from knobtune.tuning.search import build_space, config_hash, left_out_line, mend


def _sample(space, n: int = 60, seed: int = 3) -> list[dict]:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    configs = []
    for _ in range(n):
        trial = study.ask()
        config, _ = space.suggest(trial)
        configs.append(config)
        study.tell(trial, 1.0)
    return configs


def test_unsafe_knobs_stay_out_unless_allowed(rocksdb) -> None:
    safe = build_space(rocksdb)
    assert {"disable_wal", "manual_wal_flush", "fifo_compaction_max_table_files_size_mb"}.isdisjoint(safe.knobs)
    assert safe.left_out["compaction_style"] is Safety.DATA_LOSS
    assert "disable_auto_compactions" not in safe.knobs  # operational: the store would never settle by itself
    configs = _sample(safe)
    assert all(c["compaction_style"] != "fifo" and c["disable_wal"] is False for c in configs)
    assert {c["compaction_style"] for c in configs} == {"level", "universal"}
    unsafe = build_space(rocksdb, allow_unsafe=True)
    assert "disable_wal" in unsafe.knobs and unsafe.left_out == {}
    assert "fifo" in {c["compaction_style"] for c in _sample(unsafe)}


def test_naming_an_unsafe_knob_needs_allow_unsafe(rocksdb) -> None:
    with pytest.raises(UsageError, match="--allow-unsafe"):
        build_space(rocksdb, ["fifo_compaction_max_table_files_size_mb"])


def test_allow_operational_lets_in_auto_compaction_off_and_nothing_else(rocksdb) -> None:
    space = build_space(rocksdb, allow_operational=True)
    assert "disable_auto_compactions" in space.knobs and "disable_auto_compactions" not in space.left_out
    assert space.left_out["disable_wal"] is Safety.DURABILITY and space.left_out["compaction_style"] is Safety.DATA_LOSS
    configs = _sample(space)
    assert {c["disable_auto_compactions"] for c in configs} == {False, True}
    assert all(c["compaction_style"] != "fifo" and c["disable_wal"] is False for c in configs)
    line = left_out_line(space.left_out)
    assert "--allow-unsafe" in line and "--allow-operational" not in line
    assert "--allow-operational or --allow-unsafe" in left_out_line(build_space(rocksdb).left_out)
    stored = {k: v.value for k, v in build_space(rocksdb).left_out.items()}  # as a study stores them
    assert "--allow-operational or --allow-unsafe" in left_out_line(stored)


def test_naming_an_operational_knob_names_the_narrow_flag(rocksdb) -> None:
    with pytest.raises(UsageError, match="add --allow-operational to search it"):
        build_space(rocksdb, ["disable_auto_compactions"])
    assert build_space(rocksdb, ["disable_auto_compactions"],
                       allow_operational=True).knobs == ("disable_auto_compactions",)


def test_unknown_knob_suggests_close_names(rocksdb) -> None:
    with pytest.raises(ConfigError, match="Did you mean write_buffer_size"):
        build_space(rocksdb, ["write_bufer_size"])


def test_every_sample_is_a_valid_config(rocksdb) -> None:
    for config in _sample(build_space(rocksdb), n=80):
        rocksdb.config(rocksdb.changed(config))  # raises on a bad value, implication or relation
        assert config["level0_stop_writes_trigger"] >= config["level0_slowdown_writes_trigger"]
        if config["memtablerep"] != "skip_list":
            assert config["allow_concurrent_memtable_write"] is False
            if config["memtablerep"] != "vector":
                assert config["prefix_size"] >= 1  # its special 0 is never searched
        else:
            assert config["hash_bucket_count"] == rocksdb.knobs["hash_bucket_count"].default  # condition


def test_special_values_are_a_choice(rocksdb) -> None:
    configs = _sample(build_space(rocksdb, ["bloom_bits"]), n=60)
    values = {c["bloom_bits"] for c in configs}
    assert {-1, 0} <= values and any(1 <= v <= 24 for v in values)


def test_default_params_give_back_the_default(rocksdb) -> None:
    space = build_space(rocksdb)
    study = optuna.create_study()
    study.enqueue_trial(space.params_of(rocksdb.defaults()))
    config, repairs = space.suggest(study.ask())
    assert rocksdb.changed(config) == {} and repairs == []


def test_mend_raises_the_left_side_of_a_relation(rocksdb) -> None:
    config = rocksdb.defaults() | {"level0_slowdown_writes_trigger": 50, "level0_stop_writes_trigger": 10}
    mended, repairs = mend(rocksdb, config)
    assert mended["level0_stop_writes_trigger"] == 50 and len(repairs) == 1


def test_a_hash_memtable_keeps_its_buckets_within_the_write_buffer(rocksdb) -> None:
    """Debian's RocksDB aborts when the bucket array fills the buffer at birth (memtable.cc:120): mended by
    lowering the buckets to 1/16 of the buffer; a skip list is not touched."""
    crashed = {**rocksdb.defaults(), "memtablerep": "hash_linkedlist", "hash_bucket_count": 15974862,
               "write_buffer_size": 50490466}
    config, repairs = mend(rocksdb, dict(crashed))
    assert config["hash_bucket_count"] == 50490466 // 16 and config["write_buffer_size"] == 50490466
    assert any("hash_bucket_count <= 0.0625 x write_buffer_size" in r for r in repairs)
    assert mend(rocksdb, {**crashed, "memtablerep": "skip_list"})[0]["hash_bucket_count"] == 15974862
    for config in _sample(build_space(rocksdb), n=200):
        if config["memtablerep"] in ("hash_linkedlist", "prefix_hash"):
            assert config["hash_bucket_count"] * 16 <= config["write_buffer_size"]
    with pytest.raises(ConfigError, match="hash_bucket_count <= 0.0625 x write_buffer_size"):
        rocksdb.config({"memtablerep": "prefix_hash", "allow_concurrent_memtable_write": False,
                        "hash_bucket_count": 1 << 22, "write_buffer_size": 1 << 25})


def test_user_config_breaking_a_relation_is_refused_up_front(rocksdb) -> None:
    with pytest.raises(ConfigError, match="level0_stop_writes_trigger >= level0_slowdown_writes_trigger"):
        rocksdb.config({"level0_stop_writes_trigger": 5})
    with pytest.raises(ConfigError, match="out of range"):
        rocksdb.config({"write_buffer_size": "10GiB"})


def test_config_hash_is_order_free() -> None:
    assert config_hash({"a": 1, "b": 2}) == config_hash({"b": 2, "a": 1}) != config_hash({"a": 1})


def test_values_a_machine_refuses_are_left_out_of_the_search() -> None:
    catalog = load_catalog("postgresql")
    space = build_space(catalog).excluding({"huge_pages": ("on",), "not_a_searched_knob": (1,)})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    drawn = set()
    for _ in range(40):
        trial = study.ask()
        drawn.add(space.suggest(trial)[0]["huge_pages"])
        study.tell(trial, 1.0)
    assert drawn == {"try", "off"} and space.impossible == {"huge_pages": ("on",)}


def test_a_planned_memory_limit_narrows_the_plans_knobs_and_scales_a_config_down_to_it(rocksdb) -> None:
    """Capped at 140 MiB: each of the plan's knobs is searched only up to what fits with the others at their least,
    and a sampled config whose buffers and cache together plan more is scaled down to the limit, saying so."""
    limit = 140 * 2**20
    space = build_space(rocksdb, ["write_buffer_size", "max_write_buffer_number", "cache_size"]).capped_under(limit)
    least = rocksdb.knobs["write_buffer_size"].min * rocksdb.knobs["max_write_buffer_number"].min
    assert space.ceilings["cache_size"] == limit - least - rocksdb.defaults()["row_cache_size"]
    assert space.planned_limit == limit
    both = optuna.trial.FixedTrial({"write_buffer_size": 100 << 20, "max_write_buffer_number": 1,
                                    "cache_size": 100 << 20})
    config, repairs = space.suggest(both, capped=True)
    assert rocksdb.memory.planned_bytes(config) <= limit
    assert limit - rocksdb.memory.planned_bytes(config) < 2**20  # scaled to the limit, not far below it
    assert config["write_buffer_size"] == config["cache_size"]  # one factor for both
    assert any("over the limit 140.0 MiB" in r and "scaled by 0.70" in r for r in repairs)
    as_known, repairs = space.suggest(both)  # a known config runs as it is (and is refused if over)
    assert as_known["cache_size"] == 100 << 20 and not repairs
    drawn = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(50):
        trial = drawn.ask()
        config, _ = space.suggest(trial, capped=True)
        assert rocksdb.memory.planned_bytes(config) <= limit and trial.params["cache_size"] <= limit
        drawn.tell(trial, 0.0)
    hashed = build_space(rocksdb, ["memtablerep", "hash_bucket_count", "write_buffer_size", "cache_size"],
                         driver="db_bench").capped_under(limit)
    big = optuna.trial.FixedTrial({"memtablerep": "hash_linkedlist", "write_buffer_size": 64 << 20,
                                   "hash_bucket_count": 4 << 20, "cache_size": 100 << 20})
    config, repairs = hashed.suggest(big, capped=True)  # buffers scaled down: their buckets follow (a relation)
    assert rocksdb.config(rocksdb.changed(config)) == config and any("hash_bucket_count" in r for r in repairs)
    assert build_space(rocksdb).capped_under(None).ceilings == {}
