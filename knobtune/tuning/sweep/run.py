"""A sweep run: every point of a plan (``plan``) measured with interleaved repeats, then judged.

Every point runs ``repeats`` times through ``verify.run_interleaved`` (the same
life cycle and failure classification as verification), one round at a time,
round-robin over the points in an order shuffled per round with the seed.
A point is ahead of the default only when it is across all the points
compared (``analysis.sweep.ahead_across``): Holm's step-down over one-sided
rank tests, so a sweep's many points do not find one ahead by chance.
The first round runs the default point first: its time sets the others'
limit (``timeout_factor`` times it), as verification limits a candidate by
the default's time. A point that is refused, crashes or times out is kept
with its reason and never given a number.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import knobtune
from knobtune.analysis import Speedup, noise, speedup
from knobtune.analysis.stats import p_better
from knobtune.analysis.sweep import Judgement, MedianInterval, ahead_across, judge, median_interval, runs_to_tell
from knobtune.errors import KnobtuneError, UsageError
from knobtune.targets import Target
from knobtune.tuning.document import MIN_TIMEOUT_S, relative_limit_s
from knobtune.tuning.proof import Candidate, CandidateRuns, run_interleaved
from knobtune.tuning.sweep.plan import SweepPlan, SweepPoint
from knobtune.workloads import Objective, Rung


@dataclass(frozen=True)
class PointResult:
    """One point's runs: a median with its interval, or the reason it has no number."""

    point: SweepPoint
    values: tuple[float, ...]  # the objective of each finished run
    failure: str | None  # why the point has no number (refused, crash, timeout, ...)
    interval: MedianInterval | None  # None when it failed
    versus_default: Speedup | None  # the point over the default point (> 1: better)
    costs: Mapping[str, float | None]
    p_better: float | None = None  # one-sided p-value that it runs better than the default point (stats.p_better)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep measured: every point's runs and statistics, the best point and the study's value judged."""

    plan: SweepPlan
    objective: Objective
    rung: Rung
    repeats: int
    seed: int
    timeout_s: float | None
    timeout_factor: float
    points: tuple[PointResult, ...]
    judgement: Judgement | None  # keys are point indices
    noise_cv: float  # the default point's relative spread
    facts: Mapping[str, object]  # system, driver, version, workload, settled, memory limit
    ahead: frozenset[int] = frozenset()  # points ahead of the default across all compared (ahead_across)

    @property
    def compared(self) -> int:
        """How many points were compared with the default (measured, as the default point was)."""
        return sum(1 for p in self.points if p.p_better is not None)

    def to_dict(self) -> dict[str, object]:
        """Plain data for the JSON file and the drawing (``report.sweep``)."""
        judgement = self.judgement
        study = self.plan.study_point
        return {
            "kind": "sweep", **self.facts, "objective": self.objective.value, "maximize": self.objective.maximize,
            "unit": self.objective.unit,
            "rung": {"index": self.rung.index, "records": self.rung.records, "operations": self.rung.operations},
            "repeats": self.repeats, "seed": self.seed, "timeout_s": self.timeout_s,
            "timeout_factor": self.timeout_factor, "noise_cv": self.noise_cv,
            "ahead": sorted(self.ahead), "compared": self.compared, "runs_to_tell": runs_to_tell(self.compared),
            "around": dict(self.plan.around) if self.plan.around else None, "base": dict(self.plan.base),
            "axes": [axis.to_dict() for axis in self.plan.axes],
            "points": [_point_dict(p, judgement, self.ahead) for p in self.points],
            "default_point": self.plan.default_point.index,
            "study_point": study.index if study else None,
            "best_point": None if judgement is None else judgement.best,
            "within_noise_of_best": [] if judgement is None else list(judgement.within_noise),
            "study_within_noise": None if judgement is None else judgement.reference_within_noise,
            "study_beaten_by": [p.index for p in self.plan.points if judgement and p.index in judgement.beating],
            "study_compared": None if judgement is None or study is None else judgement.compared,
            "study_versus_best": (_speedup_dict(judgement.versus[study.index])
                                  if judgement and study and study.index in judgement.versus else None),
        }


def _point_dict(result: PointResult, judgement: Judgement | None, ahead: frozenset[int]) -> dict[str, object]:
    point, interval = result.point, result.interval
    versus_best = judgement.versus.get(point.index) if judgement else None
    return {
        "index": point.index, "label": point.label, "values": dict(point.values),
        "shown": dict(point.shown),
        "default": point.is_default, "study": point.is_study, "changed": dict(point.changed),
        "repairs": list(point.repairs), "runs": list(result.values), "failure": result.failure,
        "median": interval.median if interval else None,
        "ci_low": interval.low if interval else None, "ci_high": interval.high if interval else None,
        "versus_default": _speedup_dict(result.versus_default) if result.versus_default else None,
        "p_better": result.p_better, "ahead": point.index in ahead,
        "best_versus_this": _speedup_dict(versus_best) if versus_best else None,
        "costs": dict(result.costs),
    }


def _speedup_dict(s: Speedup) -> dict[str, float | bool]:
    return {"ratio": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high, "p_value": s.p_value,
            "significant": s.significant}


