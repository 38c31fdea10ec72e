"""A PostgreSQL capture (the server's CSV log and a dump) replayed under configs, on real PostgreSQL at tiny sizes.

One capture is made for the module from a real pgbench TPC-B run at scale 1 with 8 clients: every transaction
updates the one branch row, so it is also the contended capture on which Debian's pgreplay 1.2.0 hangs.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knobtune.errors import WorkloadError
from knobtune.knobs import load_catalog
from knobtune.report.summary_text import capture_lines
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import make_target, reclaim_server_homes
from knobtune.systems.postgresql import capture
from knobtune.systems.postgresql.pglog import fingerprint
from knobtune.systems.postgresql.replay import PostgresReplayTarget, find_replayer
from knobtune.systems.postgresql.server import PG_BIN
from knobtune.workloads import Objective, load_workload

from conftest import cache_of_its_own, tiny

pytestmark = pytest.mark.skipif(not (PG_BIN / "postgres").exists(), reason="PostgreSQL 15 is not installed")
CLIENTS, TRANSACTIONS = 8, 600


@pytest.fixture(scope="module")
def postgresql():
    return load_catalog("postgresql")


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """Every capture here is new (its dump differs): its restored copy goes to a cache of this module's own."""
    with cache_of_its_own(tmp_path_factory.mktemp("cache")):
        yield


@pytest.fixture(scope="module")
def captured(tmp_path_factory, own_cache) -> Path:
    """A capture of a real pgbench TPC-B run: 8 clients on one branch row (contended), 600 transactions."""
    find_replayer()
    kit = tiny("pgbench-tpcb", TRANSACTIONS)
    kit = dataclasses.replace(kit, drivers={"pgbench": {**kit.drivers["pgbench"], "scale": 1, "clients": CLIENTS}})
    folder = tmp_path_factory.mktemp("capture") / "kit.capture"
    summary = capture.from_workload(kit, folder, "kit", None)
    # pgbench's clients, and its own first session that reads the scale (two queries)
    assert summary.sessions == CLIENTS + 1 and summary.operations == 7 * TRANSACTIONS + 2
    return folder


def test_a_capture_is_private_and_says_fingerprints_not_statements(captured: Path) -> None:
    assert captured.stat().st_mode & 0o777 == 0o700
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in captured.iterdir())
    workload = load_workload(captured)
    summary = workload.capture
    assert workload.objective.value == "p99_us" and workload.records == summary.operations
    assert summary.mix["UPDATE"] == 3 * TRANSACTIONS and summary.mix["INSERT"] == TRANSACTIONS
    texts = [f.text for f in summary.fingerprints]
    assert "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2;" in texts
    assert workload.drivers["replay"]["nondeterministic"] == ["pgbench_history.mtime"]
    toml = (captured / "capture.toml").read_text()
    assert "parameters" not in toml and "$1 = '" not in toml


def test_fingerprints_strip_constants() -> None:
    assert fingerprint("SELECT * FROM t WHERE a = 'x''y' AND b IN (1, 2, 3) AND c > -4.5e3 AND t2.d = $1") == \
        "SELECT * FROM t WHERE a = ? AND b IN (?, ...) AND c > ? AND t2.d = $1"
    assert fingerprint("insert into t values ($$secret$$, E'x') -- note 42") == "insert into t values (?, ...)"


@pytest.mark.slow
def test_the_replay_runs_under_two_configs_and_a_contended_capture_never_hangs(postgresql, captured: Path,
                                                                              tmp_path: Path) -> None:
    workload = load_workload(captured)
    fast = dataclasses.replace(workload, drivers={"replay": {**workload.drivers["replay"], "pace": "fast"}},
                               objective=Objective.ELAPSED_S)
    changed = {**postgresql.defaults(), "shared_buffers": 64 * 2**20, "work_mem": 16 * 2**20}
    for replayed, rung in ((workload, workload.rungs[0]), (fast, fast.full)):
        with make_target(postgresql, replayed, tmp_path / "scratch", driver="replay") as target:
            # no reference yet: the default's replay runs first, outside this run
            started = time.monotonic()
            measurement = target.run(changed, rung, timeout_s=120, log_path=tmp_path / f"{rung.index}.log", seed=1)
            assert time.monotonic() - started < 120, "the contended capture should replay without hanging"
        (phase,) = measurement.phases
        assert phase.ops == rung.records and phase.p99_us > 0 and measurement.verified
        assert measurement.counters["replay_failed_statements"] == 0
        assert measurement.counters["replayer_cpu_s"] > 0 and measurement.counters["replay_server_cpu_s"] > 0
        assert (tmp_path / f"{rung.index}.default-reference.log").exists(), "the default's reference replay ran first"


