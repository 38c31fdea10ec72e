"""PostgreSQL 15 as a managed scratch server under pgbench, at tiny scale: runs, refusals, checks, cleanup."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from knobtune.report.summary_text import checkpoint_line
from knobtune.knobs import load_catalog
from knobtune.report import export_config, summarize
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target
from knobtune.systems.postgresql.target import PG_BIN, PG_USER
from knobtune.tuning import Tuner, Experiment, attrs, build_space

from conftest import tiny

pytestmark = pytest.mark.skipif(not (PG_BIN / "postgres").exists(), reason="PostgreSQL 15 is not installed")


@pytest.fixture(scope="module")
def postgresql():
    return load_catalog("postgresql")


def _live_servers(ours: tuple[int, ...] = ()) -> list[str]:
    """postgres processes still running that this test started: descendants of this process or of ``ours`` (a
    knobtune it started), at any depth, and those whose data folder is a knobtune home of one of them
    (/tmp/knobtune-pg-<pid>-...), which a server reparented to init after its knobtune was killed still names.

    Nothing else on the machine counts: another test run's servers, a cluster of the machine's own, initdb's
    single-user postgres under its shell. Zombies waiting for init to reap them are not running.
    """
    out = subprocess.run(["ps", "-eww", "-o", "pid=,ppid=,stat=,user=,args="], capture_output=True, text=True).stdout
    rows = {int(f[0]): (int(f[1]), f[2], f[3], f[4]) for f in (line.split(None, 4) for line in out.splitlines())
            if len(f) == 5}
    mine = {os.getpid(), *ours}

    def started_here(pid: int) -> bool:
        seen: set[int] = set()
        while pid in rows and pid not in seen:
            seen.add(pid)
            ppid, _, _, args = rows[pid]
            home = re.search(r"knobtune-pg-(\d+)-", args)
            if pid in mine or (home is not None and int(home.group(1)) in mine):
                return True
            pid = ppid
        return False

    return [args for pid, (_, stat, user, args) in rows.items()
            if user == PG_USER and not stat.startswith("Z") and started_here(pid)]


def test_a_run_counts_recovery_and_checkpoint_and_checks_tpcb(postgresql, tmp_path: Path) -> None:
    workload = tiny("pgbench-tpcb", 1000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        measurement = target.run(postgresql.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "run.log",
                                 seed=1)
    (phase,) = measurement.phases
    assert phase.name == "tpcb-like" and phase.ops == 1000 and phase.p99_us > 0
    assert measurement.verified, "TPC-B invariants are checked after every run"
    assert measurement.settle.recovery_s > 0 and measurement.settle.settle_s >= measurement.settle.recovery_s
    assert measurement.elapsed_s == pytest.approx(measurement.workload_s + measurement.settle.settle_s)
    assert measurement.peak_rss_bytes > 1_000_000
    counters = measurement.counters  # the server's own statistics over the run
    assert counters["checkpoints_timed"] + counters["checkpoints_requested"] >= 0 and counters["wal_bytes"] > 0
    assert counters["blocks_hit"] > 0 and 0 < counters["cache_hit_ratio"] <= 1
    assert measurement.summary()["counters"] == dict(counters)
    assert checkpoint_line(dict(counters)).startswith("the default ")  # what `show` prints from the real counters
    assert _live_servers() == []


def test_show_says_how_often_the_default_checkpointed_inside_its_run() -> None:
    assert checkpoint_line({"checkpoints_timed": 0, "checkpoints_requested": 0}) == \
        "the default did not checkpoint during its full-size run, besides the settle's own checkpoint"
    assert "checkpointed once during its full-size run (0 timed, 1 requested" in \
        checkpoint_line({"checkpoints_timed": 0, "checkpoints_requested": 1})
    assert "checkpointed 3 times during its full-size run (1 timed, 2 requested" in \
        checkpoint_line({"checkpoints_timed": 1, "checkpoints_requested": 2})
    assert checkpoint_line({"stall_share": 0.1}) is None  # a store without checkpoints


@pytest.mark.slow
def test_a_later_study_reuses_the_loaded_data(postgresql, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The load runs once for a workload at a scale and server version; the next target copies the kept data."""
    monkeypatch.setenv("KNOBTUNE_CACHE", str(tmp_path / "cache"))
    workload = tiny("pgbench-tpcb", 500)
    notes = []
    for scratch in ("first", "second"):
        with make_target(postgresql, workload, tmp_path / scratch) as target:
            notes.append(target.open_note())
            measured = target.run(postgresql.defaults(), workload.full, timeout_s=120,
                                  log_path=tmp_path / f"{scratch}.log", seed=1)
            assert measured.verified and measured.phases[0].ops == 500  # the TPC-B check holds on the copy
    assert notes[0].startswith("loaded pgbench-tpcb's data in") and "kept for later studies" in notes[0]
    assert notes[1].startswith("reused the data loaded by an earlier study")
    assert len(list((tmp_path / "cache" / "loaded").iterdir())) == 1
    assert _live_servers() == []


