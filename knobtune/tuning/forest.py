"""A random-forest sampler that learns from every rung (``--sampler forest``).

SMAC's surrogate, in a form that fits knobtune's ladder: a random forest (scikit-learn) predicts a config's
value relative to the default at the same rung from its knobs. Every measurement is a row, at whatever rung:
a trial pruned at rung 0, or one that failed there with its pessimistic value, teaches the model as much as a
full-size run. (Ratios to the default carry across rungs: on random configs rung 0 ranked like the full size
with Spearman 0.78, docs/findings.md; a first version that gave the rung as a feature left the
full size to its few full-size rows, and its 10-minute study spent a third of its trials on timeouts.) Each
row: the knobs scaled to [0, 1] (log knobs on a log scale, a choice by its position), and log(value / the
default's value at that step), sign turned so that lower is better. The next config is the candidate with
the largest expected improvement over the best full-size ratio so far, the mean and spread taken over the
forest's trees; candidates are drawn mostly around the best configs measured (a few knobs moved, a local
search as SMAC does) and the rest at random.

Knobs outside the search space that every trial shares (conditional ones) are drawn at random.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from knobtune.tuning.attrs import ROLE  # the default's trials carry it: the yardstick, not data


class ForestSampler(optuna.samplers.BaseSampler):
    def __init__(self, seed: int | None = None, n_startup_trials: int = 10, full_step: int = 1,
                 candidates: int = 1000, local_share: float = 0.7, trees: int = 30, around_best: int = 5) -> None:
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        self._random = optuna.samplers.RandomSampler(seed=seed)
        self._startup = n_startup_trials
        self._full_step = max(1, full_step)
        self._candidates = candidates
        self._local_share = local_share
        self._trees = trees
        self._around_best = around_best

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._random.reseed_rng()

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """The knobs every sampled trial so far has (conditional ones drop out), with their distributions."""
        space: dict[str, BaseDistribution] | None = None
        for sampled in _sampled(study):
            if space is None:
                space = dict(sampled.distributions)
            else:
                space = {n: d for n, d in space.items() if sampled.distributions.get(n) == d}
        return {n: d for n, d in (space or {}).items() if not d.single()}

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        names = sorted(search_space)
        rows, best, top = self._observations(study, names, search_space)
        sampled = {t.number for t in _sampled(study)}
        if len(sampled) < self._startup or len(rows) < 2:
            return {}
        best = 0.0 if best is None else min(best, 0.0)  # the default itself ran at full size: log ratio 0
        x = np.array([r[0] for r in rows])
        y = np.array([r[1] for r in rows])
        from scipy.stats import norm  # with scikit-learn, loaded when the forest proposes (~0.6 s), not on import
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(n_estimators=self._trees, min_samples_leaf=2, max_features=0.5,
                                       random_state=int(self._rng.integers(2**31)))
        forest.fit(x, y)
        candidates = self._draw(names, search_space, top)
        per_tree = np.stack([tree.predict(candidates) for tree in forest.estimators_])
        mean, spread = per_tree.mean(axis=0), per_tree.std(axis=0) + 1e-9
        gain = best - mean
        z = gain / spread
        improvement = gain * norm.cdf(z) + spread * norm.pdf(z)
        chosen = candidates[int(np.argmax(improvement))]
        return {name: from_unit(search_space[name], u) for name, u in zip(names, chosen)}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    # ------------------------------------------------------------ the data

    def _observations(self, study: optuna.Study, names: Sequence[str], space: dict[str, BaseDistribution]
                      ) -> tuple[list[tuple[list[float], float]], float | None, list[list[float]]]:
        """One row per measurement of a sampled trial: (encoded knobs, log ratio to the default at its step);
        the best full-size log ratio; and the encoded knobs of the best trials by their last measurement."""
        default = _default_by_step(study, self._full_step)
        sign = -1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
        rows: list[tuple[list[float], float]] = []
        best: float | None = None
        last: list[tuple[int, float, list[float]]] = []  # (highest step, its log ratio, knobs) per trial
        for trial in _sampled(study):
            if any(name not in trial.params for name in names):
                continue
            knobs = [to_unit(space[name], trial.params[name]) for name in names]
            measured = dict(trial.intermediate_values)
            if trial.state == TrialState.COMPLETE and trial.value is not None:
                measured[self._full_step] = trial.value
            for step, value in sorted(measured.items()):
                base = default.get(step)
                if base is None or value is None or value <= 0 or base <= 0 or not math.isfinite(value):
                    continue
                target = sign * math.log(value / base)
                rows.append((knobs, target))
                if step == self._full_step and (best is None or target < best):
                    best = target
            if rows and rows[-1][0] is knobs:
                last.append((max(measured), rows[-1][1], knobs))
        last.sort(key=lambda item: (-item[0], item[1]))  # higher rungs first, then the best there
        return rows, best, [knobs for _, _, knobs in last[:self._around_best]]

    def _draw(self, names: Sequence[str], space: dict[str, BaseDistribution], top: list[list[float]]) -> np.ndarray:
        """Candidates in [0, 1]^d: most near the best configs (a few knobs moved), the rest at random."""
        d = len(names)
        local = int(self._candidates * self._local_share)
        uniform = self._rng.random((self._candidates - local, d))
        around = np.array(top)[self._rng.integers(len(top), size=local)]
        moved = self._rng.random((local, d)) < np.clip(3.0 / d, 0.05, 1.0)  # ~3 knobs moved per candidate
        around = np.where(moved, np.clip(around + self._rng.normal(0, 0.15, (local, d)), 0, 1), around)
        categorical = [isinstance(space[n], CategoricalDistribution) for n in names]
        for j, is_choice in enumerate(categorical):  # a choice moves to any other value, not to a neighbour
            if is_choice:
                around[:, j] = np.where(moved[:, j], self._rng.random(local), around[:, j])
        return np.vstack([uniform, around])


def _sampled(study: optuna.Study) -> list[FrozenTrial]:
    """Finished trials the sampler chose (the default and its controls are the yardstick, not data)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
            if ROLE not in t.user_attrs]


