"""TPE with local moves around the best configs (``--sampler local``).

In a space of ~50 knobs with a few dozen full-size runs, TPE draws configs that differ from each other in
nearly every knob, and most such configs are slower than the default (on put-get-delete nearly all that TPE
drew were, at every rung: docs/findings.md). The configs that win differ from the default in a few
knobs. So half of the trials, once the start-up trials have run, are a local move instead: one of the 3 best
complete configs so far (the default among them) with one to three of its params moved, the others kept. A
moved number takes, half the time, a step from the incumbent's value (normal, 0.15 of its range, on a log
scale for a log knob); otherwise, and always for a choice, TPE draws it from its own model of that param.
This is the neighbourhood of ParamILS and of SMAC's local search (Hutter et al., "ParamILS: an automatic
algorithm configuration framework", JAIR 2009), with TPE proposing the new values; the other half of the
trials are TPE's own.

A local trial carries the system attribute ``local_of``: the number of the trial it moved from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning import attrs
from knobtune.tuning.forest import from_unit, to_unit
from knobtune.tuning.records import value_of

LOCAL_OF = "local_of"  # trial system attribute: the trial whose config a local move changed


class LocalMovesSampler(optuna.samplers.BaseSampler):
    def __init__(self, base: optuna.samplers.BaseSampler, seed: int | None = None, n_startup_trials: int = 10,
                 share: float = 0.5, around_best: int = 3, most_moved: int = 3, step: float = 0.15) -> None:
        self._base = base
        self._rng = np.random.default_rng(seed)
        self._startup = n_startup_trials
        self._share = share
        self._around_best = around_best
        self._most_moved = most_moved
        self._step = step
        self._moves: dict[int, tuple[dict[str, Any], set[str]]] = {}  # trial id -> (incumbent params, moved)

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._base.reseed_rng()

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._base.before_trial(study, trial)
        if "fixed_params" in trial.system_attrs:  # the default, a queued config: nothing to choose
            return
        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        if sum(not attrs.is_default(t.user_attrs) for t in finished) < self._startup:
            return
        incumbents = best_complete(study, self._around_best)
        if not incumbents or self._rng.random() >= self._share:
            return
        incumbent = incumbents[int(self._rng.integers(len(incumbents)))]
        names = sorted(incumbent.params)
        moved = set(self._rng.choice(names, size=min(len(names), int(self._rng.integers(1, self._most_moved + 1))),
                                     replace=False))
        self._moves[trial._trial_id] = (dict(incumbent.params), moved)
        study._storage.set_trial_system_attr(trial._trial_id, LOCAL_OF, incumbent.number)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._base.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if trial._trial_id in self._moves:
            return {}  # every param of a local move is chosen one by one, below
        return self._base.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        move = self._moves.get(trial._trial_id)
        if move is None or param_name not in move[0] or not _holds(param_distribution, move[0][param_name]):
            return self._base.sample_independent(study, trial, param_name, param_distribution)
        params, moved = move
        kept = params[param_name]
        if param_name not in moved:
            return kept
        step = not isinstance(param_distribution, CategoricalDistribution) and self._rng.random() < 0.5
        for _ in range(5):  # a moved param takes another value than the incumbent's, if it can
            if step:  # a step from the incumbent's value
                value = from_unit(param_distribution,
                                  to_unit(param_distribution, kept) + self._rng.normal(0, self._step))
            else:
                value = self._base.sample_independent(study, trial, param_name, param_distribution)
            if value != kept:
                return value
        if isinstance(param_distribution, CategoricalDistribution) and len(param_distribution.choices) > 1:
            others = [c for c in param_distribution.choices if c != kept]
            return others[int(self._rng.integers(len(others)))]
        return value

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._moves.pop(trial._trial_id, None)
        self._base.after_trial(study, trial, state, values)


def best_complete(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The ``k`` best trials complete at full size and feasible, the default's runs among them, by value."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if t.value is not None and t.params and attrs.INFEASIBLE not in t.user_attrs]
    complete.sort(key=value_of, reverse=study.direction == optuna.study.StudyDirection.MAXIMIZE)
    return complete[:k]


def _holds(distribution: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is one ``distribution`` can take (a param's distribution never changes in a study)."""
    if isinstance(distribution, CategoricalDistribution):
        return value in distribution.choices
    return distribution.low <= value <= distribution.high  # type: ignore[attr-defined]
