"""A sampler shown earlier studies' trials (``tuning.search.prior``): what it is given, in which units, and that
Optuna's TPE learns through it. The studies here are Optuna's own, in memory, over a function with a known best
(no system runs: what is tested is the sampler's input; tests/test_earlier_studies.py runs real studies)."""

from __future__ import annotations

import math

import optuna
from optuna.trial import TrialState

from knobtune.tuning.records import attrs
from knobtune.tuning.search import make_sampler
from knobtune.tuning.search import LearnsFromEarlier

BEST = (0.8, 0.2)  # where the cost below is least
STEPS = (1, 3)  # two rungs, as a study reports them (reduction factor 3)


def _cost(x: float, y: float, scale: float) -> float:
    """Seconds a config takes on a workload ``scale`` times as large: least at BEST."""
    return scale * (1.0 + 4.0 * ((x - BEST[0]) ** 2 + (y - BEST[1]) ** 2))


def _run(study: optuna.Study, trial: optuna.Trial, scale: float) -> float:
    x, y = trial.suggest_float("x", 0.0, 1.0), trial.suggest_float("y", 0.0, 1.0)
    for step in STEPS:
        trial.report(_cost(x, y, scale) * step, step)
    return _cost(x, y, scale) * STEPS[-1]


def _study(sampler: optuna.samplers.BaseSampler, name: str = "s",
           storage: optuna.storages.BaseStorage | None = None) -> optuna.Study:
    return optuna.create_study(study_name=name, storage=storage or optuna.storages.InMemoryStorage(),
                               sampler=sampler, direction="minimize")


def _with_default(study: optuna.Study, scale: float) -> None:
    """The default config (0.5, 0.5) first, marked as a knobtune study marks it."""
    study.enqueue_trial({"x": 0.5, "y": 0.5}, user_attrs={attrs.ROLE: attrs.ROLE_DEFAULT})
    study.optimize(lambda t: _run(study, t, scale), n_trials=1)


def _earlier(trials: int, scale: float = 1.0) -> optuna.Study:
    study = _study(make_sampler("tpe", 7, trials), "earlier")
    _with_default(study, scale)
    study.optimize(lambda t: _run(study, t, scale), n_trials=trials)
    return study


def test_earlier_trials_are_given_in_this_studys_units_once_its_default_ran() -> None:
    earlier = _earlier(12)
    sampler = LearnsFromEarlier(make_sampler("tpe", 1, 20), [earlier])
    study = _study(sampler)
    assert sampler.given(study) == []  # nothing before this study's own default
    _with_default(study, scale=2.0)  # the same workload twice as large: every value doubles
    given = sampler.given(study)
    theirs = [t for t in earlier.trials if not attrs.is_default(t.user_attrs)]
    assert len(given) == len(theirs) == 12
    for mine, their in zip(given, theirs):
        assert mine.number < 0 and mine.user_attrs == {} and mine.params == their.params
        assert math.isclose(mine.value, 2.0 * their.value)
        assert all(math.isclose(mine.intermediate_values[s], 2.0 * their.intermediate_values[s]) for s in STEPS)
    assert [t.number for t in study.trials] == [0]  # nothing was added to the study


def test_a_pruned_trial_keeps_the_steps_both_defaults_ran_and_a_trial_that_conflicts_is_not_given() -> None:
    earlier = _earlier(0)
    x, y = optuna.distributions.FloatDistribution(0, 1), optuna.distributions.FloatDistribution(0, 1)
    pruned = optuna.trial.create_trial(state=TrialState.PRUNED, params={"x": 0.3, "y": 0.4},
                                       distributions={"x": x, "y": y}, intermediate_values={1: 1.5, 9: 4.0})
    unsearched = optuna.trial.create_trial(  # "mode" is a knob this study has not suggested yet: left out of it
        state=TrialState.COMPLETE, value=2.0, params={"x": 0.6, "mode": "fast"},
        distributions={"x": x, "mode": optuna.distributions.CategoricalDistribution(["fast", "safe"])})
    other_kind = optuna.trial.create_trial(
        state=TrialState.COMPLETE, value=1.0, params={"x": "low", "y": 0.4},
        distributions={"x": optuna.distributions.CategoricalDistribution(["low", "high"]), "y": y})
    outside = optuna.trial.create_trial(state=TrialState.COMPLETE, value=1.0, params={"x": 3.0, "y": 0.4},
                                        distributions={"x": optuna.distributions.FloatDistribution(0, 4), "y": y})
    earlier.add_trials([pruned, unsearched, other_kind, outside])
    sampler = LearnsFromEarlier(make_sampler("tpe", 1, 20), [earlier])
    study = _study(sampler)
    _with_default(study, scale=1.0)
    given = sampler.given(study)
    assert [(t.state, t.intermediate_values, t.params) for t in given] == [
        (TrialState.PRUNED, {1: 1.5}, {"x": 0.3, "y": 0.4}), (TrialState.COMPLETE, {}, {"x": 0.6})]
    assert given[1].distributions == {"x": study.trials[0].distributions["x"]}


def _best_of_first(n: int, seed: int, earlier: optuna.Study | None) -> float:
    """The least cost among the first ``n`` configs a new study's TPE proposes after its default (the workload
    1.5x as large as the earlier one's), with or without the earlier study's trials."""
    base = make_sampler("tpe", seed, 30)
    study = _study(LearnsFromEarlier(base, [earlier]) if earlier else base)
    _with_default(study, scale=1.5)
    study.optimize(lambda t: _run(study, t, 1.5), n_trials=n)
    return min(t.value for t in study.trials[1:]) / (1.5 * STEPS[-1])


def test_tpe_shown_an_earlier_study_proposes_configs_near_its_best_from_the_start() -> None:
    earlier = _earlier(30)
    seeds = range(1, 7)
    warm = [_best_of_first(3, seed, earlier) for seed in seeds]
    cold = [_best_of_first(3, seed, None) for seed in seeds]
    # cost 1.0 is the best config; the default (0.5, 0.5) costs 1.72
    assert sum(warm) / len(warm) < 1.1, warm
    assert sum(warm) < sum(cold), (warm, cold)
