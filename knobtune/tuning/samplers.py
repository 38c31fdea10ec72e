"""The samplers a study can use: Optuna's own, chosen by name."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import optuna
from optuna.trial import FrozenTrial

from knobtune.errors import UsageError


SAMPLERS = ("tpe", "random", "qmc", "cmaes", "gp")


Constraints = Callable[[FrozenTrial], Sequence[float]]


def make_sampler(name: str, seed: int | None, expected_trials: int | None = None,
                 constraints: Constraints | None = None) -> optuna.samplers.BaseSampler:
    """The sampler called ``name`` (see ``_make``); Optuna's experimental warnings are expected and silenced."""
    with warnings.catch_warnings():  # TPE's `group`, QMC and GP are marked experimental; we choose them knowingly
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _make(name, seed, expected_trials, constraints)


def _make(name: str, seed: int | None, expected_trials: int | None,
          constraints: Constraints | None) -> optuna.samplers.BaseSampler:
    """The sampler called ``name``.

    TPE starts from a third of the expected trials drawn at random (at least 4,
    at most 10) and models knobs jointly (``multivariate``, ``group`` for
    conditional knobs). CMA-ES and GP need optional packages; the error says which.
    ``constraints`` (values <= 0 are feasible) steer TPE and GP away from
    infeasible configs; the other samplers ignore them, and knobtune never
    reports an infeasible config as the result whichever sampler ran.

    Raises:
        UsageError: an unknown name, or a sampler whose package is missing.
    """
    startup = min(10, max(4, (expected_trials or 30) // 3))
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, group=True,
                                          constant_liar=True, constraints_func=constraints)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)
    if name == "cmaes":
        _require("cmaes", "cmaes")
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=startup, warn_independent_sampling=False,
                                            independent_sampler=optuna.samplers.RandomSampler(seed=seed))
    if name == "gp":
        _require("torch", "torch")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup, constraints_func=constraints)
    raise UsageError(f"unknown sampler '{name}'. Fix: use one of {', '.join(SAMPLERS)}")


def _require(module: str, package: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"this sampler needs the '{package}' package, which is not installed. "
                         f"Fix: pip install {package}")