def run_sweep(target: Target, plan: SweepPlan, rung: Rung, *, repeats: int, objective: Objective, seed: int,
              log_dir: Path, timeout_factor: float, min_timeout_s: float = MIN_TIMEOUT_S,
              note: Callable[[str], None] = lambda message: None) -> SweepResult:
    """Measure every point of ``plan`` ``repeats`` times at ``rung``, interleaved; judge the best point.

    Raises:
        KnobtuneError: the point that times the others (the default, else the study's) failed: without its
            time there is no fair limit, and the base config or the machine is at fault.
    """
    for old_round in log_dir.glob("round-*"):  # a re-run measures afresh
        shutil.rmtree(old_round, ignore_errors=True)
    runnable = [p for p in plan.points if p.refused is None]
    clock = next((p for p in (plan.default_point, plan.study_point) if p is not None and p.refused is None), None)
    if clock is None:
        raise UsageError(f"the default point cannot run here ({plan.default_point.refused}). "
                         "Fix: sweep around the default, or another knob")
    records = {p.index: CandidateRuns(Candidate(f"p{p.index} {p.label}", p.changed)) for p in runnable}
    by_label = {runs.candidate.label: index for index, runs in records.items()}
    base_note = (f"the others at study {plan.around['study']}'s result" if plan.around
                 else "the others at their defaults")
    note(f"sweeping {', '.join(a.name for a in plan.axes)}: {len(runnable)} points x {repeats} interleaved runs at "
         f"{rung}, {base_note}" + (f"; {len(plan.points) - len(runnable)} refused before running"
                                   if len(runnable) < len(plan.points) else ""))
    order_rng = random.Random(seed)
    limit_s: float | None = None
    for round_index in range(repeats):
        pending = [p for p in runnable if records[p.index].failure is None]
        order_rng.shuffle(pending)
        batches = [pending]
        if limit_s is None:  # the first round: the clock point alone, untimed, then the rest within its limit
            batches = [[clock], [p for p in pending if p is not clock]]
        for batch in batches:
            if not batch:
                continue
            comparison = run_interleaved(
                target, [(records[p.index].candidate, p.config) for p in batch], rung, repeats=1,
                objective=objective, seed=seed, log_dir=log_dir / f"round-{round_index + 1}", timeout_s=limit_s,
                on_run=lambda _, runs, value: note(_progress(round_index, repeats, runs, value, objective)))
            for runs in comparison.runs:
                _merge(records[by_label[runs.candidate.label]], runs)
            if limit_s is None:
                limit_s = _limit_s(records[clock.index], timeout_factor, min_timeout_s, clock, log_dir)
                which = "default" if clock.is_default else "study"
                note(f"time limit per run: {limit_s:.1f} s ({timeout_factor:g}x the {which} "
                     f"point's {records[clock.index].measurements[0].elapsed_s:.2f} s)")
    return _result(target, plan, records, rung, repeats, objective, seed, limit_s, timeout_factor)


def _progress(round_index: int, repeats: int, runs: CandidateRuns, value: float | None, objective: Objective) -> str:
    label = runs.candidate.label.split(" ", 1)[1]
    shown = objective.show(value) if value is not None else f"failed: {runs.failure}"
    return f"round {round_index + 1}/{repeats} {label}: {shown}"


def _merge(into: CandidateRuns, runs: CandidateRuns) -> None:
    into.values.extend(runs.values)
    into.measurements.extend(runs.measurements)
    if runs.failure is not None:
        into.failure = runs.failure


def _positive(values: Sequence[float]) -> bool:
    """Whether every value can enter a ratio (a time or a throughput of 0 cannot)."""
    return all(v > 0 for v in values)


def _limit_s(clock: CandidateRuns, factor: float, least_s: float, point: SweepPoint, log_dir: Path) -> float:
    if not clock.measurements:
        raise KnobtuneError(f"the {'default' if point.is_default else 'study'} point ({point.label}) failed: "
                            f"{clock.failure}. Fix: check the workload and the base config; raw output in {log_dir}")
    return relative_limit_s(clock.measurements[0].elapsed_s, factor, least_s)


def _result(target: Target, plan: SweepPlan, records: Mapping[int, CandidateRuns], rung: Rung, repeats: int,
            objective: Objective, seed: int, limit_s: float | None, timeout_factor: float) -> SweepResult:
    default = records.get(plan.default_point.index)
    default_values = default.values if default is not None and default.failure is None and _positive(default.values) \
        else []
    results = []
    for point in plan.points:
        runs = records.get(point.index)
        failure = point.refused if runs is None else (None if runs.failure is None else runs.failure.reason)
        values = tuple(runs.values) if runs else ()
        if failure is None and values and not _positive(values):
            failure = f"the run measured {objective.value} = {min(values):g}: not a usable value"
        compared = failure is None and bool(values) and bool(default_values) and not point.is_default
        results.append(PointResult(
            point, values, failure, median_interval(values, seed) if failure is None and values else None,
            speedup(default_values, values, objective.maximize, seed) if compared else None,
            runs.costs() if runs else {},
            p_better(default_values, values, objective.maximize) if compared else None))
    finished: dict[Hashable, tuple[float, ...]] = {r.point.index: r.values for r in results if r.interval is not None}
    study = plan.study_point
    judgement = judge(finished, objective.maximize, study.index if study else None, seed)
    facts = {"knobtune_version": knobtune.__version__, "system": target.catalog.system, "driver": target.driver,
             "system_version": target.version(), "workload": target.workload.name,
             "records": target.workload.records, "settled": target.settle,
             "memory_limit_bytes": target.memory_limit_bytes}
    ahead = ahead_across({r.point.index: r.p_better for r in results if r.p_better is not None})
    return SweepResult(plan, objective, rung, repeats, seed, limit_s, timeout_factor, tuple(results), judgement,
                       noise(default_values), facts, ahead)