def _default_by_step(study: optuna.Study, full_step: int) -> dict[int, float]:
    """The default's mean value at each step over its runs (the first, then the controls)."""
    values: dict[int, list[float]] = defaultdict(list)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if ROLE in trial.user_attrs:
            for step, value in trial.intermediate_values.items():
                values[step].append(value)
            if trial.value is not None:
                values[full_step].append(trial.value)
    return {step: float(np.mean(v)) for step, v in values.items()}


def to_unit(distribution: BaseDistribution, value: Any) -> float:
    """``value`` on [0, 1]: its place in the range (on a log scale for a log param), or a choice's position."""
    if isinstance(distribution, CategoricalDistribution):
        n = len(distribution.choices)
        return distribution.to_internal_repr(value) / max(1, n - 1)
    low, high = float(distribution.low), float(distribution.high)  # type: ignore[attr-defined]
    if getattr(distribution, "log", False):
        low, high, value = math.log(low), math.log(high), math.log(value)
    return 0.5 if high == low else (float(value) - low) / (high - low)


def from_unit(distribution: BaseDistribution, u: float) -> Any:
    """The value at ``u`` of the range (clipped into it; rounded to an int or the step), or the nearest choice."""
    u = float(min(1.0, max(0.0, u)))
    if isinstance(distribution, CategoricalDistribution):
        return distribution.choices[int(round(u * (len(distribution.choices) - 1)))]
    assert isinstance(distribution, (FloatDistribution, IntDistribution))
    low, high = float(distribution.low), float(distribution.high)
    if distribution.log:
        value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
    else:
        value = low + u * (high - low)
    if isinstance(distribution, IntDistribution):
        step = distribution.step
        value = int(round((value - distribution.low) / step)) * step + distribution.low
        return int(min(distribution.high, max(distribution.low, value)))
    if distribution.step is not None:
        value = round((value - low) / distribution.step) * distribution.step + low
    return float(min(high, max(low, value)))
