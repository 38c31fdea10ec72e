"""The second basin (knobtune/tuning/search/basins.py): which runner-up choice is taken, and a study whose share of
trials is drawn there, with that choice set, by a TPE shown only that choice's trials. Real Optuna studies of a
function with two basins; no system runs."""

from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.study import StudyDirection
from optuna.trial import TrialState, create_trial

from knobtune.tuning import attrs
from knobtune.tuning.search import make_sampler
from knobtune.tuning.search.basins import BASIN, SecondBasin, runner_up

STYLE = CategoricalDistribution(["leveled", "universal", "fifo"])
SIZE = FloatDistribution(1.0, 100.0, log=True)


def _trial(style: str, value: float | None, state: TrialState = TrialState.COMPLETE, *,
           default: bool = False) -> optuna.trial.FrozenTrial:
    return create_trial(params={"style": style, "size": 10.0}, distributions={"style": STYLE, "size": SIZE},
                        value=value if state == TrialState.COMPLETE else None, state=state,
                        user_attrs={attrs.ROLE: attrs.ROLE_DEFAULT} if default else {})


def test_the_runner_up_is_the_second_best_choice_of_the_most_neglected_knob() -> None:
    trials = [_trial("leveled", v) for v in (3.0, 3.1, 3.2, 3.4)] + [_trial("universal", 3.3)]
    assert runner_up(trials, StudyDirection.MINIMIZE) == ("style", "universal")
    assert runner_up(trials, StudyDirection.MAXIMIZE) == ("style", "universal"), "by value, either way"
    assert runner_up(trials[:4], StudyDirection.MINIMIZE) is None, "one choice complete: no second basin"
    pruned_only = [*trials[:4], _trial("universal", None, TrialState.PRUNED)]
    assert runner_up(pruned_only, StudyDirection.MINIMIZE) is None, "a choice whose every trial was pruned is left"
    with_default = [*trials[:4], _trial("fifo", 1.0, default=True)]
    assert runner_up(with_default, StudyDirection.MINIMIZE) is None, "the default's runs are not the search's"


def test_of_two_knobs_the_one_whose_runner_up_had_the_fewest_trials_is_taken() -> None:
    other = CategoricalDistribution([True, False])
    trials = []
    for i, (style, value) in enumerate([("leveled", 3.0), ("leveled", 3.1), ("leveled", 3.2), ("universal", 3.3)]):
        flag = i % 2 == 0  # the flag's runner-up had half the trials; universal a quarter
        trials.append(create_trial(params={"style": style, "flag": flag}, distributions={"style": STYLE,
                                                                                         "flag": other},
                                   value=value))
    assert runner_up(trials, StudyDirection.MINIMIZE) == ("style", "universal")


def _two_basins(trial: optuna.Trial) -> float:
    """A time to minimize: 'leveled' is good at once, 'universal' only with its own knob near 70 (the better basin)."""
    style = trial.suggest_categorical("style", ["leveled", "universal"])
    size = trial.suggest_float("size", 1.0, 100.0, log=True)
    if style == "leveled":
        return 3.0 + abs(size - 10.0) / 100.0
    trigger = trial.suggest_int("trigger", 1, 100)
    return 2.5 + abs(trigger - 70) / 10.0 + abs(size - 40.0) / 100.0


def test_every_fifth_trial_is_drawn_inside_the_runner_up_choice_by_a_tpe_shown_only_its_trials() -> None:
    sampler = make_sampler("tpe", 1, 60, basin_share=0.2)
    assert isinstance(sampler, SecondBasin) and not isinstance(make_sampler("random", 1, basin_share=0.2),
                                                               SecondBasin)
    seen: dict[int, set[str]] = {}
    basin_sampler = sampler._basin
    original = basin_sampler.sample_relative

    def recording(study: optuna.Study, trial: optuna.trial.FrozenTrial, space: dict) -> dict:
        seen[trial.number] = {t.params.get("style") for t in study.get_trials(deepcopy=False)}
        return original(study, trial, space)

    basin_sampler.sample_relative = recording  # type: ignore[method-assign]
    study = optuna.create_study(sampler=sampler)
    study.optimize(_two_basins, n_trials=60)
    drawn = {t.number: t.params["style"] for t in study.trials}
    assert seen, "some trials were the basin's"
    for number, styles in seen.items():
        assert number % 5 == 4 and len(styles) == 1, "only the runner-up choice's trials were shown"
        assert drawn[number] in styles, "the trial kept that choice"
        assert study.trials[number].system_attrs[BASIN] == f"style={drawn[number]}", "and says so"
    assert not [n for n in range(60) if n % 5 != 4 and n in seen], "the other trials are the base sampler's"

