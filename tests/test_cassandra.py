"""Cassandra 5.0 as a scratch node under YCSB, at tiny sizes: runs with checked reads, refusals, data loss, cleanup."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from knobtune.knobs import load_catalog
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.tuning.search import counter_meanings
from knobtune.systems.cassandra.target import CassandraTarget
from knobtune.systems.cassandra.ycsb import YcsbResult
from knobtune.errors import WorkloadError

from conftest import tiny

pytestmark = pytest.mark.skipif(CassandraTarget.installed() is None,
                                reason="Cassandra's jars are not fetched (scripts/cassandra-fetch)")


@pytest.fixture(scope="module")
def cassandra():
    return load_catalog("cassandra")


def _nodes(marker: str) -> list[str]:
    """Cassandra JVMs whose command line names ``marker`` (a scratch folder of one test)."""
    out = subprocess.run(["ps", "-ww", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if "CassandraDaemon" in line and marker in line and not line.strip().startswith("Z")]


def test_every_counter_is_described_with_a_unit_and_where_it_is_read() -> None:
    for name, entry in counter_meanings("cassandra").items():
        assert entry.meaning and entry.read and entry.unit in ("s", "bytes", "count", "ratio"), name


def _check_counters(run_counters: dict[str, float]) -> None:
    """A write workload's counters from the node itself: each described, each finite and plausible."""
    described = counter_meanings("cassandra")
    assert set(run_counters) <= set(described), f"undescribed: {set(run_counters) - set(described)}"
    assert {"pending_compactions_end", "compactions_completed", "compacted_bytes", "memtable_flushes",
            "memtable_switches", "gc_pause_s", "gc_pause_share", "dropped_mutations",
            "key_cache_hit_ratio"} <= set(run_counters)
    assert all(math.isfinite(value) and value >= 0 for value in run_counters.values()), run_counters
    assert run_counters["gc_pause_share"] < 1 and run_counters["key_cache_hit_ratio"] <= 1
    assert "row_cache_hit_ratio" not in run_counters, "the row cache is off by default: no ratio, not 0"
    if "heap_used_peak_bytes_end" in run_counters:  # a node that collected at least once (it does while starting)
        assert 2**20 < run_counters["heap_used_peak_bytes_end"] <= 2**30, "within the default's 1 GiB heap"


@pytest.mark.slow
def test_a_node_runs_ycsb_with_every_read_checked_refuses_what_cassandra_refuses_and_catches_lost_rows(
        cassandra, tmp_path: Path) -> None:
    workload = tiny("ycsb-a", 1000)  # 1,000 records loaded once, 2,000 operations at full size
    scratch = tmp_path / "scratch"
    unpacked_before = _unpacked_in_tmp()
    with make_target(cassandra, workload, scratch) as target:
        measurement = target.run(cassandra.config({"concurrent_reads": 16, "compaction_throughput": "32MiB"}),
                                 workload.full, timeout_s=300, log_path=tmp_path / "run.log", seed=1)
        run = measurement.phases[0]
        assert run.ops == 2000 and run.found == run.expected > 500, "about half the operations are checked reads"
        assert {p.name for p in measurement.phases} == {"run", "read", "update"} and run.p99_us > 0
        assert measurement.settle.recovery_s > 0 and measurement.peak_rss_bytes > 500 * 2**20
        assert measurement.settle.settle_s == measurement.settle.recovery_s + measurement.settle.compaction_s
        assert "settle: idle after" in (tmp_path / "run.settle.log").read_text(), "flush and compaction waited for"
        node_yaml = (scratch / "node" / "run" / "cassandra.yaml").read_text()
        assert "concurrent_reads: 16" in node_yaml and "compaction_throughput: 32MiB/s" in node_yaml
        _check_counters(dict(measurement.counters))
        assert "Using G1" in (scratch / "node" / "run" / "logs" / "gc.log").read_text(), "the JVM writes its GC log"

        # group sync needs a window: Cassandra says so
        with pytest.raises(RunFailure) as refused:
            target.run(cassandra.config({"commitlog_sync": "group"}), workload.full, timeout_s=300,
                       log_path=tmp_path / "refused.log", seed=1)
        assert refused.value.kind is FailureKind.REFUSED and "commitlog_sync_group_window" in refused.value.reason

        for table in (scratch / "node" / "pristine" / "data" / "ycsb").glob("usertable-*"):  # lose every row
            shutil.rmtree(table)
            table.mkdir()
        with pytest.raises(RunFailure) as lost:
            target.run(cassandra.defaults(), workload.rungs[0], timeout_s=300, log_path=tmp_path / "lost.log", seed=1)
        assert lost.value.kind is FailureKind.DATA_LOSS and "did not return what was written" in lost.value.reason
    assert _nodes(str(tmp_path)) == []
    assert _unpacked_in_tmp() <= unpacked_before, "a killed node leaves no native library in the machine's /tmp"


def _unpacked_in_tmp() -> set[str]:
    """The native libraries Java's compression libraries unpack into the machine's temporary folder."""
    return {p.name for pattern in ("liblz4-java-*", "snappy-*-libsnappyjava.so")
            for p in Path(tempfile.gettempdir()).glob(pattern)}


