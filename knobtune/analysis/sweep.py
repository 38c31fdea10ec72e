"""Statistics of a sweep: each point's median with a 95% interval, the best point, and what lies within its noise.

Pure functions over plain numbers (a point is a key and its repeated values);
nothing here runs or stores anything. The interval of a median is a
percentile bootstrap, as the speedups of ``analysis.stats`` are; "within the
noise" is the same test that verification uses: the best point is not
significantly better (``Speedup.significant``: the bootstrap interval of the
ratio of medians lies wholly above 1). Which points are ahead of a reference
(the default) is decided across all of them at once (``ahead_across``): each
point's own 95% interval errs one time in 20, so a sweep of many points would
find one ahead by chance.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from knobtune.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE, Speedup, p_better, speedup

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class MedianInterval:
    """The median of repeated runs and its 95% bootstrap interval (None with fewer than two runs)."""

    median: float
    low: float | None
    high: float | None
    runs: int


def median_interval(values: Sequence[float], seed: int = 0) -> MedianInterval:
    """The median of ``values`` with a percentile-bootstrap 95% interval.

    With two or three runs the interval is about their range: honest, and wide.

    Raises:
        ValueError: ``values`` is empty.
    """
    sample = np.asarray(values, dtype=float)
    if sample.size == 0:
        raise ValueError("a median needs at least one value")
    median = float(np.median(sample))
    if sample.size < 2:
        return MedianInterval(median, None, None, 1)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(sample, size=(BOOTSTRAP_RESAMPLES, sample.size)), axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return MedianInterval(median, float(low), float(high), int(sample.size))


@dataclass(frozen=True)
class Judgement:
    """The best point of a sweep and the points it does not beat beyond the noise.

    ``versus[key]`` is the best point's speedup over ``key`` (> 1: the best is
    better); a point is within the noise of the best when that speedup is not
    significant. ``reference`` is a point to judge (a study's value), or None;
    ``beating`` the points ahead of it across all the points compared with it
    (``ahead_across``), and ``compared`` how many those were.
    """

    best: Hashable
    within_noise: tuple[Hashable, ...]  # other points the best does not beat significantly, in the given order
    versus: Mapping[Hashable, Speedup]
    reference: Hashable | None = None
    beating: frozenset[Hashable] = frozenset()
    compared: int = 0

    @property
    def reference_within_noise(self) -> bool | None:
        """Whether no point is ahead of the reference across all the points compared with it (None: no reference,
        or it was not measured)."""
        if self.reference is None:
            return None
        if self.reference == self.best:
            return True
        if self.reference not in self.versus:
            return None
        return not self.beating


def judge(points: Mapping[Hashable, Sequence[float]], maximize: bool, reference: Hashable | None = None,
          seed: int = 0) -> Judgement | None:
    """The point with the best median, which of the others lie within its noise, and (with a ``reference``) which
    are ahead of the reference across all the others; None when none was measured.

    ``points`` holds only measured points (failed ones left out); ties go to
    the first in order.
    """
    measured = {key: values for key, values in points.items() if len(values) > 0}
    if not measured:
        return None
    medians = {key: float(np.median(values)) for key, values in measured.items()}
    best = (max if maximize else min)(medians, key=lambda key: medians[key])
    versus = {key: speedup(values, measured[best], maximize, seed) for key, values in measured.items() if key != best}
    within = tuple(key for key, s in versus.items() if not s.significant)
    if reference not in measured:
        return Judgement(best, within, versus, reference)
    others = {key: p_better(measured[reference], values, maximize) for key, values in measured.items()
              if key != reference}
    return Judgement(best, within, versus, reference, ahead_across(others), len(others))


def ahead_across(p_values: Mapping[K, float], alpha: float = 1 - CONFIDENCE) -> frozenset[K]:
    """The points ahead of the reference with a family-wise error rate of ``alpha`` across all of them: Holm's
    step-down over their one-sided p-values (``stats.p_better``). The smallest p-value is held to alpha / m, the
    next to alpha / (m - 1), and so on until one fails."""
    ahead = []
    for rank, (key, p) in enumerate(sorted(p_values.items(), key=lambda item: item[1])):
        if p > alpha / (len(p_values) - rank):
            break
        ahead.append(key)
    return frozenset(ahead)


def runs_to_tell(compared: int, alpha: float = 1 - CONFIDENCE) -> int:
    """The fewest runs a side (as many for the point as for the reference) at which one of ``compared`` points can
    be told ahead at all (``ahead_across``): the U test's smallest one-sided p-value, 1 / C(2n, n), within
    alpha / compared."""
    n = 2
    while 1 / math.comb(2 * n, n) > alpha / max(compared, 1):
        n += 1
    return n
