"""The native driver kvbench on real RocksDB and LevelDB at small sizes: exact counts, mixes, skew, errors."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from knobtune.knobs import load_catalog
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.drivers.kvbench import find_kvbench
from knobtune.tuning import Tuner, Experiment, build_space
from knobtune.workloads import load_workload

from conftest import tiny


def _run(system: str, workload, tmp_path: Path, changes: dict | None = None):
    catalog = load_catalog(system)
    with make_target(catalog, workload, tmp_path / "scratch", "kvbench") as target:
        return target.run(catalog.config(changes or {}), workload.full, timeout_s=120, log_path=tmp_path / "run.log",
                          seed=11)


@pytest.mark.parametrize("system", ["rocksdb", "leveldb"])
def test_put_get_delete_touches_every_key_exactly_once(system: str, tmp_path: Path) -> None:
    measurement = _run(system, tiny("put-get-delete", 3000), tmp_path)
    put, get, delete, again = measurement.phases
    assert (put.ops, get.ops, delete.ops, again.ops) == (3000, 3000, 3000, 3000)
    assert (get.found, get.expected) == (3000, 3000)  # every key read back once
    assert again.found == 0  # and every deleted key is gone
    spec = json.loads((tmp_path / "run.spec.json").read_text())
    assert [p["order"] for p in spec["phases"]] == ["shuffled"] * 4


def test_shuffled_orders_differ_per_phase_and_repeat_per_seed(tmp_path: Path) -> None:
    """Same spec, same seed: same result counts; the driver's own unit tests check the permutations."""
    first = _run("leveldb", tiny("put-get-delete", 2000), tmp_path / "a")
    second = _run("leveldb", tiny("put-get-delete", 2000), tmp_path / "b")
    assert [(p.ops, p.found) for p in first.phases] == [(p.ops, p.found) for p in second.phases]


def _mix_counts(workload_name: str, tmp_path: Path, system: str = "leveldb") -> dict:
    workload = load_workload(workload_name).scaled(5000)
    _run(system, workload, tmp_path)
    result = json.loads((tmp_path / "run.result.json").read_text())
    return result["phases"][1]


@pytest.mark.parametrize("name, expected", [
    ("ycsb-a", {"read": 0.5, "update": 0.5}), ("ycsb-b", {"read": 0.95, "update": 0.05}),
    ("ycsb-c", {"read": 1.0}), ("ycsb-d", {"read": 0.95, "insert": 0.05}),
    ("ycsb-e", {"scan": 0.95, "insert": 0.05}), ("ycsb-f", {"read": 0.5, "rmw": 0.5}),
])
def test_ycsb_proportions(name: str, expected: dict, tmp_path: Path) -> None:
    run = _mix_counts(name, tmp_path)
    counts = {op: h["count"] for op, h in run["latency_us"].items()}
    total = sum(counts.values())
    assert total == run["ops"] == 10000
    for op, share in expected.items():
        assert abs(counts[op] / total - share) < 0.02, (op, counts)
    assert run["not_found"] == 0  # every read of an existing key found it
    if "insert" in expected:
        assert run["inserted"] == counts["insert"]
    if "scan" in expected:
        assert counts["scan"] <= run["keys_seen"] <= 100 * counts["scan"]


def test_ycsb_runs_on_rocksdb_through_the_same_driver(tmp_path: Path) -> None:
    run = _mix_counts("ycsb-a", tmp_path, system="rocksdb")
    counts = {op: h["count"] for op, h in run["latency_us"].items()}
    assert sum(counts.values()) == 10000 and abs(counts["read"] / 10000 - 0.5) < 0.02
    assert run["not_found"] == 0
    stats = json.loads((tmp_path / "run.result.json").read_text())["stats"]
    assert stats["user_bytes_written"] > 0 and "compact_write_bytes" in stats  # RocksDB's counters (test_counters_*)


def test_refused_and_unsupported_configs(tmp_path: Path) -> None:
    catalog = load_catalog("rocksdb")
    workload = tiny("put-get-delete", 1000)
    refused = catalog.defaults() | {"memtablerep": "vector"}  # mend() would set concurrent writes off; here not
    with make_target(catalog, workload, tmp_path / "s", "kvbench") as target:
        with pytest.raises(RunFailure) as caught:
            target.run(refused, workload.full, timeout_s=60, log_path=tmp_path / "r.log", seed=1)
    assert caught.value.kind is FailureKind.REFUSED and "concurrent" in caught.value.reason
    with pytest.raises(RunFailure, match="cannot be set through kvbench") as caught:
        with make_target(catalog, workload, tmp_path / "s2", "kvbench") as target:
            target.run(catalog.config({"disable_wal": True}), workload.full, timeout_s=60, log_path=tmp_path / "w.log",
                       seed=1)
    assert caught.value.kind is FailureKind.REFUSED


@pytest.mark.parametrize("spec, message", [
    ({"record_count": 10, "phases": [{"kind": "fill"}], "config": {"no_such_option": "1"}}, "no_such_option"),
    ({"record_count": 10, "phases": [{"kind": "teleport"}]}, "field 'kind'"),
    ({"record_count": 0, "phases": [{"kind": "fill"}]}, "record_count"),
])
def test_kvbench_bad_specs_exit_2_with_one_line(spec: dict, message: str, tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    result = subprocess.run([find_kvbench(), "--engine", "rocksdb", "--db", str(tmp_path / "db"), "--spec", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("kvbench: error:") and message in result.stderr


@pytest.mark.slow
def test_a_leveldb_study_end_to_end(store) -> None:
    catalog = load_catalog("leveldb")
    workload = load_workload("fillrandom").scaled(20000)
    settings = Experiment.of(study="lvl", catalog=catalog, workload=workload, driver="kvbench",
                             space=build_space(catalog, driver="kvbench"),
                             search__sampler="random", budget__trials=5, proof__verify_top=1, proof__repeats=2,
                             research__rules=False, research__try_known_configs=False)
    study = Tuner(settings, store).run()
    assert study.user_attrs["system"] == "leveldb" and study.user_attrs["system_version"] == "1.23"
    assert study.trials[0].state.name == "COMPLETE"
    outcomes = Counter(t.user_attrs.get("outcome") for t in study.trials[1:])
    assert sum(outcomes.values()) >= 5 and "verdict" in study.user_attrs["verification"]


def test_a_phases_latency_is_over_every_kind_of_operation() -> None:
    """kvbench's merged histogram stands for the phase; from an older kvbench without it, the worst kind's
    percentiles with the mean and max over every kind (the mean weighted by each kind's count)."""
    from knobtune.drivers.kvbench import _all_operations  # noqa: PLC0415

    read = {"count": 300, "p50": 2.0, "p99": 9.0, "p99.9": 20.0, "max": 50.0, "mean": 3.0}
    update = {"count": 100, "p50": 8.0, "p99": 30.0, "p99.9": 40.0, "max": 45.0, "mean": 7.0}
    merged = {"count": 400, "p50": 3.0, "p99": 28.0, "p99.9": 39.0, "max": 50.0, "mean": 4.0}
    assert _all_operations({"read": read, "update": update}, merged) == merged
    older = _all_operations({"read": read, "update": update})
    assert older["p50"] == 8.0 and older["mean"] == 4.0 and older["max"] == 50.0
    assert _all_operations({}) == {}
