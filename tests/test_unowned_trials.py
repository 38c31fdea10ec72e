"""A trial no worker ever took (its process lost the storage between asking for it and naming itself its worker) is
failed and queued again once the grace has passed, as a trial whose heartbeat stopped is: a real Optuna storage."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning import attrs
from knobtune.tuning.loop.workers import fail_unowned


def test_an_unowned_running_trial_is_failed_and_handed_to_the_stale_callback(tmp_path: Path) -> None:
    handed: list[int] = []

    def stale(study: optuna.Study, trial: FrozenTrial) -> None:
        handed.append(trial.number)

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'studies.db'}", heartbeat_interval=10,
                                         grace_period=60, heartbeat_stale_trial_callback=stale)
    study = optuna.create_study(study_name="s", storage=storage)
    unowned = study.ask()  # asked for, then its process was cut off: no worker, no heartbeat
    owned = study.ask()
    owned.set_user_attr(attrs.WORKER, "h2:123")
    assert fail_unowned(study, storage, grace_s=3600) == []  # too young: its process may still be naming itself
    assert fail_unowned(study, storage, grace_s=0) == [unowned.number]
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {unowned.number: TrialState.FAIL, owned.number: TrialState.RUNNING}
    assert handed == [unowned.number]
    assert fail_unowned(study, storage, grace_s=0) == []  # once


_NAMED_WITHOUT_HEARTBEAT = """
    SELECT t.number FROM trials t
    JOIN trial_user_attributes a ON a.trial_id = t.trial_id AND a.key = :worker
    LEFT JOIN trial_heartbeats h ON h.trial_id = t.trial_id
    WHERE t.state = 'RUNNING' AND h.trial_id IS NULL"""


@pytest.mark.slow
def test_no_trial_is_named_a_workers_before_its_first_heartbeat_is_stored(tmp_path: Path) -> None:
    """The gap between a trial naming its worker and its first heartbeat: a process cut off there would leave a trial
    that Optuna's stale check never sees (no heartbeat) and ``fail_unowned`` skips (a worker is named), running for
    good, with a verifier waiting on it. A real study, its storage read every few milliseconds (one statement, one
    snapshot): no running trial is ever named without a heartbeat."""
    db = tmp_path / "studies.db"
    argv = [sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", "fillrandom", "--records", "5000",
            "--trials", "8", "--study", "gap", "--storage", f"sqlite:///{db}", "--dir", str(tmp_path / "home"),
            "--sampler", "random", "--verify-top", "0", "--control-every", "0"]
    tune = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_named, gaps = 0, set()
    try:
        while tune.poll() is None:
            if db.exists():
                with contextlib.suppress(sqlalchemy.exc.OperationalError):  # the tables are not made yet, or locked
                    with sqlalchemy.create_engine(f"sqlite:///{db}").connect() as connection:
                        gaps |= {row[0] for row in connection.execute(sqlalchemy.text(_NAMED_WITHOUT_HEARTBEAT),
                                                                      {"worker": attrs.WORKER})}
                        seen_named += connection.execute(sqlalchemy.text(
                            "SELECT count(*) FROM trial_user_attributes a JOIN trials t ON a.trial_id = t.trial_id "
                            "WHERE a.key = :worker AND t.state = 'RUNNING'"), {"worker": attrs.WORKER}).scalar_one()
            time.sleep(0.005)
    finally:
        out = tune.communicate(timeout=120)[0]
    assert tune.returncode == 0, out[-2000:]
    assert seen_named > 0  # the poll saw trials running under their worker's name: it looked where the gap would be
    assert gaps == set(), f"trials named a worker's without a heartbeat: {sorted(gaps)}"
