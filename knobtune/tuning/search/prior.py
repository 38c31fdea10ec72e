"""A sampler that also learns from what earlier studies measured: their trials, in this study's units.

A new study that finds earlier studies of a workload alike (``tuning.loop.earlier``) tries their best configs
first; with a sampler that models the study's trials (TPE) it also gives the sampler every trial those studies
completed or pruned, as if it had run here, so the model starts from their picture of the space instead of from
configs drawn at random. Their values are put into this study's units by the defaults: an earlier trial's value at
a rung times this study's default there over its own study's default there (a config 1.3x its default there is
taken as 1.3x the default here). Steps only one of the two defaults ran are left out; a trial with nothing left is
not given. Nothing here is stored: the earlier trials never become this study's trials, never count against its
budget, and are never reported or verified as its results.

Optuna's TPE reads a study's trials through ``Study._get_trials`` (``TPESampler`` and its group decomposed search
space), so the wrapped sampler sees a view of the study (``StudyView``) whose trial lists end
with the earlier ones; every other attribute is the study's own. tests/test_prior_trials.py holds that TPE learns
through it. An earlier trial is given with the params this study has suggested so far (a knob it has not
searched yet is left out of it), each with this study's distribution; a trial one of whose params conflicts (other
choices; int against float, log against not; a value outside this study's range) is not given; and before this
study's own default has run none is.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, cast

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning.records import attrs

# the samplers shown earlier trials: TPE, whose model reads a study's trials (GP reads them too, but it is untested
# here: torch is optional and not installed by scripts/test; random, QMC and the Latin hypercube draw on their own)
LEARNS_FROM_TRIALS = ("tpe",)
MOST_TRIALS = 300  # the earlier trials given at most, the nearest study's first
_GIVEN = (TrialState.COMPLETE, TrialState.PRUNED)


def given_at_most(earlier: Sequence[optuna.Study]) -> int:
    """How many trials of ``earlier`` a ``LearnsFromEarlier`` may show its sampler: those completed or pruned,
    the defaults' runs left out, ``MOST_TRIALS`` at most (fewer when some do not fit this study's space)."""
    return min(MOST_TRIALS, sum(1 for study in earlier for t in study.get_trials(deepcopy=False) if _offered(t)))


class LearnsFromEarlier(BaseSampler):
    """``base``, shown the trials of ``earlier`` studies (nearest first) beside its study's own."""

    def __init__(self, base: BaseSampler, earlier: Sequence[optuna.Study]) -> None:
        self.base = base
        self._earlier = tuple(earlier)
        self._cache: tuple[tuple, list[FrozenTrial]] | None = None

    def given(self, study: optuna.Study) -> list[FrozenTrial]:
        """The earlier trials the sampler is shown now, in ``study``'s units (empty before its default ran)."""
        own = study.get_trials(deepcopy=False)
        default = _latest_default(own)
        if default is None:
            return []
        known = _distributions(own)
        key = (default.number, tuple(sorted(default.intermediate_values.items())), tuple(sorted(known)))
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._translated(default, known))
        return self._cache[1]

    def _translated(self, default: FrozenTrial, known: dict[str, BaseDistribution]) -> list[FrozenTrial]:
        given: list[FrozenTrial] = []
        for earlier in self._earlier:
            theirs = earlier.get_trials(deepcopy=False)
            their_default = _latest_default(theirs)
            if their_default is None:
                continue
            for trial in theirs:
                if len(given) >= MOST_TRIALS:
                    return given
                if not _offered(trial) or (params := _fitted(trial, known)) is None:
                    continue
                if (moved := _in_units_of(trial, their_default, default, number=-1 - len(given))) is not None:
                    moved.params, moved.distributions = params, {k: known[k] for k in params}
                    given.append(moved)
        return given

    def _view(self, study: optuna.Study) -> optuna.Study:
        """``study`` with the earlier trials given now; a ``StudyView`` stands in for the study the sampler reads."""
        return cast(optuna.Study, StudyView(study, self.given(study)))

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(self._view(study), trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.base.sample_relative(self._view(study), trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.base.sample_independent(self._view(study), trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


class StudyView:
    """``study`` as a wrapped sampler sees it: its own trials (those ``keep`` keeps, when given), then ``given``;
    all else is the study's."""

    def __init__(self, study: optuna.Study, given: Sequence[FrozenTrial] = (),
                 keep: Callable[[FrozenTrial], bool] | None = None) -> None:
        self._study = study
        self._given = given
        self._keep = keep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states: Sequence[TrialState] | None = None,
                    use_cache: bool = False) -> list[FrozenTrial]:
        own = self._study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)
        if self._keep is not None:
            own = [t for t in own if self._keep(t)]
        return own + [t for t in self._given if states is None or t.state in states]

    def get_trials(self, deepcopy: bool = True, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()


def _offered(trial: FrozenTrial) -> bool:
    """Whether an earlier study's trial is one a sampler may be shown: a config's, completed or pruned."""
    return trial.state in _GIVEN and not attrs.is_default(trial.user_attrs)


def _latest_default(trials: Sequence[FrozenTrial]) -> FrozenTrial | None:
    """The latest run of the default with a measured rung (its first run or the latest control)."""
    return next((t for t in reversed(trials) if attrs.is_default(t.user_attrs) and t.intermediate_values), None)


def _distributions(trials: Sequence[FrozenTrial]) -> dict[str, BaseDistribution]:
    """Each param this study has suggested, with the first distribution it had (as the group search space keeps)."""
    known: dict[str, BaseDistribution] = {}
    for trial in trials:
        for name, distribution in trial.distributions.items():
            known.setdefault(name, distribution)
    return known


def _fitted(trial: FrozenTrial, known: dict[str, BaseDistribution]) -> dict[str, Any] | None:
    """The params of an earlier ``trial`` this study has suggested (those it has not are left out: this study
    has not searched them yet), or None when one of them conflicts with this study's (``_alike``) or none is left."""
    params = {}
    for name, distribution in trial.distributions.items():
        if name not in known:
            continue
        if not _alike(distribution, known[name], trial.params[name]):
            return None
        params[name] = trial.params[name]
    return params or None


def _alike(theirs: BaseDistribution, mine: BaseDistribution, value: Any) -> bool:
    """The same choices; or int or float alike, log or not alike, with ``value`` inside this study's range (a
    narrowed or capped range within one study differs the same way)."""
    if isinstance(mine, CategoricalDistribution) or isinstance(theirs, CategoricalDistribution):
        return theirs == mine
    return (type(theirs) is type(mine) and getattr(theirs, "log", False) == getattr(mine, "log", False)
            and getattr(mine, "low") <= value <= getattr(mine, "high"))


def _in_units_of(trial: FrozenTrial, their_default: FrozenTrial, my_default: FrozenTrial,
                 number: int) -> FrozenTrial | None:
    """``trial`` with its values scaled by ``my_default`` / ``their_default`` at each step both defaults ran (its
    final value by the two defaults' last steps), numbered ``number``; None when no step is left to compare."""
    scale = {step: mine / theirs for step, mine in my_default.intermediate_values.items()
             if (theirs := their_default.intermediate_values.get(step))}
    intermediate = {step: value * scale[step] for step, value in trial.intermediate_values.items() if step in scale}
    value = None
    if trial.state == TrialState.COMPLETE:
        if trial.value is None or not their_default.intermediate_values or not my_default.intermediate_values:
            return None
        last_theirs = their_default.intermediate_values[max(their_default.intermediate_values)]
        if not last_theirs:
            return None
        value = trial.value * my_default.intermediate_values[max(my_default.intermediate_values)] / last_theirs
    elif not intermediate:
        return None
    moved = copy.copy(trial)
    moved.number, moved._trial_id = number, number
    moved.value = value
    moved.intermediate_values = intermediate
    moved.user_attrs, moved.system_attrs = {}, {k: v for k, v in trial.system_attrs.items() if k == "constraints"}
    return moved
