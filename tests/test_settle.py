"""Settled runs on the real stores: the bill a config leaves (flush, compaction, reopen) is counted and limited."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from knobtune.knobs import load_catalog
from knobtune.report import summarize
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.tuning import Tuner, Experiment, attrs, build_space
from knobtune.tuning.records import Outcome
from knobtune.workloads import load_workload

from conftest import tiny

BIG_BUFFERS = {"write_buffer_size": "512MiB", "max_write_buffer_number": 4}  # far more than the data


def _leftovers(path: Path) -> str:
    return subprocess.run(["pgrep", "-af", str(path)], capture_output=True, text=True).stdout


def _measure(system: str, driver: str, workload, tmp_path: Path, changes: dict, **options):
    catalog = load_catalog(system)
    with make_target(catalog, workload, tmp_path / "scratch", driver, **options) as target:
        return target.run(catalog.config(changes), workload.full, timeout_s=120, log_path=tmp_path / "run.log", seed=3)


@pytest.mark.parametrize("driver", ["db_bench", "kvbench"])
def test_data_held_in_write_buffers_is_flushed_and_the_flush_is_counted(driver: str, tmp_path: Path) -> None:
    workload = tiny("fillrandom", 200_000)  # 24 MB: all of it fits in the write buffers
    measurement = _measure("rocksdb", driver, workload, tmp_path, BIG_BUFFERS)
    settle = measurement.settle
    assert settle is not None
    assert settle.wal_bytes_at_open > 10_000_000, "the run should end with its data only in the WAL"
    assert settle.sst_bytes > 5_000_000 and sum(settle.files_by_level) >= 1, "after settling, the data is in tables"
    assert settle.settle_s > 0 and settle.recovery_s > 0 and settle.flush_s >= 0
    assert measurement.elapsed_s == pytest.approx(measurement.workload_s + settle.settle_s)
    assert measurement.ops_per_s < sum(p.ops for p in measurement.phases) / measurement.workload_s
    assert measurement.peak_rss_bytes and measurement.peak_rss_bytes > 20_000_000  # the memtable was held
    assert _leftovers(tmp_path) == ""
    assert not (tmp_path / "scratch").exists()


def test_unsettled_runs_measure_the_raw_window(tmp_path: Path) -> None:
    workload = tiny("fillrandom", 20_000)
    measurement = _measure("rocksdb", "kvbench", workload, tmp_path, {}, settle=False)
    assert measurement.settle is None and measurement.recovery_s is None
    assert measurement.summary()["settled"] is False
    assert measurement.elapsed_s == measurement.workload_s


def test_leveldb_runs_are_settled_with_their_recovery_time(tmp_path: Path) -> None:
    workload = tiny("put-get-delete", 3000)
    measurement = _measure("leveldb", "kvbench", workload, tmp_path, {"write_buffer_size": "256MiB"})
    assert measurement.settle is not None and measurement.recovery_s > 0
    assert measurement.settle.wal_bytes_at_open > 0  # killed at the end: its log was replayed at the reopen
    assert _leftovers(tmp_path) == ""


def test_a_store_that_never_compacts_is_brought_to_the_defaults_shape(tmp_path: Path) -> None:
    workload = tiny("fillrandom", 100_000)
    changes = {"disable_auto_compactions": True, "write_buffer_size": "1MiB"}
    measurement = _measure("rocksdb", "kvbench", workload, tmp_path, changes)
    settle = measurement.settle
    assert settle.reshaped
    assert settle.files_by_level[0] < load_catalog("rocksdb").knobs["level0_file_num_compaction_trigger"].default


def test_a_settle_that_does_not_finish_is_cut_at_its_limit(tmp_path: Path) -> None:
    """Compaction left pending (auto-compaction off, many level-0 files) and a settle limit far too short."""
    catalog = load_catalog("rocksdb")
    workload = tiny("fillrandom", 100_000)
    config = catalog.config({"disable_auto_compactions": True, "write_buffer_size": "1MiB"})
    with make_target(catalog, workload, tmp_path / "scratch", "kvbench") as target:
        db_dir = tmp_path / "scratch" / "kept-db"
        target.run_workload(config, workload.full, db_dir, timeout_s=60, log_path=tmp_path / "run.log", seed=3)
        with pytest.raises(RunFailure) as caught:
            target.settle_store(config, workload.full, db_dir, limit_s=0.05, log_path=tmp_path / "settle.log", seed=3)
    assert caught.value.kind is FailureKind.TIMEOUT
    assert "did not settle within 0.1 s" in caught.value.reason or "did not settle within 0.0 s" in caught.value.reason
    assert _leftovers(tmp_path) == ""


@pytest.mark.parametrize("system", ["rocksdb", "leveldb"])
def test_memory_limit_stops_a_run_that_goes_over_it(system: str, tmp_path: Path) -> None:
    workload = tiny("fillrandom", 200_000)
    buffers = BIG_BUFFERS if system == "rocksdb" else {"write_buffer_size": "256MiB"}
    with pytest.raises(RunFailure) as caught:
        _measure(system, "kvbench", workload, tmp_path, buffers, memory_limit_bytes=40 * 2**20)
    assert caught.value.kind is FailureKind.MEMORY
    assert "over the memory limit of 40.0 MiB" in caught.value.reason
    assert _leftovers(tmp_path) == ""


def _settings(catalog, workload, **overrides) -> Experiment:
    values = dict(study="s", search__sampler="random", search__seed=2, budget__trials=4, proof__verify_top=0,
                  proof__repeats=0, measurement__control_every=0, research__rules=False,
                  research__try_known_configs=False)
    if "space" not in overrides:
        values["space"] = build_space(catalog, ["write_buffer_size", "cache_size"])
    return Experiment.of(catalog, workload, **(values | overrides))


@pytest.mark.slow
def test_memory_limit_narrows_the_search_and_refuses_a_known_config_planned_over_it(store) -> None:
    """--memory-limit 140 MiB: the plan's knobs are searched up to what fits (a sampled config planning more is
    scaled down to it: tests/test_space.py) and a known config over it is refused without running."""
    catalog = load_catalog("rocksdb")
    workload = tiny("put-get-delete", 2000)
    limit = 140 * 2**20
    big = (("a big cache", {"cache_size": 512 << 20}),)
    study = Tuner(_settings(catalog, workload, budget__trials=8, limits__memory_limit_bytes=limit, start_configs=big),
                  store).run()
    sampled = [t for t in study.trials if not attrs.is_default(t.user_attrs) and attrs.STARTED_FROM not in t.user_attrs]
    assert len(sampled) >= 6 and all(t.user_attrs[attrs.PLANNED_MEMORY] <= limit for t in sampled)
    assert all(t.params.get("cache_size", 0) <= limit for t in sampled)  # the ceiling: no value that cannot fit
    assert all(t.user_attrs[attrs.OUTCOME] != Outcome.MEMORY.value for t in sampled)
    known = next(t for t in study.trials if t.user_attrs.get(attrs.STARTED_FROM) == "a big cache")
    assert known.user_attrs[attrs.OUTCOME] == Outcome.MEMORY.value
    assert "is over the memory limit" in known.user_attrs[attrs.REASON]
    assert not any(key.startswith(attrs.RUNG_PREFIX) for key in known.user_attrs), "it must not have run"
    summary = summarize(study, catalog)
    assert summary.cost.limits.memory_limit_bytes == limit
    assert set(summary.cost.costs["default"]) >= {"settle_s", "recovery_s", "peak_rss_bytes"}


@pytest.mark.parametrize("system", ["rocksdb", "leveldb"])
def test_max_recovery_time_makes_slow_recoveries_infeasible(system: str, store) -> None:
    catalog = load_catalog(system)
    workload = tiny("put-get-delete", 2000)
    knobs = ["write_buffer_size", "cache_size" if system == "rocksdb" else "block_cache_size"]
    settings = _settings(catalog, workload, budget__trials=2, limits__max_recovery_s=1e-6,
                         space=build_space(catalog, knobs),
                         driver=None if system == "rocksdb" else "kvbench")
    study = Tuner(settings, store).run()
    complete = [t for t in study.trials if t.user_attrs.get(attrs.OUTCOME) == Outcome.COMPLETE.value]
    assert complete
    for trial in complete:
        assert "over --max-recovery-time" in trial.user_attrs[attrs.INFEASIBLE]
        assert trial.user_attrs[attrs.RECOVERY_OVER_S] > 0
    assert summarize(study, catalog).result_trial is None, "an infeasible config is never the result"


def test_a_settled_study_cannot_be_resumed_unsettled(store) -> None:
    from knobtune.errors import UsageError

    catalog = load_catalog("rocksdb")
    workload = tiny("put-get-delete", 2000)
    Tuner(_settings(catalog, workload, budget__trials=0), store).run()
    with pytest.raises(UsageError, match="settled"):
        Tuner(_settings(catalog, workload, budget__trials=1, research__settle=False), store).run()


TWICE_OVER = """
name = "every-key-twice"
description = "every key written, then every key written again: the first tables hold only superseded values"
systems = ["rocksdb", "leveldb"]
objective = "elapsed_s"
ladder = [1.0]
records = 8000
key_size = 16
value_size = 1000

