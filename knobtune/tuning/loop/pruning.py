"""Successive halving that lets a config beating the default climb, until the study has configs ahead of it.

"The default" is its latest run (its first run or the latest control), so drift
over a long study does not make every new config look better or worse.

Optuna's asynchronous successive halving promotes a trial only when it ranks in
the top 1/reduction_factor of the trials seen at its rung; early in a study that
means it must beat every trial so far, and on a noisy machine a small rung's
ranking is a lottery. A config that already beats the default there is worth
the next rung, so this pruner lets it climb, while the study has fewer than
reduction_factor configs complete at full size ahead of the default. From then
on the question at a small rung is no longer "does it beat the default" but
"does it rank with the configs that do", which halving answers: letting every
config that beats the default climb then spends most of the search on full-size
runs of configs no better than those already found. (research.halving_after_gains
= false lets them climb throughout, as releases up to 0.4.0 did.)
"""

from __future__ import annotations

import optuna
from optuna.pruners import BasePruner, SuccessiveHalvingPruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning.records import attrs


class DefaultAwareHalvingPruner(BasePruner):
    def __init__(self, reduction_factor: int, halving_after_gains: bool = True) -> None:
        self._halving = SuccessiveHalvingPruner(min_resource=1, reduction_factor=reduction_factor,
                                                min_early_stopping_rate=0)
        self._enough_ahead = reduction_factor if halving_after_gains else None

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        if not self._halving.prune(study, trial):  # also records the rung for later comparisons
            return False
        step = trial.last_step
        trials = study.get_trials(deepcopy=False)
        latest_default = next((t for t in reversed(trials)  # the latest default run at this rung
                               if attrs.is_default(t.user_attrs) and step in t.intermediate_values), None)
        if latest_default is None or step is None:
            return True
        maximize = study.direction == StudyDirection.MAXIMIZE
        if not _better(trial.intermediate_values[step], latest_default.intermediate_values[step], maximize):
            return True
        return self._enough_ahead is not None and _ahead_of_default(trials, maximize) >= self._enough_ahead


def _better(value: float, than: float, maximize: bool) -> bool:
    return value > than if maximize else value < than


def _ahead_of_default(trials: list[FrozenTrial], maximize: bool) -> int:
    """How many configs completed at full size ahead of the latest complete default run."""
    default = next((t.value for t in reversed(trials)
                    if attrs.is_default(t.user_attrs) and t.state == TrialState.COMPLETE and t.value is not None), None)
    if default is None:
        return 0
    return sum(1 for t in trials if t.state == TrialState.COMPLETE and t.value is not None
               and not attrs.is_default(t.user_attrs) and _better(t.value, default, maximize))
