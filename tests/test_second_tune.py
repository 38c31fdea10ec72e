"""A second `tune` of a study another live process runs in SQLite is refused in one line, and harms nothing."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from knobtune.storage import open_store
from knobtune.tuning import attrs
from knobtune.tuning.loop import lock_path

pytestmark = pytest.mark.slow

STUDY = "busy"


def _tune(home: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", "fillrandom", "--records", "40000",
            "--trials", "40", "--study", STUDY, "--dir", str(home), "--sampler", "random", "--verify-top", "0", *extra]


def _study(home: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{home / 'studies.db'}")


def _db_bench_under(home: Path) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"db_bench.*{home}"], capture_output=True, text=True).stdout.split()


def _running_of(home: Path, pid: int) -> list[optuna.trial.FrozenTrial]:
    return [t for t in _study(home).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if t.user_attrs.get(attrs.WORKER) == f"{socket.gethostname()}:{pid}"]


def test_a_second_tune_of_a_running_sqlite_study_is_refused_naming_the_first(tmp_path: Path) -> None:
    home, log = tmp_path / "studies", tmp_path / "first.log"
    first = subprocess.Popen(_tune(home), stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if "rung" in log.read_text() and _running_of(home, first.pid) and _db_bench_under(home):
            break  # (the SQLite file is read only once the first has made it: "rung" is printed after)
    else:
        first.kill()
        pytest.fail("the first tune never ran a trial: " + log.read_text()[-2000:])
    before = _study(home)
    settings, deadline_attr = before.user_attrs[attrs.EXPERIMENT], before.user_attrs.get(attrs.DEADLINE)

    second = subprocess.Popen(_tune(home, "--time", "5m"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 2, out + err
    assert out == "" and len(err.strip().splitlines()) == 1, out + err
    assert f"study '{STUDY}' is being run by another knobtune process (pid {first.pid} on {socket.gethostname()})" \
           in err, err
    assert "Fix: wait for it to end, or stop it" in err and "PostgreSQL storage" in err and "knobtune worker" in err

    # the first is unharmed: still running its study as it was asked to, and nothing of the second's is in it
    assert first.poll() is None, log.read_text()[-2000:]
    after = _study(home)
    assert after.user_attrs[attrs.EXPERIMENT] == settings and after.user_attrs.get(attrs.DEADLINE) == deadline_attr
    assert all(t.user_attrs.get(attrs.WORKER, "").endswith(f":{first.pid}") for t in after.trials
               if attrs.WORKER in t.user_attrs)
    finished = len([t for t in after.trials if t.state.is_finished()])
    limit = time.monotonic() + 60
    while len([t for t in _study(home).trials if t.state.is_finished()]) <= finished + 1:  # it goes on
        assert time.monotonic() < limit and first.poll() is None, log.read_text()[-2000:]
        time.sleep(0.2)

    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 143, log.read_text()[-2000:]
    assert "stopped (SIGTERM): finished trials are kept" in log.read_text()
    assert _db_bench_under(home) == []
    assert list((home / "scratch").glob("*")) == []
    assert not lock_path(open_store(home), STUDY).exists()  # released: the next tune of the study may run it
    trials = _study(home).trials
    assert [t.number for t in trials if t.state == TrialState.RUNNING] == []
    assert len([t for t in trials if t.user_attrs.get(attrs.OUTCOME) == "interrupted"]) <= 1