def test_a_value_the_server_refuses_is_a_refused_run_with_its_message(postgresql, tmp_path: Path) -> None:
    workload = tiny("pgbench-tpcb", 1000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        # no huge pages are set up on this machine
        with pytest.raises(RunFailure) as caught:
            target.run(postgresql.config({"huge_pages": "on"}), workload.full, timeout_s=60,
                       log_path=tmp_path / "run.log", seed=1)
    assert caught.value.kind is FailureKind.REFUSED
    assert "huge" in caught.value.reason.lower() or "shared memory" in caught.value.reason
    assert _live_servers() == []


def test_lost_commits_fail_the_run_as_data_loss(postgresql, tmp_path: Path) -> None:
    """A crash right after the run under synchronous_commit=off: acknowledged commits may be gone.

    A corrupted balance is the other way the TPC-B check fails; both give data loss, never a result.
    """
    workload = tiny("pgbench-tpcb", 3000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        with pytest.raises(RunFailure) as caught:
            target.run(postgresql.config({"synchronous_commit": "off", "wal_writer_delay": "10s"}), workload.full,
                       timeout_s=120, log_path=tmp_path / "run.log", seed=1)
    assert caught.value.kind is FailureKind.DATA_LOSS
    assert "rows for 3,000 transactions" in caught.value.reason or "invariant" in caught.value.reason


def test_a_broken_invariant_is_data_loss(postgresql, tmp_path: Path) -> None:
    workload = tiny("pgbench-tpcb", 1000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        data = target._restore()  # a server of the target's own, with one account's balance corrupted
        target._start(data, {}, tmp_path / "server.log")
        try:
            target._query("UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid = 1 RETURNING aid",
                          tmp_path / "corrupt.log")
            with pytest.raises(RunFailure) as caught:
                target._check(Counter(), tmp_path / "check.log")
        finally:
            target._stop_server(clean=False)
    assert caught.value.kind is FailureKind.DATA_LOSS and "TPC-B invariant broken" in caught.value.reason


def test_the_exported_include_file_loads_in_a_fresh_cluster(postgresql, tmp_path: Path) -> None:
    changes = {"shared_buffers": "256MiB", "work_mem": "8MiB", "checkpoint_timeout": "600s", "jit": False}
    conf = export_config_text(postgresql, changes)
    workload = tiny("pgbench-select", 1000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        data = target._restore()
        (data / "knobtune.conf").write_text(conf)
        with open(data / "postgresql.conf", "a") as main:
            main.write("include 'knobtune.conf'\n")
        target._start(data, {}, tmp_path / "server.log")
        try:
            shown = {name: target._query(f"SHOW {name}", tmp_path / f"{name}.log") for name in changes}
        finally:
            target._stop_server(clean=False)
    assert shown == {"shared_buffers": "256MB", "work_mem": "8MB", "checkpoint_timeout": "10min", "jit": "off"}


def export_config_text(catalog, changes: dict) -> str:
    from knobtune.systems import export_format

    return export_format("postgresql", "pgbench", "postgresql-conf").render(catalog, catalog.config(changes))


@pytest.mark.slow
def test_a_two_trial_study_end_to_end(postgresql, store) -> None:
    workload = tiny("pgbench-tpcb", 1000)
    settings = Experiment.of(study="pg", catalog=postgresql, workload=workload,
                             space=build_space(postgresql, ["shared_buffers", "work_mem", "wal_buffers"]),
                             search__sampler="random", search__seed=3, budget__trials=2, proof__verify_top=1,
                             proof__repeats=2, measurement__control_every=0,
                             research__rules=False, research__try_known_configs=False)
    study = Tuner(settings, store).run()
    summary = summarize(study, postgresql)
    assert summary.trials.counts["complete"] + summary.trials.counts["pruned"] + summary.trials.counts["timeout"] >= 1
    assert summary.cost.costs["default"]["recovery_s"] > 0
    assert summary.heading.export_formats[:2] == ("postgresql-conf", "alter-system")
    assert "ALTER SYSTEM SET" in export_config(summary, postgresql, "alter-system",
                                               {"work_mem": 8 * 2**20}) or summary.result_trial is None
    assert study.user_attrs[attrs.EXPERIMENT]["research"]["settle"] is True
    verification = study.user_attrs[attrs.VERIFICATION]
    if verification.get("candidates"):  # PGTune for this machine is measured beside the default and the result
        pgtune = next(c for c in verification["candidates"] if c["label"] == "pgtune (oltp)")
        assert pgtune["reference"] and pgtune["config"]["shared_buffers"] > 128 * 2**20
        assert "beside it, pgtune (oltp)" in verification["verdict"]
        assert verification["winner"] != "pgtune (oltp)"
    assert _live_servers() == []


@pytest.mark.slow
def test_no_server_is_left_after_knobtune_is_killed(tmp_path: Path) -> None:
    env = {**os.environ, "KNOBTUNE_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "knobtune.cli", "tune", "postgresql", "--workload", "pgbench-tpcb", "--records",
            "200000", "--trials", "5", "--study", "killed"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _live_servers((process.pid,)):
        time.sleep(0.2)
    assert _live_servers((process.pid,)), "the study should have started its server"
    time.sleep(1.0)
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 30  # its children notice the lost postmaster within seconds; more on a loaded machine
    while time.monotonic() < deadline and _live_servers((process.pid,)):
        time.sleep(0.2)
    assert _live_servers((process.pid,)) == [], "a postgres process outlived knobtune"


def test_ycsb_a_runs_over_a_usertable_and_checks_every_record_is_there(postgresql, tmp_path: Path) -> None:
    workload = tiny("ycsb-a", 2000)  # 2,000 records, 4,000 operations at full size
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        measurement = target.run(postgresql.defaults(), workload.rungs[1], timeout_s=120,
                                 log_path=tmp_path / "run.log", seed=1)
    (phase,) = measurement.phases
    assert phase.ops == workload.rungs[1].operations and phase.p99_us > 0
    assert measurement.verified and measurement.settle.recovery_s > 0
    argv = (tmp_path / "run.log").read_text()
    assert "ycsb" in phase.name and "transaction type: multiple scripts" in argv


@pytest.mark.slow
def test_a_crash_in_the_middle_of_a_run_loses_no_acknowledged_commit_by_default(postgresql, tmp_path: Path) -> None:
    """Killed mid-run, then recovered: every commit pgbench saw acknowledged is in pgbench_history.

    (Under synchronous_commit=off the loss is a matter of timing: the per-run check after the run catches it in
    test_lost_commits_fail_the_run_as_data_loss; killed mid-run, it lost none in 2 of 3 tries here.)
    """
    workload = tiny("pgbench-tpcb", 1000)
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        assert target.crash_check(postgresql.defaults(), tmp_path / "safe") is None
    acknowledged = sum(len(p.read_text().splitlines()) for p in (tmp_path / "safe" / "crash-check-latency").glob("tx*"))
    assert acknowledged > 100, "the server should have been killed while pgbench was committing"
    assert _live_servers() == []


@pytest.mark.slow
def test_tpcc_runs_its_mix_and_checks_conditions_1_to_4_and_one_history_row_per_payment(postgresql,
                                                                                        tmp_path: Path) -> None:
    workload = tiny("tpcc", 1500)  # 2 warehouses (loaded once, ~10 s), 1,500 transactions at full size
    with make_target(postgresql, workload, tmp_path / "scratch") as target:
        measurement = target.run(postgresql.defaults(), workload.full, timeout_s=120, log_path=tmp_path / "run.log",
                                 seed=1)
        assert measurement.verified and measurement.settle.recovery_s > 0
        (phase,) = measurement.phases
        assert phase.ops == 1500 and phase.p99_us > 0
        log = (tmp_path / "run.log").read_text()
        for script in ("new-order", "payment", "order-status", "delivery", "stock-level"):
            assert f"tpcc-{script}.sql" in log
        assert "number of failed transactions: 0 " in log

        assert target.crash_check(postgresql.defaults(), tmp_path / "crash") is None
        lines = [line.split() for p in (tmp_path / "crash" / "crash-check-latency").glob("tx*")
                 for line in p.read_text().splitlines()]
        assert sum(1 for fields in lines if fields[3:4] == ["1"]) > 50, "payments were being acknowledged at the kill"

        data = target._restore()  # a server of the target's own, its data corrupted two ways
        target._start(data, {}, tmp_path / "server.log")
        try:
            target._check(Counter(), tmp_path / "clean.log")  # the loaded data holds, no payment made
            target._query("UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 1 RETURNING w_id", tmp_path / "c1.log")
            with pytest.raises(RunFailure) as broken:
                target._check(Counter(), tmp_path / "check1.log")
            target._query("UPDATE warehouse SET w_ytd = w_ytd - 1 WHERE w_id = 1 RETURNING w_id", tmp_path / "c2.log")
            with pytest.raises(RunFailure) as lost:
                target._check(Counter({1: 3}), tmp_path / "check2.log")  # 3 payments committed, none in history
        finally:
            target._stop_server(clean=False)
    assert broken.value.kind is FailureKind.DATA_LOSS and "condition 1" in broken.value.reason
    assert lost.value.kind is FailureKind.DATA_LOSS and "history gained 0 rows for 3 transactions" in lost.value.reason
    assert _live_servers() == []


@pytest.mark.parametrize("name", ["pgbench-tpcb", "pgbench-select", "tpcc"])
def test_the_shipped_sizes_are_where_settings_can_matter(name: str, tmp_path: Path) -> None:
    """Data larger than the default's 128 MB of shared buffers and 8 clients or more (the reasons and the measured
    checkpoints are in each workload file and docs/findings.md); nothing runs here."""
    from knobtune.knobs import load_catalog
    from knobtune.workloads import load_workload

    catalog = load_catalog("postgresql")
    target = make_target(catalog, load_workload(name), tmp_path / "scratch")
    assert target.data_bytes() > catalog.knobs["shared_buffers"].default * 4
    assert target.pgbench.clients >= 8


def _kill_if_running(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_server_that_dies_under_a_config_is_its_crash_and_one_that_lives_is_the_machines(postgresql,
                                                                                            tmp_path: Path) -> None:
    """A query the server could not answer because it was dying (a Cassandra node out of memory reset its counters'
    query, then exited; it stopped a two-hour study as the machine's failure) is the config's crash, with the
    server's own last words; the same failure with the server alive stays the machine's."""
    from knobtune.systems.postgresql.target import PostgresTarget

    class DiesAtItsCounters(PostgresTarget):
        kill = True

        def read_counters(self, log: Path) -> dict[str, float]:
            if self.kill:  # the server dies on its own a moment after its client was cut off, as under an out-of-memory
                threading.Timer(1.0, _kill_if_running, (self._server.pid,)).start()
            raise RunFailure(FailureKind.TOOL, "reading the counters failed: no answer")

    workload = tiny("pgbench-tpcb", 200)
    with DiesAtItsCounters(postgresql, workload, tmp_path / "scratch") as target:
        with pytest.raises(RunFailure) as died:
            target.run(postgresql.defaults(), workload.full, timeout_s=60, log_path=tmp_path / "died.log", seed=1)
        assert died.value.kind is FailureKind.CRASH and "the server died under the config" in died.value.reason
        assert "reading the counters failed" in died.value.reason
        target.kill = False
        with pytest.raises(RunFailure) as unanswered:
            target.run(postgresql.defaults(), workload.full, timeout_s=60, log_path=tmp_path / "alive.log", seed=1)
        assert unanswered.value.kind is FailureKind.TOOL
    assert _live_servers() == []
