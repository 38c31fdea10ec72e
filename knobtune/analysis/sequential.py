"""When to stop adding interleaved rounds, and what they prove: a group-sequential test of each candidate against
the baseline, at one stated error rate over every candidate and every look.

Round r runs the baseline and each candidate side by side, so their ratio in that round is free of the machine's
drift; the test is on the log of those paired ratios (one-sample t). The rounds are looked at after ``first``
rounds, then every ``step`` more, up to the planned ``most``: a candidate is settled at the first look where its
repeated confidence interval (Jennison & Turnbull, "Interim analyses: the repeated confidence interval approach",
JRSS B 51(3), 1989) lies wholly above 1 (a gain) or wholly below it (worse); rounds are added while one straddles 1.
Each look's bound comes from Lan-DeMets alpha spending with the Pocock-type function
``alpha * ln(1 + (e - 1) * t)`` (Lan & DeMets, "Discrete sequential boundaries for clinical trials", Biometrika
70(3), 1983), computed for the looks actually taken by recursive numerical integration (Armitage, McPherson & Rowe
1969), and applied to the t-statistic at the same nominal level (the "significance level approach" for an unknown
variance: Jennison & Turnbull, "Group Sequential Methods with Applications to Clinical Trials", 2000, section 3.8).
The error is split evenly across the candidates (Bonferroni), so the chance that any candidate equal to the
baseline is declared a gain is at most ``error``; stopping a look early (the budget ended, a candidate settled)
only lowers it.

A candidate still open is given up (futile) when the rounds still reachable would show its gain less than one time
in fifty, were its true gain what its rounds so far show: the conditional power under the current trend (Lan, Simon &
Halperin, "Stochastically curtailed tests in long-term clinical trials", Communications in Statistics C 1(3), 1982;
Jennison & Turnbull 2000, chapter 10). The rule is non-binding: it only ever stops a candidate short of a gain,
so the error rate above holds as it is.

Pure functions over plain numbers; scipy gives the distributions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from enum import Enum
from functools import lru_cache
from typing import Any

import numpy as np

from knobtune.analysis.stats import Speedup

FAMILY_ERROR = 0.05  # the chance of declaring any equal candidate a gain, over all candidates and looks
_GRID = 601  # points of the numerical integration per look
_TAIL_SD = 8.0  # the integration's lower end, in standard deviations of the running sum
FUTILE_CHANCE = 0.02  # an open candidate less likely than this to show its gain in the rounds reachable is given up


class Decision(str, Enum):
    GAIN = "gain"  # the interval lies above 1
    WORSE = "worse"  # the interval lies below 1
    NO_GAIN = "no gain"  # it straddles 1 with the estimate at or below 1: more rounds are unlikely to show a gain
    OPEN = "open"  # it straddles 1 with the estimate above 1: more rounds would tell
    FUTILE = "futile"  # open, but the rounds still reachable would show its gain less than FUTILE_CHANCE of the time


@dataclass(frozen=True)
class SequentialPlan:
    """The looks of a verification: after ``first`` rounds, then every ``step`` more, up to ``most``; ``candidates``
    share ``error`` (Bonferroni)."""

    first: int
    most: int
    candidates: int = 1
    error: float = FAMILY_ERROR

    @property
    def step(self) -> int:
        """Rounds added between looks: half the first look's, at least one."""
        return max(1, -(-self.first // 2))

    @property
    def alpha(self) -> float:
        """Each candidate's one-sided share of the error."""
        return self.error / max(1, self.candidates)

    def looks(self) -> tuple[int, ...]:
        """The rounds after which the test looks, the last at ``most`` (``first`` alone when ``most <= first``)."""
        if self.most <= self.first:
            return (self.first,)
        return tuple(range(self.first, self.most, self.step)) + (self.most,)


def spent(fraction: float, alpha: float) -> float:
    """The Pocock-type spending function: how much of ``alpha`` may be spent by ``fraction`` of the planned rounds."""
    return alpha * math.log(1.0 + (math.e - 1.0) * min(1.0, fraction))


@lru_cache(maxsize=256)
def boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """The one-sided z-scale bound of each look at ``fractions`` (increasing, of the planned maximum) that spends
    ``alpha`` with ``spent``: the chance under no difference of first crossing at look k is what is spent between
    look k-1 and k.

    Raises:
        ValueError: the fractions are not increasing within (0, 1], or ``alpha`` is not within (0, 1).
    """
    from scipy import optimize, stats  # loaded when a verification is judged, not by every command

    if not 0 < alpha < 1 or not fractions or any(not 0 < f <= 1 for f in fractions) \
            or any(b <= a for a, b in zip(fractions, fractions[1:])):
        raise ValueError(f"boundaries need increasing fractions in (0, 1] and an alpha in (0, 1), not "
                         f"{fractions}, {alpha}")
    bounds: list[float] = []
    grid = weights = density = np.empty(0)  # the running sum's sub-density on the region where no look stopped
    before = 0.0
    for fraction in fractions:
        wanted = spent(fraction, alpha) - spent(before, alpha)
        if not bounds:
            bound = float(stats.norm.isf(wanted))
            top = bound * math.sqrt(fraction)
            grid = np.linspace(-_TAIL_SD * math.sqrt(fraction), top, _GRID)
            density = stats.norm.pdf(grid, scale=math.sqrt(fraction))
        else:
            sd = math.sqrt(fraction - before)
            mass = weights * density

            def crossing(z: float, mass: np.ndarray = mass, sd: float = sd, fraction: float = fraction) -> float:
                return float(np.sum(mass * stats.norm.sf((z * math.sqrt(fraction) - grid) / sd))) - wanted

            bound = float(optimize.brentq(crossing, -5.0, 40.0, xtol=1e-10)) if crossing(40.0) < 0 else 40.0
            top = bound * math.sqrt(fraction)
            new_grid = np.linspace(min(-_TAIL_SD * math.sqrt(fraction), top - 1.0), top, _GRID)
            density = stats.norm.pdf((new_grid[:, None] - grid[None, :]) / sd) @ mass / sd
            grid = new_grid
        weights = _trapezoid_weights(grid)
        bounds.append(bound)
        before = fraction
    return tuple(bounds)


def _trapezoid_weights(grid: np.ndarray) -> np.ndarray:
    h = grid[1] - grid[0]
    weights = np.full(grid.size, h)
    weights[[0, -1]] = h / 2
    return weights


@dataclass(frozen=True)
class SequentialSpeedup(Speedup):
    """A candidate's speedup over the baseline after paired interleaved rounds, judged sequentially.

    ``ratio`` is the geometric mean of the paired ratios (> 1 better); ``ci_low``/``ci_high`` are the repeated
    confidence interval at the latest look (one-sided ``alpha`` each side, valid over every look); ``p_value`` is
    the one-sided paired t-test's nominal p (not adjusted for looks); ``rounds`` paired rounds were judged at the
    ``looks``-th look (the rounds at each in ``looked``), with ``critical`` the t-value the interval used.
    """

    rounds: int = 0
    looks: int = 0
    looked: tuple[int, ...] = ()  # the rounds at each look so far, the latest last: a resumed test goes on from them
    critical: float = 0.0
    alpha: float = FAMILY_ERROR
    decision: str = Decision.OPEN.value  # a Decision's value
    settle_chance: float | None = None  # when open: the chance that the rounds reachable show its gain (FUTILE below)
    reachable: int | None = None  # the rounds that chance was for


def judge(baseline: Sequence[float], config: Sequence[float], maximize: bool, plan: SequentialPlan,
          looked: Sequence[int]) -> SequentialSpeedup:
    """The candidate's sequential verdict at its latest look: ``looked`` holds the rounds at each of its looks so
    far (the latest last); ``baseline[r]`` and ``config[r]`` ran side by side in round r.

    Raises:
        ValueError: fewer than two paired rounds, a non-positive value, or looks not increasing up to the plan's most.
    """
    from scipy import stats

    rounds = min(len(baseline), len(config))
    if rounds < 2 or not looked or looked[-1] != rounds:
        raise ValueError(f"a sequential verdict needs two or more paired rounds, the latest look at them "
                         f"({rounds} rounds, looks {list(looked)})")
    gains = _paired_gains(baseline, config, rounds, maximize)
    most = max(plan.most, rounds)
    critical = _critical(tuple(n / most for n in looked), plan.alpha, rounds - 1)
    mean, se = float(gains.mean()), float(gains.std(ddof=1)) / math.sqrt(rounds)
    low, high = math.exp(mean - critical * se), math.exp(mean + critical * se)
    p_value = float(stats.t.sf(mean / se, rounds - 1)) if se > 0 else float(mean <= 0)
    decision = (Decision.GAIN if low > 1.0 else Decision.WORSE if high < 1.0
                else Decision.OPEN if mean > 0 else Decision.NO_GAIN)
    return SequentialSpeedup(math.exp(mean), low, high, p_value, rounds, rounds, rounds=rounds, looks=len(looked),
                             looked=tuple(looked), critical=critical, alpha=plan.alpha, decision=decision.value)


def stored_verdict(stored: Mapping[str, Any]) -> SequentialSpeedup | None:
    """A verdict as a study stored it (``vars`` of a ``SequentialSpeedup``), or None when it lacks its looks (a
    study of an earlier version): a test cannot go on from a verdict whose looks it does not know."""
    names = {f.name for f in fields(SequentialSpeedup)}
    if not stored.get("looked") or not {f.name for f in fields(Speedup)} <= set(stored):
        return None
    kept: dict[str, Any] = {k: v for k, v in stored.items() if k in names}
    return SequentialSpeedup(**(kept | {"looked": tuple(stored["looked"])}))


def _paired_gains(baseline: Sequence[float], config: Sequence[float], rounds: int, maximize: bool) -> np.ndarray:
    """The log of each of the first ``rounds`` paired ratios, > 0 where the candidate was better.

    Raises:
        ValueError: a non-positive value.
    """
    base, cand = np.asarray(baseline[:rounds], dtype=float), np.asarray(config[:rounds], dtype=float)
    if (base <= 0).any() or (cand <= 0).any():
        raise ValueError("a sequential verdict needs positive values")
    return np.log(cand / base) if maximize else np.log(base / cand)


def settle_chance(baseline: Sequence[float], config: Sequence[float], maximize: bool, plan: SequentialPlan,
                  looked: Sequence[int], reachable: int) -> float:
    """The chance that the candidate is declared a gain by ``reachable`` rounds (its looks so far in ``looked``,
    then the plan's up to ``reachable``, and one at it), were its true gain per round what its paired rounds so far
    show and their spread the same (conditional power under the current trend). Only the last look's bound is
    asked, so the chance is a little low: a rule that gives up below it stops a candidate a little early, never
    declares a gain.

    Raises:
        ValueError: as ``judge``; or ``reachable`` not past the rounds so far.
    """
    from scipy import stats

    rounds = min(len(baseline), len(config))
    if rounds < 2 or reachable <= rounds or not looked or looked[-1] != rounds:
        raise ValueError(f"a chance to settle needs two or more paired rounds, the latest look at them, and rounds "
                         f"left to reach ({rounds} rounds, looks {list(looked)}, reachable {reachable})")
    gains = _paired_gains(baseline, config, rounds, maximize)
    mean, sd = float(gains.mean()), float(gains.std(ddof=1))
    if sd == 0.0:
        return float(mean > 0)
    most = max(plan.most, reachable)
    looks = list(looked) + [n for n in plan.looks() if rounds < n < reachable] + [reachable]
    critical = _critical(tuple(n / most for n in looks), plan.alpha, reachable - 1)
    # the mean over ``reachable`` rounds: the rounds so far, then the rest drawn around ``mean``
    shortfall = mean - critical * sd / math.sqrt(reachable)
    return float(stats.norm.cdf(shortfall * reachable / (sd * math.sqrt(reachable - rounds))))


@lru_cache(maxsize=1024)
def _critical(fractions: tuple[float, ...], alpha: float, freedom: int) -> float:
    """The t-value of the latest look: its z bound's nominal level on the t-distribution with ``freedom``."""
    from scipy import stats

    return float(stats.t.isf(stats.norm.sf(boundaries(fractions, alpha)[-1]), freedom))


def rounds_for(gain: float, noise: float, plan: SequentialPlan, power: float = 0.8) -> int:
    """The rounds of the first look at which a candidate ``gain`` times better than the baseline (1.10) is
    declared a gain with chance ``power``, at a run-to-run ``noise`` (coefficient of variation, 0.05) on each side:
    the noncentral t-distribution at that look's bound (earlier looks' chances not counted); ``plan.most`` when no
    look reaches ``power``."""
    from scipy import stats

    looks = plan.looks()
    if gain <= 1.0:
        return looks[-1]
    effect = math.log(gain) / (math.sqrt(2.0) * math.sqrt(math.log(1.0 + noise * noise)))  # per paired round
    for i, rounds in enumerate(looks):
        critical = _critical(tuple(n / looks[-1] for n in looks[:i + 1]), plan.alpha, rounds - 1)
        if float(stats.nct.sf(critical, rounds - 1, effect * math.sqrt(rounds))) >= power:
            return rounds
    return looks[-1]


class SequentialTest:
    """The looks of one verification as the rounds come in: which candidates are still open, and each one's
    latest verdict. A candidate settled (a gain, or worse) is not looked at again; the caller stops running it."""

    def __init__(self, plan: SequentialPlan, labels: Sequence[str], maximize: bool) -> None:
        self.plan, self.maximize = plan, maximize
        self.looked: dict[str, list[int]] = {label: [] for label in labels}
        self.verdicts: dict[str, SequentialSpeedup] = {}

    def resume(self, label: str, verdict: SequentialSpeedup) -> None:
        """Go on with ``label``'s test from an earlier verification's ``verdict`` (its looks, its decision): the
        looks to come are taken after those, as if the rounds had never stopped."""
        self.looked[label] = list(verdict.looked)
        self.verdicts[label] = verdict

    def open(self) -> list[str]:
        """The candidates whose interval still straddles 1 (or that were not looked at yet), in the given order."""
        return [label for label in self.looked
                if label not in self.verdicts or self.verdicts[label].decision == Decision.OPEN.value]

    def look(self, baseline: Sequence[float], configs: dict[str, Sequence[float]],
             reachable: int | None = None) -> None:
        """Judge each open candidate in ``configs`` (its values so far, round by round beside ``baseline``'s) at the
        rounds it has: a look at a candidate with fewer than two paired rounds, or no new one, is skipped. With
        ``reachable`` (the most rounds still possible: the plan's, or fewer when a time budget holds fewer), one
        left open is given up (FUTILE) when those rounds would show its gain less than ``FUTILE_CHANCE`` of the
        time."""
        for label in self.open():
            values = configs.get(label)
            if values is None:
                continue
            rounds = min(len(baseline), len(values))
            looked = self.looked[label]
            if rounds < 2 or (looked and looked[-1] >= rounds):
                continue
            looked.append(rounds)
            verdict = judge(baseline, values, self.maximize, self.plan, looked)
            if verdict.decision == Decision.OPEN.value and reachable is not None and reachable > rounds:
                chance = settle_chance(baseline, values, self.maximize, self.plan, looked, reachable)
                verdict = replace(verdict, settle_chance=chance, reachable=reachable,
                                  decision=(Decision.FUTILE if chance < FUTILE_CHANCE else Decision.OPEN).value)
            self.verdicts[label] = verdict
