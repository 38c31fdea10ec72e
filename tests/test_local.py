"""TPE with local moves (``--sampler local``): a local trial is one of the best complete configs with one to
three params drawn again; before the start-up trials ran, and for queued configs, there are none; and in a space
where a few of many knobs matter and most random configs are bad, it finds better configs than TPE alone."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from knobtune.tuning import attrs
from knobtune.tuning.local import LOCAL_OF, best_complete
from knobtune.tuning.samplers import make_sampler

KNOBS = 20


def _objective(trial: optuna.Trial) -> float:
    """Lower is better; the default (every x at 0.5, mode "a") scores 2.0. Two knobs help a little each, and every
    knob far from the default hurts: like a store's knobs, most random configs are worse than the default."""
    xs = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(KNOBS)]
    mode = trial.suggest_categorical("mode", ["a", "b", "c"])
    away = sum(max(0.0, abs(x - 0.5) - 0.1) for x in xs[2:])
    return 2.0 - 0.8 * (xs[0] - 0.5) - 0.8 * (xs[1] - 0.5) + 2.0 * away + (0.3 if mode == "b" else 0.0)


def _study(sampler: optuna.samplers.BaseSampler, trials: int) -> optuna.Study:
    """The default first (fixed params, the role knobtune gives it), then ``trials`` sampled ones, all complete."""
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({**{f"x{i}": 0.5 for i in range(KNOBS)}, "mode": "a"},
                        user_attrs={attrs.ROLE: attrs.ROLE_DEFAULT})
    study.optimize(_objective, n_trials=trials + 1)
    return study


def test_a_local_trial_moves_one_to_three_params_of_a_best_config() -> None:
    study = _study(make_sampler("local", seed=3, expected_trials=30), trials=40)
    first, rest = study.trials[:11], study.trials[11:]
    assert not any(LOCAL_OF in t.system_attrs for t in first)  # the default, then 10 start-up trials
    local = [t for t in rest if LOCAL_OF in t.system_attrs]
    assert 8 <= len(local) <= 24  # about half
    for trial in local:
        incumbent = study.trials[trial.system_attrs[LOCAL_OF]]
        assert incumbent.state == TrialState.COMPLETE and incumbent.number < trial.number
        changed = [name for name, value in trial.params.items() if incumbent.params[name] != value]
        assert 1 <= len(changed) <= 3, changed  # never the incumbent again


def test_the_incumbents_are_the_best_complete_trials_the_default_among_them() -> None:
    study = _study(optuna.samplers.RandomSampler(seed=1), trials=8)
    best = best_complete(study, 3)
    values = sorted(t.value for t in study.trials)
    assert [t.value for t in best] == values[:3]
    assert study.trials[0].value == 2.0 and (study.trials[0] in best) == (2.0 <= values[2])


def test_it_finds_better_configs_than_tpe_when_few_knobs_matter() -> None:
    """Same seeds, same trials: the best value found, the middle two of five seeds (seeded: deterministic)."""
    def best(name: str, seed: int) -> float:
        study = _study(make_sampler(name, seed, expected_trials=30), trials=60)
        return min(t.value for t in study.trials[1:])

    local = sorted(best("local", seed) for seed in range(5))
    tpe = sorted(best("tpe", seed) for seed in range(5))
    assert local[1] < tpe[1] and local[2] < tpe[2], (local, tpe)
    assert local[2] <= 2.0 < tpe[0]  # never worse than the default here; TPE's best config is, on every seed


def test_a_local_move_changes_its_config_even_among_few_choices() -> None:
    """Drawn again, a two-way choice often comes back the same; the move then takes the other value (a config
    identical to its incumbent would only be its measurement reused)."""
    study = optuna.create_study(sampler=make_sampler("local", seed=5, expected_trials=12))
    study.enqueue_trial({f"b{i}": False for i in range(4)}, user_attrs={attrs.ROLE: attrs.ROLE_DEFAULT})
    study.optimize(lambda t: sum(t.suggest_categorical(f"b{i}", [False, True]) for i in range(4)) + 1.0, n_trials=40)
    local = [t for t in study.trials if LOCAL_OF in t.system_attrs]
    assert local
    assert all(t.params != study.trials[t.system_attrs[LOCAL_OF]].params for t in local)
