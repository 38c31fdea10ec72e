"""The random-forest sampler: its encoding, what it learns from (every rung, never the default), and that it
searches with its model after the start-up trials."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from knobtune.tuning import attrs
from knobtune.tuning.forest import ForestSampler, from_unit, to_unit
from knobtune.tuning.samplers import make_sampler


@pytest.mark.parametrize("distribution, value", [
    (FloatDistribution(1.0, 1e6, log=True), 1000.0),
    (IntDistribution(1, 64), 17),
    (IntDistribution(1024, 1 << 24, log=True), 65536),
    (CategoricalDistribution(["level", "universal"]), "universal"),
    (CategoricalDistribution([False, True]), False),
])
def test_a_value_put_on_the_unit_interval_comes_back_as_itself(distribution, value) -> None:
    u = to_unit(distribution, value)
    assert 0.0 <= u <= 1.0
    decoded = from_unit(distribution, u)
    assert decoded == pytest.approx(value) if isinstance(value, float) else decoded == value


def _toy_study(sampler: optuna.samplers.BaseSampler, trials: int, prune_every: int = 3,
               prune_all: bool = False) -> optuna.Study:
    """A study shaped like knobtune's: the default first (role, every rung), then trials reported at step 1 and
    pruned two times in three, the rest told at full size (step 9). Lower is better; the optimum is x=0.2, y=100."""
    study = optuna.create_study(sampler=sampler)
    default = study.ask()
    default.set_user_attr(attrs.ROLE, attrs.ROLE_DEFAULT)
    default.report(4.0, step=1)
    study.tell(default, 4.0)
    for i in range(trials):
        trial = study.ask()
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 1.0, 1e4, log=True)
        kind = trial.suggest_categorical("kind", ["a", "b", "c"])
        value = 1.0 + 4 * (x - 0.2) ** 2 + (math.log10(y) - 2) ** 2 / 4 + (0.0 if kind == "a" else 0.5)
        trial.report(value, step=1)
        if prune_all or i % prune_every:
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, value)
    return study


def test_it_learns_from_pruned_trials_and_never_from_the_default() -> None:
    sampler = ForestSampler(seed=1, n_startup_trials=4, full_step=9)
    study = _toy_study(optuna.samplers.RandomSampler(seed=1), trials=12)
    space = sampler.infer_relative_search_space(study, study.trials[-1])
    assert set(space) == {"x", "y", "kind"}
    rows, best, top = sampler._observations(study, sorted(space), space)
    assert len(rows) == 12 + 4  # every trial's step-1 value, and the four told at full size; not the default
    complete = [t for t in study.trials[1:] if t.state == TrialState.COMPLETE]
    assert best == pytest.approx(min(math.log(t.value / 4.0) for t in complete))  # log ratio to the default
    assert len(top) == 4 + 1  # around the complete ones first, then the best pruned one


def test_after_the_start_up_it_proposes_better_configs_than_random() -> None:
    """Same seeds, same budget: the forest's full-size configs beat random sampling's on the toy (seeded, so the
    comparison is deterministic)."""
    def best(sampler_name: str, seed: int) -> float:
        study = _toy_study(make_sampler(sampler_name, seed, expected_trials=30, full_step=9), trials=45)
        return min(t.value for t in study.trials[1:] if t.state == TrialState.COMPLETE)

    forest = sorted(best("forest", seed) for seed in range(4))
    random = sorted(best("random", seed) for seed in range(4))
    assert forest[1] < random[1] and forest[2] < random[2], (forest, random)  # the middle of four seeds


def test_the_model_leads_before_any_sampled_config_reaches_full_size() -> None:
    """The default's full-size run is the incumbent until a sampled config completes: a study whose sampled
    trials are all pruned still gets the model's configs after the start-up (the first forest arm of the peer
    bench drew at random for 90 trials because it waited for a sampled full-size run)."""
    pruned_only = _toy_study(optuna.samplers.RandomSampler(seed=2), trials=12, prune_all=True)
    assert all(t.state == TrialState.PRUNED for t in pruned_only.trials[1:])
    sampler = ForestSampler(seed=1, n_startup_trials=4, full_step=9)
    trial = pruned_only.ask()
    space = sampler.infer_relative_search_space(pruned_only, trial)
    assert sampler.sample_relative(pruned_only, trial, space)  # not {} (which would mean: draw at random)
