"""A study killed with SIGKILL mid-trial resumes with every finished trial kept and nothing left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy.exc
from optuna.trial import TrialState

from knobtune.storage import open_store
from knobtune.tuning import attrs

from conftest import kill_while

pytestmark = pytest.mark.slow


def _tune(home: Path, trials: int) -> list[str]:
    return [sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", "put-get-delete",
            "--records", "30000", "--trials", str(trials), "--study", "resume", "--dir", str(home),
            "--sampler", "random", "--verify-top", "0"]


def _db_bench_under(folder: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-f", f"db_bench.*{folder}"], capture_output=True, text=True).stdout
    return found.split()


def test_sigkill_then_resume(tmp_path: Path) -> None:
    home = tmp_path / "studies"
    process = subprocess.Popen(_tune(home, 40), stdout=(tmp_path / "out.log").open("w"),
                               stderr=subprocess.STDOUT)
    storage_url = f"sqlite:///{home / 'studies.db'}"
    deadline = time.monotonic() + 120
    log = tmp_path / "out.log"
    while "rung" not in log.read_text() and time.monotonic() < deadline:  # opening the SQLite file before
        time.sleep(0.2)  # knobtune has made its tables would race it for the schema

    def mid_trial() -> tuple[list[optuna.trial.FrozenTrial], list[optuna.trial.FrozenTrial]] | None:
        """(finished, running) trials once 3 have finished and one runs db_bench; None before (or while the paused
        process holds SQLite's write lock)."""
        try:
            trials = optuna.load_study(study_name="resume", storage=storage_url).get_trials(deepcopy=False)
        except (sqlalchemy.exc.OperationalError, optuna.exceptions.StorageInternalError):
            return None
        finished = [t for t in trials if t.state.is_finished()]
        running = [t for t in trials if t.state == TrialState.RUNNING]
        return (finished, running) if len(finished) >= 3 and running and _db_bench_under(home) else None

    seen = kill_while(process.pid, mid_trial, limit_s=max(deadline - time.monotonic(), 1))
    if not seen:
        process.kill()
        pytest.fail("the study never reached a running trial with db_bench")
    process.wait()
    finished, running = seen
    interrupted = running[0].number
    time.sleep(0.5)
    assert _db_bench_under(home) == [], "db_bench outlived the killed knobtune"
    scratch = list((home / "scratch").glob("*"))
    assert scratch, "expected the killed run's scratch folder (it had no chance to clean up)"

    kept = {t.number: (t.state, t.value) for t in finished}
    queued = [t for t in optuna.load_study(study_name="resume", storage=storage_url).get_trials(deepcopy=False)
              if t.state == TrialState.WAITING]  # starts queued first that had not run: they run before the retry
    resumed = subprocess.run(_tune(home, len([n for n in kept if n != 0]) + len(queued) + 2), capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "interrupted" in resumed.stdout

    study = open_store(home).load("resume")
    for number, (state, value) in kept.items():
        assert (study.trials[number].state, study.trials[number].value) == (state, value)
    marked = study.trials[interrupted]
    assert marked.state == TrialState.FAIL and marked.user_attrs[attrs.OUTCOME] == "interrupted"
    retry = [t for t in study.trials if t.user_attrs.get(attrs.RETRY_OF) == interrupted]
    assert len(retry) == 1 and retry[0].params == marked.params and retry[0].state.is_finished()
    assert not any(path.exists() for path in scratch), "the dead run's scratch data was not removed"
    assert _db_bench_under(home) == []


@pytest.mark.parametrize(("stop", "status", "said"), [
    (signal.SIGINT, 130, "interrupted: finished trials are kept"),
    (signal.SIGTERM, 143, "stopped (SIGTERM): finished trials are kept"),  # a service manager's or a job's stop
])
def test_ctrl_c_or_sigterm_keeps_finished_trials_and_leaves_nothing_running(tmp_path: Path, stop: int, status: int,
                                                                           said: str) -> None:
    home = tmp_path / "studies"
    log = tmp_path / "out.log"
    # Ctrl-C must reach it even when the tests run where SIGINT is ignored (a background job): Python keeps
    # ignoring SIGINT if it starts that way, so the child starts with the default action
    process = subprocess.Popen(_tune(home, 40), stdout=log.open("w"), stderr=subprocess.STDOUT,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while log.read_text().count("rung") < 6 and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(stop)
    try:
        assert process.wait(timeout=30) == status
    except subprocess.TimeoutExpired:
        process.kill()  # its programs die with it
        process.wait()
        pytest.fail(f"knobtune went on for 30 s after {stop.name}; its output ended:\n" + log.read_text()[-3000:])
    assert said in log.read_text()
    assert _db_bench_under(home) == []
    assert list((home / "scratch").glob("*")) == [], "Ctrl-C left scratch data behind"
    study = open_store(home).load("resume")
    interrupted = [t for t in study.trials if t.user_attrs.get(attrs.OUTCOME) == "interrupted"]
    assert len(interrupted) <= 1  # the trial in progress, if one was
    # a default run as a control is not queued again: it runs when due (a slow first run calls for one early)
    interrupted = [t for t in interrupted if not attrs.is_default(t.user_attrs)]
    waiting = [t for t in study.trials if t.state == TrialState.WAITING]
    retries = [t for t in waiting if attrs.RETRY_OF in t.user_attrs]
    # the trial cut is failed with its config queued again; or, when the stop cut the storage's write of its end, it
    # is left running, which the next process here marks and queues (test_sigkill_then_resume)
    cut = [t.number for t in interrupted if t.state != TrialState.RUNNING]
    assert [t.user_attrs[attrs.RETRY_OF] for t in retries if t.user_attrs[attrs.RETRY_OF] in cut] == cut, \
        "\n".join([f"trial {t.number}: {t.state.name} {t.user_attrs}" for t in study.trials[-3:]]
                  + [log.read_text()[-2000:]])
    assert len(retries) <= len(interrupted)
    # the rest are known configs queued first that had not run yet: the resumed study runs them
    assert all(attrs.STARTED_FROM in t.user_attrs for t in waiting if t not in retries)


def test_a_lost_trials_config_queued_after_the_last_trial_was_asked_is_named_not_run(tmp_path: Path) -> None:
    """Two workers: one asks for the last trial --trials allows while another queues a lost trial's config again.
    The lower trial number runs (as when two ask for the last trial at once); the re-run stays queued and the
    study says so, with how to run it. The race is set up here by queueing the re-run into a finished study."""
    home = tmp_path / "studies"
    first = subprocess.run(_tune(home, 2), capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    study = optuna.load_study(study_name="resume", storage=f"sqlite:///{home / 'studies.db'}")
    lost = next(t for t in study.get_trials(deepcopy=False) if not attrs.is_default(t.user_attrs))
    study.enqueue_trial(lost.params, user_attrs={attrs.RETRY_OF: lost.number}, skip_if_exists=False)
    again = subprocess.run(_tune(home, 2), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    said = [line for line in again.stdout.splitlines() if f"(the config of lost trial {lost.number}," in line]
    assert len(said) == 1 and "a larger --trials runs it first" in said[0], again.stdout
    waiting = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.WAITING]
    assert [t.user_attrs.get(attrs.RETRY_OF) for t in waiting] == [lost.number]
