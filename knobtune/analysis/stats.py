"""Statistics over repeated measurements: medians, speedups with confidence intervals, noise.

Pure functions over plain numbers; nothing here runs or stores anything.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Speedup:
    """How much better a config is than a baseline, over repeated runs of both.

    ``ratio`` is the ratio of medians oriented so that > 1 is better (for a
    time, baseline / config; for a throughput, config / baseline).
    ``ci_low``/``ci_high`` bound it with a percentile bootstrap (each group
    resampled on its own). ``p_value`` is the two-sided Mann-Whitney U test.
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n_baseline: int
    n_config: int

    @property
    def significant(self) -> bool:
        """Better beyond the noise: the whole interval lies above 1."""
        return self.ci_low > 1.0

    @property
    def worse(self) -> bool:
        return self.ci_high < 1.0

    def describe(self) -> str:
        return f"{self.ratio:.2f}x (95% CI {self.ci_low:.2f}-{self.ci_high:.2f}, p={self.p_value:.3g})"


def speedup(baseline: Sequence[float], config: Sequence[float], maximize: bool, seed: int = 0) -> Speedup:
    """The speedup of ``config`` over ``baseline`` with a bootstrap 95% interval.

    Raises:
        ValueError: either sample is empty or holds a non-positive value.
    """
    base = np.asarray(baseline, dtype=float)
    cand = np.asarray(config, dtype=float)
    if base.size == 0 or cand.size == 0 or (base <= 0).any() or (cand <= 0).any():
        raise ValueError("speedup needs at least one positive value on each side")

    def oriented(b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return c / b if maximize else b / c

    rng = np.random.default_rng(seed)
    base_medians = np.median(rng.choice(base, size=(BOOTSTRAP_RESAMPLES, base.size)), axis=1)
    cand_medians = np.median(rng.choice(cand, size=(BOOTSTRAP_RESAMPLES, cand.size)), axis=1)
    ratios = oriented(base_medians, cand_medians)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    if base.size > 1 and cand.size > 1 and not (np.all(base == base[0]) and np.all(cand == base[0])):
        from scipy import stats as scipy_stats  # loaded when a comparison is made, not by every command

        p_value = float(scipy_stats.mannwhitneyu(cand, base, alternative="two-sided").pvalue)
    else:
        p_value = 1.0
    ratio = float(oriented(np.median(base), np.median(cand)))
    return Speedup(ratio, float(low), float(high), p_value, int(base.size), int(cand.size))


def p_better(baseline: Sequence[float], config: Sequence[float], maximize: bool) -> float:
    """The one-sided p-value that ``config``'s runs are better than ``baseline``'s: Mann-Whitney's U test (runs
    ranked, no assumption on their distribution; exact for small samples without ties). 1.0 with one run a side.

    At n runs a side its smallest value is 1 / C(2n, n): 0.05 at 3 runs, 0.014 at 4, 0.004 at 5.
    """
    if len(baseline) < 2 or len(config) < 2:
        return 1.0
    from scipy import stats as scipy_stats

    better = "greater" if maximize else "less"
    return float(scipy_stats.mannwhitneyu(config, baseline, alternative=better).pvalue)


def noise(values: Sequence[float]) -> float:
    """Relative spread of repeated runs of one config: standard deviation / mean (0.06 = 6%)."""
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values) / statistics.mean(values)


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(min, median, max) of a sample."""
    return min(values), statistics.median(values), max(values)


@dataclass(frozen=True)
class Share:
    """One step's part of the whole gain from the first config to the last, with a 95% bootstrap interval."""

    share: float
    ci_low: float
    ci_high: float


def gain_shares(steps: Sequence[Sequence[float]], maximize: bool, seed: int = 0,
                resamples: int = 2_000) -> list[Share]:
    """Each step's share of the gain along a path of configs (``steps[0]`` the start, ``steps[-1]`` the end).

    A config's gain is its speedup over the start (ratio of medians, > 1 better)
    minus 1; step i's share is its gain less step i-1's, over the end's gain.
    Shares sum to 1 when the end gains; each is bootstrapped (every step's runs
    resampled on their own). A path whose end does not gain has no shares.

    Raises:
        ValueError: fewer than two steps, an empty step, or a non-positive value.
    """
    if len(steps) < 2 or any(len(s) == 0 for s in steps) or any(v <= 0 for s in steps for v in s):
        raise ValueError("gain shares need two or more steps of positive values")
    rng = np.random.default_rng(seed)
    medians = np.stack([np.median(rng.choice(np.asarray(s, dtype=float), size=(resamples, len(s))), axis=1)
                        for s in steps])  # steps x resamples
    point = np.array([[float(np.median(s))] for s in steps])

    def shares(m: np.ndarray) -> np.ndarray:
        ratios = m / m[0] if maximize else m[0] / m
        gains = ratios - 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.diff(gains, axis=0) / gains[-1]

    estimate = shares(point)[:, 0]
    sampled = shares(medians)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(sampled, [tail, 100 - tail], axis=1)
    return [Share(float(e), float(lo), float(hi)) for e, lo, hi in zip(estimate, low, high)]


def rung_agreement(values: Sequence[dict[int, float]], minimum: int = 5) -> list[dict[str, float]]:
    """How well each rung of a ladder ranks configs like the next one: Spearman's rho between the values of the
    configs measured at both rungs (``values``: one dict rung index -> value per config).

    A small rung is only worth its saving when it ranks like the full size; a rho near 0 says its pruning is a
    lottery. Pairs with fewer than ``minimum`` configs are left out. Returns [{"from", "to", "rho", "n"}, ...].
    """
    rungs = sorted({rung for config in values for rung in config})
    result = []
    for low, high in zip(rungs, rungs[1:]):
        pairs = [(config[low], config[high]) for config in values if low in config and high in config]
        if len(pairs) < minimum or len({a for a, _ in pairs}) < 2 or len({b for _, b in pairs}) < 2:
            continue
        from scipy import stats as scipy_stats

        rho = scipy_stats.spearmanr(*zip(*pairs)).statistic
        result.append({"from": low, "to": high, "rho": float(rho), "n": len(pairs)})
    return result
