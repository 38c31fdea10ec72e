"""The default-aware halving pruner on a synthetic study (the pruning rule itself, nothing run)."""

from __future__ import annotations

import optuna

from knobtune.tuning import attrs
from knobtune.tuning.loop.pruning import DefaultAwareHalvingPruner


def _study(direction: str = "minimize") -> optuna.Study:
    return optuna.create_study(direction=direction, pruner=DefaultAwareHalvingPruner(reduction_factor=3))


def _report(study: optuna.Study, value: float, baseline: bool = False) -> bool:
    trial = study.ask()
    if baseline:
        trial.set_user_attr(attrs.ROLE, attrs.ROLE_DEFAULT)
    trial.report(value, step=1)
    pruned = trial.should_prune()
    study.tell(trial, state=optuna.trial.TrialState.PRUNED if pruned else optuna.trial.TrialState.COMPLETE,
               values=None if pruned else value)
    return pruned


def test_worse_than_default_and_not_in_top_third_is_pruned() -> None:
    study = _study()
    _report(study, 10.0, baseline=True)
    assert _report(study, 8.0) is False  # best so far
    assert _report(study, 12.0) is True  # worse than the default and than the best


def test_beating_the_default_is_never_pruned() -> None:
    study = _study()
    _report(study, 10.0, baseline=True)
    _report(study, 5.0)
    assert _report(study, 9.0) is False  # halving alone would stop it (not the best), but it beats the default


def test_direction_is_respected() -> None:
    study = _study("maximize")
    _report(study, 100.0, baseline=True)
    _report(study, 200.0)
    assert _report(study, 150.0) is False
    assert _report(study, 50.0) is True
