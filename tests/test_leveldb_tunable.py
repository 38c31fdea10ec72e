"""The tunable LevelDB: LevelDB 1.23 patched so that db/dbformat.h's constants are options, run as kvbench-tunable.

Real builds at small sizes: kvbench-leveldb-tunable (scripts/setup builds it) against kvbench on the system's
LevelDB, and LevelDB's own properties as the evidence of what a changed constant does.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from knobtune.cli import app
from knobtune.errors import UsageError
from knobtune.knobs import available_systems, load_catalog
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import TARGETS, make_target
from knobtune.drivers.kvbench import KvbenchTunableTarget, find_kvbench
from knobtune.tuning import Tuner, Experiment, build_space
from knobtune.workloads import load_workload

from conftest import tiny

CONSTANTS = {"level0_file_num_compaction_trigger": 4, "level0_slowdown_writes_trigger": 8,
             "level0_stop_writes_trigger": 12, "max_mem_compact_level": 2, "read_bytes_period": 1048576}
RAISED = {"level0_file_num_compaction_trigger": "12", "level0_slowdown_writes_trigger": "16",
          "level0_stop_writes_trigger": "20"}


@pytest.fixture(scope="module")
def leveldb():  # noqa: ANN201
    return load_catalog("leveldb")


def _tunable() -> str:
    return KvbenchTunableTarget.find_program()


def test_the_catalog_has_the_constants_for_the_tunable_driver_only(leveldb) -> None:
    for name, default in CONSTANTS.items():
        knob = leveldb.knobs[name]
        assert knob.default == default and knob.drivers == ("kvbench-tunable",)
        assert knob.settable_by("kvbench-tunable") and not knob.settable_by("kvbench")
    assert [str(r) for r in leveldb.relations] == [
        "level0_slowdown_writes_trigger >= level0_file_num_compaction_trigger",
        "level0_stop_writes_trigger >= level0_slowdown_writes_trigger"]


def test_every_driver_a_catalog_names_is_a_target_of_its_system() -> None:
    for system in available_systems():
        for knob in load_catalog(system).knobs.values():
            assert all((system, d) in TARGETS for d in knob.drivers), f"{system}.{knob.name}: {knob.drivers}"


def test_the_plain_driver_leaves_them_out_and_says_how_to_search_them(leveldb) -> None:
    plain = build_space(leveldb, driver="kvbench")
    assert not set(CONSTANTS) & set(plain.knobs) and set(plain.other_drivers) == set(CONSTANTS)
    assert plain.driver_note() == ("not searched, driver kvbench cannot set them (they keep their defaults): "
                                   + ", ".join(CONSTANTS) + "; add --driver kvbench-tunable to search them")
    tunable = build_space(leveldb, driver="kvbench-tunable")
    assert set(CONSTANTS) <= set(tunable.knobs) and tunable.driver_note() is None
    output = CliRunner().invoke(app, ["tune", "leveldb", "--workload", "fillrandom", "--trials", "1", "--dry-run"],
                                catch_exceptions=False).stdout
    assert [line for line in output.splitlines() if "kvbench-tunable" in line] == [f"# {plain.driver_note()}"]
    tunable_plan = CliRunner().invoke(
        app,
        ["tune", "leveldb", "--workload", "fillrandom", "--trials", "1", "--dry-run", "--driver", "kvbench-tunable"],
        catch_exceptions=False).stdout
    assert 'driver = "kvbench-tunable"' in tunable_plan and "# not searched" not in tunable_plan


def test_naming_one_with_the_plain_driver_is_a_usage_error(leveldb) -> None:
    with pytest.raises(UsageError,
                       match="only through driver kvbench-tunable, not kvbench. Fix: add --driver kvbench-tunable"):
        build_space(leveldb, ["level0_stop_writes_trigger"], driver="kvbench")


def test_the_plain_driver_refuses_a_config_that_changes_one(leveldb, tmp_path: Path) -> None:
    workload = tiny("fillrandom", 1000)
    with make_target(leveldb, workload, tmp_path / "scratch", "kvbench") as target:
        with pytest.raises(RunFailure, match="can be set only through driver kvbench-tunable") as caught:
            target.run(leveldb.config({"level0_stop_writes_trigger": 20}), workload.full, timeout_s=60,
                       log_path=tmp_path / "run.log", seed=1)
    assert caught.value.kind is FailureKind.REFUSED


def test_plain_kvbench_refuses_the_options_as_its_store_and_unknown_names_as_ours(tmp_path: Path) -> None:
    """Exit 3 (the store refused: its LevelDB has constants there) for the new names; exit 2 for a misspelt one."""
    spec = tmp_path / "spec.json"
    for config, status, said in (({"level0_stop_writes_trigger": "20"}, 3, "compile-time constant"),
                                 ({"level0_stop_trigger": "20"}, 2, "unknown LevelDB option")):
        spec.write_text(json.dumps({"record_count": 10, "phases": [{"kind": "fill"}], "config": config}))
        result = subprocess.run([find_kvbench(), "--engine", "leveldb", "--db", str(tmp_path / "db"), "--spec",
                                 str(spec)],
                                capture_output=True, text=True)
        assert result.returncode == status and result.stderr.startswith("kvbench: error:") and said in result.stderr


def test_stop_below_slowdown_is_a_refused_config_with_leveldbs_message(leveldb, tmp_path: Path) -> None:
    """The catalog mends or refuses this itself; passed straight to the patched LevelDB, DB::Open refuses it."""
    workload = tiny("fillrandom", 1000)
    with make_target(leveldb, workload, tmp_path / "scratch", "kvbench-tunable") as target:
        with pytest.raises(RunFailure) as caught:
            target.run({**leveldb.defaults(), "level0_stop_writes_trigger": 6}, workload.full, timeout_s=60,
                       log_path=tmp_path / "run.log", seed=1)
    assert caught.value.kind is FailureKind.REFUSED
    assert "Invalid argument: level0_stop_writes_trigger (6) must be >= level0_slowdown_writes_trigger (8)" \
        in caught.value.reason


def _kvbench(binary: str, db: Path, mode: str, spec: dict[str, Any], *extra: str) -> dict[str, Any]:
    path = db.with_suffix(f".{mode}.json")
    path.write_text(json.dumps(spec))
    result = subprocess.run([binary, "--engine", "leveldb", "--db", str(db), f"--{mode}", str(path), *extra],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, -9), result.stderr  # -9: --crash-at-end, as a crash leaves the store
    return json.loads(result.stdout)


def _level0_after_fill_and_settle(config: dict[str, str], db: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fill 80,000 records through 1 MiB memtables (about 11 flushes), end as a crash would, then reopen and wait
    until LevelDB's compaction rule holds. No probe reads: they could start a seek compaction of their own."""
    config = {"write_buffer_size": "1048576", **config}
    run = _kvbench(_tunable(), db, "spec", {
        "seed": 3, "key_size": 20, "value_size": 100, "record_count": 80000, "config": config,
        "phases": [{"name": "fill", "kind": "fill", "order": "shuffled"}]}, "--crash-at-end", "1")
    settle = _kvbench(_tunable(), db, "settle", {"key_size": 20, "record_count": 80000, "probe_keys": 0,
                                                 "compaction_limit_s": 60, "config": config})
    return run, settle