class ReadOnlyWhenChanged(PostgresReplayTarget):
    """The server turns every transaction read-only under any changed config: the replay's writes fail there."""

    def start_argv(self, data, config):
        argv = super().start_argv(data, config)
        return argv if self.is_default(config) else argv + ["-c", "default_transaction_read_only=on"]


@pytest.mark.slow
def test_a_config_under_which_the_replay_changes_rows_fails_as_data_loss(postgresql, captured: Path,
                                                                           tmp_path: Path) -> None:
    workload = load_workload(captured)
    with ReadOnlyWhenChanged(postgresql, workload, tmp_path / "scratch", settle=False) as target:
        target.run(postgresql.defaults(), workload.rungs[0], timeout_s=120, log_path=tmp_path / "default.log", seed=1)
        with pytest.raises(RunFailure) as lost:
            target.run({**postgresql.defaults(), "work_mem": 8 * 2**20}, workload.rungs[0], timeout_s=120,
                       log_path=tmp_path / "changed.log", seed=1)
    assert lost.value.kind is FailureKind.DATA_LOSS
    assert "pgbench_" in lost.value.reason and "default's replay" in lost.value.reason


def _one_line_fix(error: WorkloadError) -> str:
    message = str(error)
    assert "\n" not in message and "Fix:" in message
    return message


def test_bad_inputs_give_one_line_with_the_fix_and_write_nothing(captured: Path, tmp_path: Path) -> None:
    log, dump = captured / capture.LOG_FILE, captured / "dump.custom"
    stderr_log = tmp_path / "postgresql.log"
    stderr_log.write_text("2026-11-27 19:22:47.285 UTC [11985] LOG:  statement: SELECT 1\n")
    cut_log = tmp_path / "cut.csv"
    cut_log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    cut_dump = tmp_path / "cut.dump"
    cut_dump.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])
    cases = ((stderr_log, dump, "not a CSV log"), (log, tmp_path / "missing.dump", "needs the dump"),
             (log, None, "needs the dump"), (cut_log, dump, "truncated"), (log, cut_dump, "truncated"))
    for number, (source, state, said) in enumerate(cases):
        out = tmp_path / f"out{number}"
        with pytest.raises(WorkloadError) as refused:
            capture.from_files(source, state, out, "bad")
        assert said in _one_line_fix(refused.value)
        assert not out.exists()


def test_knobtune_killed_mid_replay_leaves_no_process_and_no_scratch(captured: Path, tmp_path: Path) -> None:
    env = {**os.environ, "KNOBTUNE_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "knobtune.cli", "tune", "postgresql", "--workload", str(captured), "--trials", "3",
            "--study", "killed"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not _ours(process.pid, "pgreplay-kt"):
        time.sleep(0.1)
    assert _ours(process.pid, "pgreplay-kt"), "the study should have started a replay"
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (_ours(process.pid, "pgreplay-kt") or _ours(process.pid, "postgres")):
        time.sleep(0.2)
    assert not _ours(process.pid, "pgreplay-kt") and not _ours(process.pid, "postgres")
    reclaim_server_homes()  # what the next knobtune does first
    assert not list(Path("/tmp").glob(f"knobtune-pg-{process.pid}-*"))


def _ours(pid: int, program: str) -> list[str]:
    """Live processes of ``program`` whose command line names the killed knobtune's server home."""
    out = subprocess.run(["ps", "-eww", "-o", "stat=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if program in line and f"knobtune-pg-{pid}-" in line
            and not line.lstrip().startswith("Z")]


def test_a_pace_and_an_objective_that_do_not_go_together_are_refused(postgresql, captured: Path,
                                                                       tmp_path: Path) -> None:
    workload = load_workload(captured)
    fast = dataclasses.replace(workload, drivers={"replay": {**workload.drivers["replay"], "pace": "fast"}})
    with pytest.raises(WorkloadError, match="objective = 'elapsed_s'"):
        PostgresReplayTarget(postgresql, fast, tmp_path / "scratch")


def test_show_says_what_was_replayed_and_how_well_the_default_kept_the_pace(captured: Path) -> None:
    summary = load_workload(captured).capture
    lines = capture_lines(summary.record(), {"replay_lag_p99_s": 0.25, "replay_lag_max_s": 0.5})
    assert lines[0].startswith(f"postgresql capture: {summary.operations:,} operations")
    assert any("UPDATE pgbench_branches" in line for line in lines)
    assert "behind the captured schedule by 0.250 s at p99 (0.500 s at most" in lines[-1]
    assert capture_lines({}, {}) == []