# YCSB's summary of a run whose node died of a direct-memory OutOfMemoryError halfway (a ranking's sample at
# 1,000,000 records, 2026-11-26): every read after it failed, and YCSB's check counted each failed read as ERROR
_DIED_HALFWAY = """[READ], Return=OK, 59530
[READ], Return=ERROR, 60675
[UPDATE], Return=OK, 59267
[UPDATE], Return=ERROR, 60528
[VERIFY], Return=OK, 59530
[VERIFY], Return=ERROR, 60675
[READ-FAILED], Operations, 60675
"""


def test_reads_that_failed_are_failed_operations_and_only_rows_missing_beyond_them_are_lost() -> None:
    died = YcsbResult(_DIED_HALFWAY)
    assert not died.lost and died.verify_errors == 0 and died.verified == 59530
    assert died.failed == "60,675 READ ERROR; 60,528 UPDATE ERROR", "a crash with its failed operations"
    missing = YcsbResult(_DIED_HALFWAY.replace("[VERIFY], Return=ERROR, 60675", "[VERIFY], Return=ERROR, 60700"))
    assert missing.lost and missing.verify_errors == 25 and missing.failed.startswith("data loss: 25 reads")
    wrong = YcsbResult("[READ], Return=OK, 10\n[VERIFY], Return=OK, 9\n[VERIFY], Return=UNEXPECTED_STATE, 1\n")
    assert wrong.lost and wrong.verify_errors == 1 and "UNEXPECTED_STATE 1" in wrong.failed


@pytest.mark.slow
def test_a_later_study_reuses_the_loaded_node_for_any_mix_over_the_same_records(cassandra, tmp_path: Path,
                                                                                 monkeypatch) -> None:  # noqa: ANN001
    """The load runs once for the same records; a study of another mix over them copies the kept node, listens on
    ports of its own, and every read still finds what was loaded; other records are another load (by the key the
    kept copies are found by: a third node would only load again). The one loaded runs unsettled (the settle's
    kill and restart are the other tests'); the reused one settles, as a study's would."""
    import knobtune.server.loaded as loaded

    def key(name: str, records: int) -> str:
        return loaded.loaded_key(make_target(cassandra, tiny(name, records), tmp_path / "keys").loaded_inputs())

    assert key("ycsb-a", 500) == key("ycsb-b", 500) != key("ycsb-a", 600)
    monkeypatch.setattr(loaded, "cache_root", lambda: tmp_path / "cache")  # KNOBTUNE_CACHE also holds the jars
    notes = []
    for scratch, name in (("first", "ycsb-a"), ("second", "ycsb-b")):
        workload = tiny(name, 500)
        if scratch == "second":  # a warm-up before the measured window (ycsb-a-1m has one)
            workload = dataclasses.replace(workload, drivers={
                "ycsb": {**workload.drivers["ycsb"], "warm_up_operations": 3000}})
        with make_target(cassandra, workload, tmp_path / scratch, settle=scratch == "second") as target:
            notes.append(target.open_note())
            measured = target.run(cassandra.defaults(), workload.rungs[0], timeout_s=300,
                                  log_path=tmp_path / f"{scratch}.log", seed=1)
            run = measured.phases[0]
            assert measured.verified and run.found == run.expected > 0
            if scratch == "second":
                whole = YcsbResult((tmp_path / "second.log").read_text())
                assert run.ops == workload.rungs[0].operations and whole.total == run.ops + 3000
                assert 0 < run.seconds < whole.seconds and len(whole.progress) >= 2, "the warm-up's time is left out"
    assert notes[0].startswith("loaded ycsb-a's data in") and "kept for later studies" in notes[0]
    assert notes[1].startswith("reused the data loaded by an earlier study"), "another mix over the same records"
    assert len(list((tmp_path / "cache").iterdir())) == 1
    assert _nodes(str(tmp_path)) == []


@pytest.mark.slow
def test_no_node_is_left_after_knobtune_is_killed(tmp_path: Path) -> None:
    env = {**os.environ, "KNOBTUNE_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "knobtune.cli", "tune", "cassandra", "--workload", "ycsb-a", "--records", "1000",
            "--trials", "3", "--study", "killed"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _nodes(str(tmp_path)):
        time.sleep(0.2)
    assert _nodes(str(tmp_path)), "the study should have started its node"
    time.sleep(1.0)
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _nodes(str(tmp_path)):
        time.sleep(0.2)
    assert _nodes(str(tmp_path)) == [], "a Cassandra JVM outlived knobtune"


@pytest.mark.parametrize("value", [-1, 1.5, True, "many"])
def test_a_warm_up_that_is_not_a_count_of_operations_is_refused_in_one_line(cassandra, value, tmp_path: Path) -> None:
    workload = tiny("ycsb-a", 500)
    workload = dataclasses.replace(workload,
                                   drivers={"ycsb": {**workload.drivers["ycsb"], "warm_up_operations": value}})
    with pytest.raises(WorkloadError, match="warm_up_operations .* is not a whole number of operations. Fix: "):
        make_target(cassandra, workload, tmp_path / "scratch")