[drivers.kvbench]
phases = [
  { name = "first", kind = "fill", order = "shuffled" },
  { name = "again", kind = "fill", order = "shuffled" },
]
"""
# Loads that leave every table in level 0, uncompacted, for the settle to compact: LevelDB's patched build (its
# triggers raised, nothing pushed below level 0); RocksDB with auto-compaction off (the settle turns it back on).
UNCOMPACTED = {
    "leveldb": ("kvbench-tunable", ".ldb", {"write_buffer_size": "1MiB", "level0_file_num_compaction_trigger": 32,
                                            "level0_slowdown_writes_trigger": 64, "level0_stop_writes_trigger": 128,
                                            "max_mem_compact_level": 0}),
    "rocksdb": ("kvbench", ".sst", {"write_buffer_size": "1MiB", "disable_auto_compactions": True}),
}


@pytest.mark.parametrize("system", ["leveldb", "rocksdb"])
def test_a_compaction_the_engine_fails_is_our_failure_not_the_configs(system: str, tmp_path: Path) -> None:
    """The engine stops compacting after an error of its own (here a table corrupted on disk): the settle stops at
    once and names the engine's own error line, as a `tool` failure, never a timeout of the config."""
    driver, suffix, uncompacted = UNCOMPACTED[system]
    (tmp_path / "twice.toml").write_text(TWICE_OVER)
    workload = load_workload(tmp_path / "twice.toml")
    catalog = load_catalog(system)
    db_dir = tmp_path / "kept-db"
    with make_target(catalog, workload, tmp_path / "scratch", driver) as loader:
        loader.run_workload(catalog.config(uncompacted), workload.full, db_dir, timeout_s=60,
                            log_path=tmp_path / "run.log", seed=3)
        tables = sorted(db_dir.glob("*" + suffix), key=lambda path: int(path.stem))
        assert len(tables) >= 8, "the load should leave its tables in level 0, uncompacted"
        oldest = tables[0]  # written in the first phase only: no read after the reopen looks into it
        data = bytearray(oldest.read_bytes())
        middle = len(data) // 2
        data[middle:middle + 4096] = b"\xab" * 4096  # a data block the engine cannot decode
        oldest.write_bytes(bytes(data))
        with make_target(catalog, workload, tmp_path / "scratch-2", driver) as settler:
            began = time.monotonic()
            with pytest.raises(RunFailure) as caught:  # the default's level-0 trigger: the settle compacts level 0
                settler.settle_store(catalog.config({}), workload.full, db_dir, limit_s=30,
                                     log_path=tmp_path / "settle.log", seed=3)
            waited_s = time.monotonic() - began
    failure = caught.value
    assert waited_s < 15, "the settle should stop once the engine gives up, not wait out its limit"
    assert failure.kind is FailureKind.TOOL, failure.reason
    assert "reported an error while the store settled" in failure.reason and "Corruption" in failure.reason
    assert "not the config's failure" in failure.reason
    if system == "leveldb":  # LevelDB says nothing of what the failed compaction wrote: the settle names it
        assert ".ldb in no level" in failure.reason
    assert _leftovers(tmp_path) == ""