def test_a_raised_compaction_trigger_tolerates_more_level0_files(tmp_path: Path) -> None:
    """LevelDB's own count of level-0 files (leveldb.num-files-at-level0 during the run, leveldb.sstables once
    settled): with the trigger at 4 a settled store keeps fewer than 4; at 12 the 8+ files a fill leaves stay."""
    run_4, settled_4 = _level0_after_fill_and_settle({}, tmp_path / "default")
    run_12, settled_12 = _level0_after_fill_and_settle(RAISED, tmp_path / "raised")
    assert run_4["engine_version"] == run_12["engine_version"] == "1.23+tunable-constants"
    assert settled_4["settled"] and settled_12["settled"]
    assert settled_4["files_by_level"][0] < 4
    assert 8 <= settled_12["files_by_level"][0] < 12  # every flush stayed in level 0: none reached the trigger
    assert run_12["stats"]["max_level0_files"] >= 8  # and they piled up during the run, uncompacted
    assert sum(settled_4["files_by_level"]) < sum(settled_12["files_by_level"])


def _fill_ops_per_s(driver: str, tmp_path: Path, seed: int) -> float:
    catalog = load_catalog("leveldb")
    workload = tiny("fillrandom", 100000)
    with make_target(catalog, workload, tmp_path / f"{driver}-{seed}", driver, settle=False) as target:
        return target.run(catalog.defaults(), workload.full, timeout_s=120,
                          log_path=tmp_path / f"{driver}-{seed}.log", seed=seed).ops_per_s


def test_default_constants_measure_within_the_noise_of_the_system_library(tmp_path: Path) -> None:
    """A sanity check, not a benchmark: interleaved fillrandom runs, medians within a generous band."""
    plain, tunable = [], []
    for seed in range(3):
        plain.append(_fill_ops_per_s("kvbench", tmp_path, seed))
        tunable.append(_fill_ops_per_s("kvbench-tunable", tmp_path, seed))
    ratio = statistics.median(tunable) / statistics.median(plain)
    assert 0.6 <= ratio <= 1.6, f"tunable {tunable} vs system {plain} ops/s"


@pytest.mark.slow
def test_a_study_through_the_tunable_driver_searches_and_mends_the_triggers(store) -> None:
    catalog = load_catalog("leveldb")
    workload = load_workload("fillrandom").scaled(20000)
    knobs = ["write_buffer_size", *CONSTANTS]
    settings = Experiment.of(study="tunable", catalog=catalog, workload=workload, driver="kvbench-tunable",
                             space=build_space(catalog, knobs, driver="kvbench-tunable"),
                             search__sampler="random", budget__trials=4, proof__verify_top=0, proof__repeats=0,
                             research__rules=False, research__try_known_configs=False)
    study = Tuner(settings, store).run()
    assert study.user_attrs["experiment"]["workload"]["driver"] == "kvbench-tunable"
    assert study.user_attrs["system_version"] == "1.23+tunable-constants"
    outcomes = Counter(t.user_attrs.get("outcome") for t in study.trials)
    assert outcomes["refused"] == 0, outcomes  # sampled triggers are mended into LevelDB's relations
    for trial in study.trials:
        config = catalog.config(trial.user_attrs.get("config", {}))
        assert config["level0_stop_writes_trigger"] >= config["level0_slowdown_writes_trigger"] \
            >= config["level0_file_num_compaction_trigger"]
    assert any(set(trial.user_attrs.get("config", {})) & set(CONSTANTS) for trial in study.trials[1:])
