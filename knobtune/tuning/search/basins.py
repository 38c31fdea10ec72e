"""A share of the search spent in the second basin: TPE refined within the runner-up choice of a choice knob.

TPE models the whole space from the trials so far. Where one choice of a knob decides which other knobs matter
(RocksDB's compaction_style: leveled or universal), the first few trials that pair the other choice with poor
values lead TPE to write it off, and a study stays in the basin it found first. docs/findings.md ("Headroom") holds
two such studies: put-get-delete at 10 minutes, 184 of 216 trials leveled while the space's best configs were
universal; readwhilewriting, the other way round from a universal start. ``SecondBasin`` gives every ``every``-th
trial to a second TPE that is shown only the trials of the runner-up choice, with that choice set, so the other
basin is refined from its own trials instead of judged beside the leader's.

Which knobs: those whose choice decides which other knobs apply (the catalog's ``conditions`` name them:
compaction_style, memtablerep, enable_blob_files for RocksDB), since a basin is where a choice changes what the
rest of the config means. Which choice: each such knob with two or more choices that have a complete trial (a
config that ran every rung; the defaults' runs left out) has a runner-up, the choice with the second-best complete
value; a choice whose every trial was pruned is left alone, as the ladder ranks as the full size does
(docs/findings.md). The basin trials take these knobs in turn, by name. Which knob a study neglects most is no
guide: read over the stored headroom and readwhilewriting studies, the most neglected runner-up was a minor one
(cache_index_and_filter_blocks) more often than the compaction style whose basin cost those studies their gain.
With no such knob the trial is the base sampler's. A trial drawn in a basin says which in its system attribute
``BASIN`` ("compaction_style=universal"), for the reader of a study; the sampler reads its choice anew from the
trials.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Any, cast

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning.records import attrs
from knobtune.tuning.search.prior import StudyView

Basin = tuple[str, Any]  # a choice knob's param and the choice the basin's trials keep
BASIN = "second_basin"  # a trial's system attribute: the basin it was drawn in, "param=choice"


class SecondBasin(BaseSampler):
    """``base``, but every ``every``-th trial is ``basin``'s, shown only the trials of a runner-up choice of one of
    the choice knobs ``among``."""

    def __init__(self, base: BaseSampler, basin: BaseSampler, every: int, among: Collection[str]) -> None:
        self.base = base
        self._basin = basin
        self._every = max(2, every)
        self._among = frozenset(among)
        self._chosen: dict[int, Basin] = {}  # trial number -> its basin

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)
        if trial.number % self._every == self._every - 1 and "fixed_params" not in trial.system_attrs:
            basins = runner_ups(study.get_trials(deepcopy=False), study.direction, self._among)
            if basins:
                basin = basins[trial.number // self._every % len(basins)]
                self._chosen[trial.number] = basin
                study._storage.set_trial_system_attr(trial._trial_id, BASIN, f"{basin[0]}={basin[1]}")

    def basin_of(self, trial: FrozenTrial) -> Basin | None:
        """The basin ``trial`` is drawn in, or None when the base sampler draws it."""
        return self._chosen.get(trial.number)

    def _inside(self, study: optuna.Study, basin: Basin) -> optuna.Study:
        name, choice = basin
        return cast(optuna.Study, StudyView(study, keep=lambda t: name in t.params and t.params[name] == choice))

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        basin = self.basin_of(trial)
        if basin is None:
            return self.base.infer_relative_search_space(study, trial)
        return self._basin.infer_relative_search_space(self._inside(study, basin), trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        basin = self.basin_of(trial)
        if basin is None:
            return self.base.sample_relative(study, trial, search_space)
        params = self._basin.sample_relative(self._inside(study, basin), trial, search_space)
        name, choice = basin
        if name in search_space:
            params[name] = choice
        return params

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        basin = self.basin_of(trial)
        if basin is None:
            return self.base.sample_independent(study, trial, param_name, param_distribution)
        name, choice = basin
        if param_name == name and isinstance(param_distribution, CategoricalDistribution) \
                and choice in param_distribution.choices:
            return choice
        return self._basin.sample_independent(self._inside(study, basin), trial, param_name, param_distribution)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._chosen.pop(trial.number, None)
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()
        self._basin.reseed_rng()


def runner_ups(trials: Sequence[FrozenTrial], direction: StudyDirection, among: Collection[str]) -> list[Basin]:
    """The runner-up choice of each choice knob of ``among`` two or more of whose choices have a complete trial,
    by the knob's name (the module's docstring says how)."""
    complete = [t for t in trials if t.params and t.state == TrialState.COMPLETE and t.value is not None
                and not attrs.is_default(t.user_attrs)]
    sign = 1.0 if direction == StudyDirection.MAXIMIZE else -1.0
    best: dict[str, dict[Any, float]] = defaultdict(dict)
    for t in complete:
        for name in among:
            if name in t.params and isinstance(t.distributions.get(name), CategoricalDistribution):
                score = sign * cast(float, t.value)
                choice = t.params[name]
                best[name][choice] = max(best[name].get(choice, score), score)
    return [(name, sorted(by_choice, key=lambda choice: (-by_choice[choice], repr(choice)))[1])
            for name, by_choice in sorted(best.items()) if len(by_choice) >= 2]
