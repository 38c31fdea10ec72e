"""The second basin (knobtune/tuning/search/basins.py): which runner-up choices there are, and a study whose share
of trials is drawn inside one, with that choice set, by a TPE shown only that choice's trials. Real Optuna studies
of a function with two basins; the knobs that decide a basin read from RocksDB's catalog; no system runs."""

from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.study import StudyDirection
from optuna.trial import TrialState, create_trial

from knobtune.knobs import load_catalog
from knobtune.tuning import attrs, build_space
from knobtune.tuning.search import make_sampler
from knobtune.tuning.search.basins import BASIN, SecondBasin, runner_ups

STYLE = CategoricalDistribution(["leveled", "universal", "fifo"])
FLAG = CategoricalDistribution([True, False])
SIZE = FloatDistribution(1.0, 100.0, log=True)


def _trial(style: str, value: float | None, state: TrialState = TrialState.COMPLETE, *, flag: bool = True,
           default: bool = False) -> optuna.trial.FrozenTrial:
    return create_trial(params={"style": style, "flag": flag, "size": 10.0},
                        distributions={"style": STYLE, "flag": FLAG, "size": SIZE},
                        value=value if state == TrialState.COMPLETE else None, state=state,
                        user_attrs={attrs.ROLE: attrs.ROLE_DEFAULT} if default else {})


def test_each_deciding_knob_with_two_choices_complete_has_its_second_best_choice_as_runner_up() -> None:
    trials = [_trial("leveled", v, flag=v < 3.15) for v in (3.0, 3.1, 3.2, 3.4)] + [_trial("universal", 3.3)]
    assert runner_ups(trials, StudyDirection.MINIMIZE, ["style"]) == [("style", "universal")]
    faster = [*trials, _trial("universal", 3.5)]
    assert runner_ups(faster, StudyDirection.MAXIMIZE, ["style"]) == [("style", "leveled")], "by value, either way"
    assert runner_ups(trials, StudyDirection.MINIMIZE, ["style", "flag"]) == [("flag", False), ("style", "universal")]
    assert runner_ups(trials, StudyDirection.MINIMIZE, ["flag"]) == [("flag", False)]
    assert runner_ups(trials, StudyDirection.MINIMIZE, []) == [], "only the knobs that decide a basin"
    assert runner_ups(trials[:4], StudyDirection.MINIMIZE, ["style"]) == [], "one choice complete: no second basin"
    pruned_only = [*trials[:4], _trial("universal", None, TrialState.PRUNED)]
    assert runner_ups(pruned_only, StudyDirection.MINIMIZE, ["style"]) == [], "a choice all pruned is left alone"
    with_default = [*trials[:4], _trial("fifo", 1.0, default=True)]
    assert runner_ups(with_default, StudyDirection.MINIMIZE, ["style"]) == [], "the default's runs are not searched"


def test_the_knobs_that_decide_a_basin_are_those_a_catalog_condition_names() -> None:
    deciding = build_space(load_catalog("rocksdb")).deciding_knobs()
    assert {"compaction_style", "memtablerep", "enable_blob_files"} <= set(deciding)
    assert "write_buffer_size" not in deciding and "universal_size_ratio" not in deciding


def _two_basins(trial: optuna.Trial) -> float:
    """A time to minimize: 'leveled' is good at once, 'universal' only with its own knob near 70 (the better basin)."""
    style = trial.suggest_categorical("style", ["leveled", "universal"])
    size = trial.suggest_float("size", 1.0, 100.0, log=True)
    if style == "leveled":
        return 3.0 + abs(size - 10.0) / 100.0
    trigger = trial.suggest_int("trigger", 1, 100)
    return 2.5 + abs(trigger - 70) / 10.0 + abs(size - 40.0) / 100.0


def test_every_fifth_trial_is_drawn_inside_the_runner_up_choice_by_a_tpe_shown_only_its_trials() -> None:
    sampler = make_sampler("tpe", 1, 60, basin_share=0.2, basin_knobs=["style"])
    assert isinstance(sampler, SecondBasin)
    assert not isinstance(make_sampler("random", 1, basin_share=0.2, basin_knobs=["style"]), SecondBasin)
    assert not isinstance(make_sampler("tpe", 1, basin_share=0.2), SecondBasin), "no knob decides a basin"
    seen: dict[int, set[str]] = {}
    original = sampler._basin.sample_relative

    def recording(study: optuna.Study, trial: optuna.trial.FrozenTrial, space: dict) -> dict:
        seen[trial.number] = {t.params.get("style") for t in study.get_trials(deepcopy=False)}
        return original(study, trial, space)

    sampler._basin.sample_relative = recording  # type: ignore[method-assign]
    study = optuna.create_study(sampler=sampler)
    study.optimize(_two_basins, n_trials=60)
    drawn = {t.number: t.params["style"] for t in study.trials}
    assert len(seen) >= 8, "once both choices completed, every fifth trial was the basin's"
    for number, styles in seen.items():
        assert number % 5 == 4 and len(styles) == 1, "only the runner-up choice's trials were shown"
        assert drawn[number] in styles, "the trial kept that choice"
        assert study.trials[number].system_attrs[BASIN] == f"style={drawn[number]}", "and says so"
    assert not [t for t in study.trials if BASIN in t.system_attrs and t.number not in seen]
