"""Successive halving that never stops a config beating the default at the same rung.

"The default" is its latest run (its first run or the latest control), so drift
over a long study does not make every new config look better or worse.

Optuna's asynchronous successive halving promotes a trial only when it ranks in
the top 1/reduction_factor of the trials seen at its rung; early in a study that
means it must beat every trial so far, and on a noisy machine a small rung's
ranking is a lottery. A config that already beats the default there is worth
the next rung, so this pruner lets it climb.
"""

from __future__ import annotations

import optuna
from optuna.pruners import BasePruner, SuccessiveHalvingPruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from knobtune.tuning.records import attrs


class DefaultAwareHalvingPruner(BasePruner):
    def __init__(self, reduction_factor: int) -> None:
        self._halving = SuccessiveHalvingPruner(min_resource=1, reduction_factor=reduction_factor,
                                                min_early_stopping_rate=0)

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        if not self._halving.prune(study, trial):  # also records the rung for later comparisons
            return False
        step = trial.last_step
        latest_default = next((t for t in reversed(study.get_trials(deepcopy=False))  # the latest default run
                         if attrs.is_default(t.user_attrs) and step in t.intermediate_values), None)
        if latest_default is None or step is None:
            return True
        value, default = trial.intermediate_values[step], latest_default.intermediate_values[step]
        beats_default = value > default if study.direction == StudyDirection.MAXIMIZE else value < default
        return not beats_default
