"""The default-aware halving pruner on a synthetic study (the pruning rule itself, nothing run)."""

from __future__ import annotations

import optuna

from knobtune.tuning import attrs
from knobtune.tuning.loop.pruning import DefaultAwareHalvingPruner


def _study(direction: str = "minimize", halving_after_gains: bool = True) -> optuna.Study:
    return optuna.create_study(direction=direction, pruner=DefaultAwareHalvingPruner(3, halving_after_gains))


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


def test_once_three_configs_are_ahead_of_the_default_beating_it_is_not_enough() -> None:
    for halving_after_gains, pruned in ((True, True), (False, False)):
        study = _study(halving_after_gains=halving_after_gains)
        _report(study, 10.0, baseline=True)
        assert [_report(study, v) for v in (5.0, 6.0, 7.0)] == [False, False, False]  # climb: they beat the default
        # the fourth beats the default too, but three configs are ahead of it and it is not in halving's top third
        assert _report(study, 9.0) is pruned
        assert _report(study, 4.0) is False  # the best so far still climbs


def test_the_count_ahead_is_against_the_latest_default() -> None:
    study = _study()
    _report(study, 10.0, baseline=True)
    for v in (5.0, 6.0, 7.0):  # three ahead of the first default run
        _report(study, v)
    control = study.ask()  # the machine sped up: the latest default run is ahead of one of them
    control.set_user_attr(attrs.ROLE, attrs.ROLE_CONTROL)
    control.report(6.5, step=1)
    control.should_prune()
    study.tell(control, 6.5)
    assert _report(study, 6.2) is False  # beats the latest default; two configs are ahead of it, not three
