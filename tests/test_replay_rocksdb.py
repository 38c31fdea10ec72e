"""Captures of RocksDB work, replayed: real traces (kvbench runs traced by RocksDB's own tracer), real replays
through RocksDB's Replayer under real configs, the store's digest as the data check, and bad captures refused."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knobtune.errors import WorkloadError
from knobtune.storage import open_store
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.systems.rocksdb.capture import from_files, from_workload
from knobtune.workloads import load_workload
from knobtune.workloads.capture import spread_windows

from conftest import kill_while

RECORDS = 3000  # ycsb-a at 3,000 records: a 3 MB checkpoint and 6,000 traced operations


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture of ycsb-a's run phase, traced by RocksDB from kvbench's run (its load phase in the checkpoint)."""
    out = tmp_path_factory.mktemp("captures") / "ycsb-a.capture"
    from_workload(load_workload("ycsb-a"), out, "ycsb-a-capture", RECORDS)
    return out


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "knobtune.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix:" in lines[0], result.stderr
    return lines[0]


def test_a_capture_is_private_and_says_what_it_holds_without_its_data(capture: Path) -> None:
    for path in (capture, *capture.rglob("*")):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path} is readable by others"
    workload = load_workload(capture)
    assert workload.capture is not None and workload.counts == "operations"
    assert workload.records == workload.capture.operations == 2 * RECORDS  # ycsb-a runs 2 operations per record
    assert set(workload.capture.mix) == {"get", "put"} and sum(workload.capture.mix.values()) == 2 * RECORDS
    assert workload.key_size == 24 and workload.value_size == 1000  # the trace's mean sizes: the workload's shape
    assert (capture / "checkpoint" / "CURRENT").is_file()
    shown = "\n".join(workload.capture.lines())
    assert "get" in shown and "put" in shown and "user" not in shown  # ycsb's keys start "user": never printed


def test_a_capture_others_can_read_is_refused(capture: Path, tmp_path: Path) -> None:
    copy = tmp_path / "open.capture"
    shutil.copytree(capture, copy)
    copy.chmod(0o755)
    with pytest.raises(WorkloadError, match="readable by others.*chmod -R go-rwx"):
        load_workload(copy)


def test_replays_under_two_configs_give_the_same_store(rocksdb, capture: Path, tmp_path: Path) -> None:
    workload = load_workload(capture)
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        assert target.driver == "replay"
        runs = []
        for changes in ({}, {"write_buffer_size": "1MiB", "compression_type": "lz4", "bloom_bits": 10}):
            runs.append(target.run(rocksdb.config(changes), workload.full, timeout_s=None,
                                   log_path=tmp_path / f"run-{len(runs)}.log",
                                   seed=1))
    for run in runs:
        assert run.verified and run.settle is not None
        assert run.phases[0].ops == workload.records and run.phases[0].p99_us
        assert run.counters["replay_errors"] == 0
    assert not any((tmp_path / "scratch").glob("db-*")), "a replayed store was left behind"


def test_a_rung_replays_the_first_fraction_and_a_first_changed_config_measures_the_default_first(
        rocksdb, capture: Path, tmp_path: Path) -> None:
    workload = load_workload(_edited(capture, tmp_path / "first.capture", "slices", "1"))
    rung = workload.rungs[0]
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        run = target.run(rocksdb.config({"max_background_jobs": 4}), rung, timeout_s=None,
                         log_path=tmp_path / "run.log", seed=1)
    assert run.phases[0].ops == rung.records == round(0.1 * workload.records)
    assert run.verified
    assert (tmp_path / "run.default-reference.log").is_file()  # the default's replay, the check's reference


def _edited(capture: Path, copy: Path, field: str, value: str) -> Path:
    """A copy of the capture whose ``[drivers.replay]`` sets ``field`` to ``value``."""
    shutil.copytree(capture, copy)
    toml = copy / "capture.toml"
    lines = [line for line in toml.read_text().splitlines() if not line.startswith(f"{field} =")]
    at = lines.index("[drivers.replay]") + 1
    toml.write_text("\n".join([*lines[:at], f"{field} = {value}", *lines[at:]]) + "\n")
    return copy


