"""A trial no worker ever took (its process lost the storage between asking for it and naming itself its worker) is
failed and queued again once the grace has passed, as a trial whose heartbeat stopped is: a real Optuna storage."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning import attrs
from knobtune.tuning.workers import fail_unowned


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
