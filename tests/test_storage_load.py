"""bench/storage_load.py's load generator, tiny: two workers running knobtune's own study loop (a stand-in for the
database run) on a real private PostgreSQL storage. Every trial a worker asked for is told exactly once, and none
is left RUNNING. No timing is asserted: the bench measures, this checks its bookkeeping holds."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy.pool import NullPool

from knobtune.systems.postgresql.storage_server import StorageServer
from knobtune.tuning import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import storage_load  # noqa: E402  (a bench script, importable once bench/ is on the path)

pytestmark = pytest.mark.slow


def test_every_trial_asked_for_is_told_once_and_none_is_left_running(tmp_path: Path) -> None:
    with StorageServer() as url, storage_load.stand_in("rocksdb", 0.0):
        plan = storage_load.Plan(url=url, home=tmp_path / "studies", study_name="load-tiny", workers=2, run_s=0.0,
                                 window_s=20.0, max_trials=6, system="rocksdb", workload="put-get-delete",
                                 records=1000, sampler="random")
        arm = storage_load.run_arm(plan)
        storage = optuna.storages.RDBStorage(url, engine_kwargs={"poolclass": NullPool})  # none kept past the server
        trials = optuna.load_study(study_name="load-tiny", storage=storage).get_trials(deepcopy=False)
        study_id = storage.get_study_id_from_name("load-tiny")
        ids = {storage.get_trial_id_from_study_id_trial_number(study_id, t.number) for t in trials}

    assert arm["errors"]["workers"] == [] and arm["errors"]["workers_killed"] == []
    assert arm["errors"]["workers_without_report"] == 0
    told = Counter({int(trial_id): times for trial_id, times in arm["told_ids"].items()})
    assert arm["asked_ids"], "the workers asked for trials"
    assert set(told) == set(arm["asked_ids"]), "every trial asked for was told, and no other"
    assert set(told.values()) == {1}, "each exactly once"
    assert arm["checks"] == {"asked": len(arm["asked_ids"]), "asked_twice": 0, "told_twice": 0,
                             "asked_never_told": 0, "told_not_asked": 0, "running_left": 0}

    assert not [t.number for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert ids == set(arm["asked_ids"]), "the study holds the trials asked for, no more"
    workers = Counter(t.user_attrs.get(attrs.WORKER) for t in trials)
    assert len(workers) == 2, f"both workers ran trials: {workers}"
    assert len([t for t in trials if attrs.is_default(t.user_attrs)]) == 1, "one machine: its default ran once"
    sampled = [t for t in trials if not attrs.is_default(t.user_attrs)]
    assert 1 <= len([t for t in sampled if t.user_attrs.get(attrs.OUTCOME) != "budget"]) <= 6, \
        "the study's --trials bounds the sampled trials run (a worker that asked for one past it gives it up)"