@pytest.mark.parametrize("total,wanted,slices", [(1000, 100, 4), (300000, 30000, 4), (7, 5, 3), (10, 3, 4),
                                                  (1000, 1000, 4), (1000, 100, 1), (5, 9, 2)])
def test_slices_are_spread_over_the_capture_apart_and_hold_the_rung(total: int, wanted: int, slices: int) -> None:
    windows = spread_windows(total, wanted, slices)
    assert sum(end - begin for begin, end in windows) == min(wanted, total)
    assert all(begin < end <= total for begin, end in windows)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))
    assert windows[0][0] == 0 and len(windows) == (1 if slices == 1 or wanted >= total else min(slices, wanted))
    if len(windows) > 1:
        assert [begin for begin, _ in windows] == [i * total // len(windows) for i in range(len(windows))]


def test_a_rung_of_slices_replays_records_spread_over_the_capture(rocksdb, capture: Path, tmp_path: Path) -> None:
    assert "slices = 4" in (capture / "capture.toml").read_text()  # what `capture` writes
    workload = load_workload(capture)
    rung = workload.rungs[0]
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        run = target.run(rocksdb.config({"max_background_jobs": 4}), rung, timeout_s=None,
                         log_path=tmp_path / "run.log", seed=1)
        full = target.run(rocksdb.defaults(), workload.full, timeout_s=None, log_path=tmp_path / "full.log", seed=1)
    assert run.verified and run.phases[0].ops == rung.records and full.phases[0].ops == workload.records
    quarter = workload.records // 4
    windows = json.loads((tmp_path / "run.spec.json").read_text())["windows"]
    assert [begin for begin, _ in windows] == [0, quarter, 2 * quarter, 3 * quarter]
    assert sum(end - begin for begin, end in windows) == rung.records
    assert "windows" not in json.loads((tmp_path / "full.spec.json").read_text())  # the whole capture: no slices


def test_rewrite_compacts_the_checkpoint_under_the_config_outside_the_measured_time(
        rocksdb, capture: Path, tmp_path: Path) -> None:
    workload = load_workload(_edited(capture, tmp_path / "rewritten.capture", "rewrite", "true"))
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        run = target.run(rocksdb.config({"block_size": "64KiB", "compression_type": "lz4"}), workload.full,
                         timeout_s=None, log_path=tmp_path / "run.log", seed=1)
    assert run.verified and run.phases[0].ops == workload.records  # the same data: the default's digest
    result = json.loads((tmp_path / "run.result.json").read_text())
    assert result["replay"]["rewrite_s"] > 0
    assert run.elapsed_s > 0 and result["stats"]["compact_write_bytes"] > 0  # the checkpoint's tables written again


def test_a_config_that_loses_writes_fails_as_data_loss(rocksdb, capture: Path, tmp_path: Path) -> None:
    # manual_wal_flush keeps the WAL's tail in memory until the application flushes it: the crash that ends every
    # run loses those writes, and the store after the replay is not the default's.
    workload = load_workload(capture)
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        target.run(rocksdb.defaults(), workload.full, timeout_s=None, log_path=tmp_path / "default.log", seed=1)
        with pytest.raises(RunFailure) as caught:
            target.run(rocksdb.config({"manual_wal_flush": True}), workload.full, timeout_s=None,
                       log_path=tmp_path / "fifo.log", seed=1)
    assert caught.value.kind is FailureKind.DATA_LOSS and "digest" in caught.value.reason


@pytest.mark.slow
def test_tune_on_a_capture_gives_a_verified_verdict(capture: Path, tmp_path: Path) -> None:
    result = _cli("tune", "rocksdb", "--workload", str(capture), "--trials", "3", "--repeats", "2",
                  "--dir", str(tmp_path / "studies"), "--study", "app")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict:" in result.stdout and "replay" in result.stdout
    assert "Assertions are enabled" not in result.stdout + result.stderr
    shown = _cli("show", "app", "--dir", str(tmp_path / "studies"))
    assert shown.returncode == 0 and "rocksdb capture: 6,000 operations" in shown.stdout, shown.stdout


@pytest.mark.parametrize("damage", ["truncated", "not-a-trace", "another-system", "missing-checkpoint"])
def test_a_bad_capture_gives_one_line_and_writes_nothing(capture: Path, tmp_path: Path, damage: str) -> None:
    source, state = tmp_path / "app.trace", capture / "checkpoint"
    trace = (capture / "trace").read_bytes()
    if damage == "truncated":
        source.write_bytes(trace[: len(trace) * 2 // 3])
    elif damage == "not-a-trace":
        source.write_text("this is not a trace\n" * 100)
    elif damage == "another-system":  # a PostgreSQL log where the trace should be
        source.write_text("2026-11-27 10:00:00.000 UTC|bench|bench|1|LOG:  statement: SELECT 1\n" * 50)
    else:
        source.write_bytes(trace)
        state = tmp_path / "no-such-checkpoint"
    out = tmp_path / "out.capture"
    line = _one_error(_cli("capture", "rocksdb", "--from", str(source), "--state", str(state), "-o", str(out)))
    assert not out.exists(), "a refused capture left its folder"
    expected = {"truncated": "cut short", "not-a-trace": "not a RocksDB trace",
                "another-system": "not a RocksDB trace", "missing-checkpoint": "does not exist"}[damage]
    assert expected in line, line


def test_an_imported_trace_and_checkpoint_replay_as_the_capture_did(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "imported.capture"
    summary = from_files(capture / "trace", capture / "checkpoint", out, "imported")
    assert summary.operations == 2 * RECORDS
    assert load_workload(out).capture.files == load_workload(capture).capture.files  # the same bytes, copied


def _kvbench_under(folder: Path) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"kvbench.*{folder}"], capture_output=True, text=True).stdout.split()


@pytest.mark.slow
def test_sigkill_mid_replay_leaves_no_process_and_its_scratch_is_reclaimed(capture: Path, tmp_path: Path) -> None:
    home = tmp_path / "studies"
    log = tmp_path / "out.log"
    process = subprocess.Popen([sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", str(capture),
                                "--trials", "50", "--dir", str(home), "--study", "killed"],
                               stdout=log.open("w"), stderr=subprocess.STDOUT)
    killed = kill_while(process.pid, lambda: "rung" in log.read_text() and _kvbench_under(home), limit_s=180)
    assert killed, "no replay started: " + log.read_text()
    process.wait()
    gone_by = time.monotonic() + 2  # the kernel's SIGKILL to the children (PR_SET_PDEATHSIG) lands at once
    while _kvbench_under(home) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert _kvbench_under(home) == [], "kvbench outlived the killed knobtune"
    assert list((home / "scratch").glob("*")), "expected the killed run's scratch (it had no chance to clean up)"
    assert open_store(home).remove_stale_scratch() > 0  # what every running command does first (cli/options.reclaim)
    assert not list((home / "scratch").glob("*")), "the killed run's scratch was not reclaimed"


@pytest.mark.parametrize("damage,said", [
    ("checkpoint-file", "SHA-256 differs"), ("checkpoint-extra", "does not hold the files the capture recorded"),
    ("trace-outside", "is not a file of the capture folder"), ("checkpoint-outside", "is not a folder of the capture"),
])
def test_a_capture_changed_since_or_pointing_outside_is_refused(rocksdb, capture: Path, tmp_path: Path, damage: str,
                                                                said: str) -> None:
    copy = tmp_path / "copy.capture"
    shutil.copytree(capture, copy)
    checkpoint = copy / "checkpoint"
    toml = copy / "capture.toml"
    if damage == "checkpoint-file":
        victim = next(p for p in sorted(checkpoint.iterdir()) if p.name.startswith("OPTIONS"))
        victim.write_text(victim.read_text() + "\n")
    elif damage == "checkpoint-extra":
        (checkpoint / "000999.sst").write_bytes(b"x")
        (checkpoint / "000999.sst").chmod(0o600)
    elif damage == "trace-outside":
        toml.write_text(toml.read_text().replace('trace = "trace"', f'trace = "{capture / "trace"}"'))
    else:  # a checkpoint beside the capture, not in it
        shutil.copytree(checkpoint, tmp_path / "checkpoint")
        toml.write_text(toml.read_text().replace('checkpoint = "checkpoint"', 'checkpoint = "../checkpoint"'))
    with pytest.raises(WorkloadError) as refused:
        make_target(rocksdb, load_workload(copy), tmp_path / "scratch", driver="replay")
    assert said in str(refused.value) and "Fix:" in str(refused.value) and "\n" not in str(refused.value)
