"""The samplers a study can use: Optuna's own, chosen by name."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

from knobtune.errors import UsageError
from knobtune.tuning.search.basins import SecondBasin


SAMPLERS = ("tpe", "random", "qmc", "cmaes", "gp", "lhs")
# samplers earlier releases offered, removed because their bench did not show them ahead of TPE (docs/findings.md):
# a study's record may still name one (show, report and explain read it); a resume is told what to use instead
REMOVED_SAMPLERS = {
    "forest": "it lost to TPE on every seed of the peer bench (1.15x against 1.44x at 5 minutes)",
    "local": "it was not ahead of TPE in the peer bench (1.37x against 1.46x)",
}
LHS_ROW = "lhs_row"  # trial system attribute: the row of the Latin hypercube design the trial took


def make_sampler(name: str, seed: int | None, expected_trials: int | None = None,
                 param_names: Sequence[str] = (), basin_share: float = 0.0,
                 basin_knobs: Sequence[str] = ()) -> optuna.samplers.BaseSampler:
    """The sampler called ``name`` (see ``_make``); Optuna's experimental warnings are expected and silenced.

    ``param_names``: every Optuna param the space can suggest (the Latin hypercube gives each a column).
    ``basin_share``: with TPE, that share of the trials is drawn by a second TPE inside the runner-up choice of one
    of ``basin_knobs`` (``basins.SecondBasin``); 0, or no such knob: none.

    Raises:
        UsageError: see ``_make``; a sampler earlier releases offered and this one does not (a study's record).
    """
    if name in REMOVED_SAMPLERS:
        raise UsageError(f"the study's sampler '{name}' was removed from knobtune ({REMOVED_SAMPLERS[name]}). "
                         "Fix: resume it with --sampler tpe (the default), or another of "
                         f"{', '.join(s for s in SAMPLERS if s != 'lhs')}")
    if name == "lhs":
        return LatinHypercubeSampler(expected_trials or 100, param_names, seed)
    with warnings.catch_warnings():  # TPE's `group`, QMC and GP are marked experimental; we choose them knowingly
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = _make(name, seed, expected_trials)
        if name != "tpe" or basin_share <= 0 or not basin_knobs:
            return sampler
        basin = _make(name, None if seed is None else seed + 1, expected_trials)
        return SecondBasin(sampler, basin, every=round(1 / basin_share), among=basin_knobs)


def removed_note(stored: str, now: str) -> str | None:
    """One line for a resume of a study searched with a sampler knobtune no longer offers, or None."""
    if stored not in REMOVED_SAMPLERS:
        return None
    return (f"the study was searched with sampler '{stored}', which knobtune no longer offers "
            f"({REMOVED_SAMPLERS[stored]}); it goes on with '{now}'")


def _make(name: str, seed: int | None, expected_trials: int | None) -> optuna.samplers.BaseSampler:
    """The sampler called ``name``.

    TPE starts from a third of the expected trials drawn at random (at least 4,
    at most 10) and models knobs jointly (``multivariate``, ``group`` for
    conditional knobs). CMA-ES and GP need optional packages; the error says which.
    The constraint a full-size run sets on its trial (``Trial.set_constraint``:
    recovery time over ``--max-recovery-time``, <= 0 feasible) steers TPE and
    GP away from infeasible configs; the other samplers ignore it, and knobtune
    never reports an infeasible config as the result whichever sampler ran.

    Raises:
        UsageError: an unknown name, or a sampler whose package is missing.
    """
    startup = _startup(expected_trials)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, group=True,
                                          constant_liar=True)
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
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup)
    raise UsageError(f"unknown sampler '{name}'. Fix: use one of {', '.join(SAMPLERS)}")


def _startup(expected_trials: int | None) -> int:
    """Trials drawn at random before a model-based sampler takes over: a third of those expected, 4 to 10."""
    return min(10, max(4, (expected_trials or 30) // 3))


def _require(module: str, package: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"this sampler needs the '{package}' package, which is not installed. "
                         f"Fix: pip install {package}")


class LatinHypercubeSampler(optuna.samplers.BaseSampler):
    """Configs spread evenly over the space, for ranking knobs: a Latin hypercube of ``samples`` rows (scipy).

    Each param (a knob, or a knob's ``.special`` choice) has a column of the
    design, by its place in ``param_names``; every column is cut into
    ``samples`` equal strata and each stratum is used exactly once, so even a
    few hundred samples cover each knob's whole range. A column's value u in
    [0, 1) maps onto the param's range (on a log scale for log knobs) or picks
    one of its choices. A conditional param uses its column only in the trials
    where it applies. Trials with fixed params (the default) take no row; the
    row count is kept in the storage, so a resumed study goes on down the
    design, and trials past it start a new design.
    """

    def __init__(self, samples: int, param_names: Sequence[str], seed: int | None) -> None:
        self._samples = max(1, samples)
        self._columns = {name: i for i, name in enumerate(param_names)}
        self._seed = seed or 0
        self._designs: dict[int, np.ndarray] = {}
        self._rows: dict[int, int] = {}  # trial id -> design row
        self._fallback = optuna.samplers.RandomSampler(seed=seed)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {}

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if "fixed_params" in trial.system_attrs:
            return
        row = sum(1 for t in study.get_trials(deepcopy=False) if LHS_ROW in t.system_attrs)
        study._storage.set_trial_system_attr(trial._trial_id, LHS_ROW, row)
        self._rows[trial._trial_id] = row

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        row = self._rows.get(trial._trial_id)
        column = self._columns.get(param_name)
        if row is None or column is None:
            return self._fallback.sample_independent(study, trial, param_name, param_distribution)
        block, row = divmod(row, self._samples)
        return _from_unit(float(self._design(block)[row, column]), param_distribution)

    def _design(self, block: int) -> np.ndarray:
        if block not in self._designs:
            from scipy.stats import qmc  # loaded when a sampler draws, not by every command

            engine = qmc.LatinHypercube(d=max(1, len(self._columns)), seed=self._seed + block)
            self._designs[block] = engine.random(self._samples)
        return self._designs[block]


def _from_unit(u: float, distribution: BaseDistribution) -> Any:
    """The value at ``u`` in [0, 1) of a param's range (log-scaled when the param is), or one of its choices."""
    if isinstance(distribution, CategoricalDistribution):
        choices = distribution.choices
        return choices[min(int(u * len(choices)), len(choices) - 1)]
    if isinstance(distribution, IntDistribution):
        low, high = distribution.low, distribution.high
        if distribution.log:
            value = math.exp(math.log(low) + u * (math.log(high + 1) - math.log(low)))
        else:
            value = low + u * (high - low + 1)
        return min(high, max(low, int(math.floor(value))))
    if isinstance(distribution, FloatDistribution):
        least, most = distribution.low, distribution.high
        if distribution.log:
            return math.exp(math.log(least) + u * (math.log(most) - math.log(least)))
        return least + u * (most - least)
    raise TypeError(f"no Latin hypercube mapping for {type(distribution).__name__}")
