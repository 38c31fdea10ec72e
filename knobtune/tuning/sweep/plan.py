"""Sweep one knob (or a coarse grid of two) and measure every point with interleaved repeats.

The grid comes from the catalog: a numeric knob's range in ``points`` steps
(geometric when the knob is log-scaled, rounded to whole numbers, sizes to
about 2%), each special value the search may use (``-1`` = unlimited) as a
point of its own, every choice of a bool or enum knob; the default and the
base config's value (``--around`` a study) are always on it. The other knobs
stay at the base config: the defaults, or a study's result.

Every point runs ``repeats`` times through ``verify.run_interleaved`` (the same
life cycle and failure classification as verification), one round at a time,
round-robin over the points in an order shuffled per round with the seed.
The first round runs the default point first: its time sets the others'
limit (``timeout_factor`` times it), as verification limits a candidate by
the default's time. A point that is refused, crashes or times out is kept
with its reason and never given a number.
"""

from __future__ import annotations

import itertools
import math
import random
import shutil
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import knobtune
from knobtune.analysis import Speedup, noise, speedup
from knobtune.analysis.sweep import Judgement, MedianInterval, judge, median_interval
from knobtune.errors import ConfigError, KnobtuneError, UsageError
from knobtune.knobs import Catalog, Knob, KnobType, Value
from knobtune.knobs.display import knob_value
from knobtune.targets import Target
from knobtune.systems import spelling_of
from knobtune.tuning.search import meeting_value, mend
from knobtune.tuning.document import MIN_TIMEOUT_S, relative_limit_s
from knobtune.tuning.proof import Candidate, CandidateRuns, run_interleaved
from knobtune.workloads import Objective, Rung

DEFAULT_POINTS = {1: 7, 2: 5}  # grid points per numeric knob when --points is not given
MAX_KNOBS = 2
# grid steps per numeric knob: 50 draw a curve finer than run-to-run noise resolves; more only spends the machine
MAX_POINTS = 50
_SIGNIFICANT_BITS = 5  # sizes are rounded to 5 significant bits: within 1/64 (~1.6%) of the geometric grid


@dataclass(frozen=True)
class Axis:
    """One swept knob: the values it takes, in the order they are drawn, and the values left out with why."""

    knob: Knob
    values: tuple[Value, ...]
    study_value: Value | None = None  # the study's value (--around); None when the base config is the defaults
    left_out: Mapping[str, str] | None = None  # shown value -> why it is not on the grid

    @property
    def name(self) -> str:
        return self.knob.name

    def to_dict(self) -> dict[str, object]:
        knob = self.knob
        return {"knob": knob.name, "type": knob.type.value, "numeric": knob.is_numeric, "log": knob.log,
                "unit": knob.unit, "min": knob.min, "max": knob.max, "values": list(self.values),
                "shown": [knob_value(knob, v) for v in self.values], "default": knob.default,
                "default_shown": knob_value(knob, knob.default), "study_value": self.study_value,
                "study_value_shown": None if self.study_value is None else knob_value(knob, self.study_value),
                "special": [v for v in self.values if v in knob.special],
                "left_out": dict(self.left_out or {})}


def grid_values(knob: Knob, points: int, marked: Iterable[Value] = ()) -> tuple[Value, ...]:
    """The values a sweep of ``knob`` measures: the grid, its special values and the ``marked`` ones.

    A numeric knob gets ``points`` values from min to max, geometric when it is
    log-scaled; a bool or an enum knob gets every choice (``points`` unused).
    Numeric values are sorted; choices keep the catalog's order.
    """
    if knob.type is KnobType.BOOL:
        values: list[Value] = [False, True]
    elif knob.type is KnobType.ENUM:
        values = list(knob.choices)
    else:
        low, high = float(knob.min), float(knob.max)  # type: ignore[arg-type]
        steps = np.geomspace(low, high, points) if knob.log else np.linspace(low, high, points)
        values = [_rounded(knob, float(step)) for step in steps]
        if knob.search_special:
            values += list(knob.special)
    for value in marked:
        if value not in values:
            values.append(value)
    unique = list(dict.fromkeys(values))
    return tuple(sorted(unique)) if knob.is_numeric else tuple(unique)  # type: ignore[type-var]


def _rounded(knob: Knob, value: float) -> Value:
    """A grid step as the knob's type holds it, inside the knob's range."""
    low, high = knob.min, knob.max
    if knob.type is KnobType.INT:
        rounded: Value = int(round(value))
    elif knob.type is KnobType.BYTES:
        quantum = 2 ** max(0, math.floor(math.log2(max(value, 1.0))) - _SIGNIFICANT_BITS)
        rounded = int(round(value / quantum)) * quantum
    else:
        rounded = float(f"{value:.3g}")
    return min(max(rounded, low), high)  # type: ignore[type-var, return-value]


def make_axis(knob: Knob, points: int, *, study_value: Value | None = None, allow_unsafe: bool = False,
              impossible: Sequence[Value] = ()) -> Axis:
    """The axis of one swept knob; unsafe values (unless allowed) and those this machine refuses left out.

    Raises:
        UsageError: the study's value is unsafe without --allow-unsafe or refused on this
            machine, or fewer than two values are left to sweep.
    """
    if study_value is not None and knob.is_unsafe(study_value) and not allow_unsafe:
        raise UsageError(f"the study sets {knob.name}={knob_value(knob, study_value)}, of safety class '{knob.safety}' "
                         f"({knob.safety_note}). Fix: add --allow-unsafe to sweep around it")
    if study_value is not None and study_value in impossible:
        raise UsageError(f"the study sets {knob.name}={knob_value(knob, study_value)}, which this machine refuses. "
                         "Fix: sweep around the default (leave out --around)")
    marked = [knob.default] + ([study_value] if study_value is not None else [])
    kept: list[Value] = []
    left_out: dict[str, str] = {}
    for value in grid_values(knob, points, marked):
        if knob.is_unsafe(value) and not allow_unsafe and value not in marked:
            left_out[knob_value(knob, value)] = f"safety class '{knob.safety}' (--allow-unsafe includes it)"
        elif value in impossible and value not in marked:
            left_out[knob_value(knob, value)] = "this machine refuses it"
        else:
            kept.append(value)
    if len(kept) < 2:
        raise UsageError(f"knob '{knob.name}' has only {', '.join(knob_value(knob, v) for v in kept)} left to sweep"
                         + (f" ({'; '.join(f'{v}: {why}' for v, why in left_out.items())})" if left_out else "")
                         + ". Fix: sweep another knob")
    return Axis(knob, tuple(kept), study_value, left_out)


@dataclass(frozen=True)
class SweepPoint:
    """One point of the grid: the swept knobs' values and the config that runs them."""

    index: int
    values: Mapping[str, Value]  # swept knob -> value
    shown: Mapping[str, str]  # swept knob -> value as a person reads it ("16 MiB")
    changed: Mapping[str, Value]  # the config run, as its knobs that differ from the catalog's defaults
    config: Mapping[str, Value]  # the full config run
    is_default: bool  # the swept knobs at their defaults (the others at the base config)
    is_study: bool  # the swept knobs at the study's values: the study's result itself
    repairs: tuple[str, ...] = ()  # relations the base config's knobs were mended by to make room for the point
    refused: str | None = None  # why the point is not run at all

    @property
    def label(self) -> str:
        """``write_buffer_size=16 MiB`` (two knobs: joined by ", ")."""
        return ", ".join(f"{name}={shown}" for name, shown in self.shown.items())


@dataclass(frozen=True)
class SweepPlan:
    """The grid to measure: its axes, every point, and the base config the other knobs stay at."""

    axes: tuple[Axis, ...]
    points: tuple[SweepPoint, ...]
    base: Mapping[str, Value]  # the base config: the other knobs' changes at every point (a study's result; empty:
    # the defaults)
    around: Mapping[str, object] | None = None  # the study whose result the base config is: name, trial, verified,
    # verdict

    @property
    def default_point(self) -> SweepPoint:
        return next(p for p in self.points if p.is_default)

    @property
    def study_point(self) -> SweepPoint | None:
        return next((p for p in self.points if p.is_study), None) if self.around else None


def plan_sweep(catalog: Catalog, knobs: Sequence[str], *, points: int | None = None,
               base: Mapping[str, Value] | None = None, around: Mapping[str, object] | None = None,
               allow_unsafe: bool = False, impossible: Mapping[str, Sequence[Value]] | None = None,
               driver: str | None = None) -> SweepPlan:
    """Every point of the grid over ``knobs``, the other knobs at ``base`` (changed knobs; None: the defaults).

    ``around`` describes the study ``base`` comes from; its values of the swept
    knobs are then marked and always on the grid. ``impossible`` holds values
    the target says this machine refuses (left out, like unsafe values).
    A point whose values break a relation or an implication with the base
    config's knobs is mended by moving those knobs (recorded on the point), never a
    swept one: when only a swept knob could give way, the point is refused.

    Raises:
        UsageError: no knob, more than two, one twice, one ``driver`` cannot set, one unsafe as a whole or
            a base value that is unsafe (without ``allow_unsafe``) or refused here, or a swept knob that
            matters at no point.
        ConfigError: an unknown knob (naming close matches).
    """
    if not 1 <= len(knobs) <= MAX_KNOBS:
        raise UsageError(f"sweep takes one or two --knob, not {len(knobs)}. "
                         "Fix: sweep one knob, or two for a grid (e.g. --knob write_buffer_size --knob block_size)")
    if len(set(knobs)) < len(knobs):
        raise UsageError(f"--knob {knobs[0]} is given twice. Fix: name two different knobs for a grid")
    for name in knobs:
        _check_sweepable(catalog[name], allow_unsafe, driver, catalog.system)
    full = catalog.config(base or {})
    elsewhere = catalog.needs_other_driver(full, driver) if driver is not None else {}
    if elsewhere:
        sets = ", ".join(f"{k} (driver {' or '.join(d)})" for k, d in elsewhere.items())
        raise UsageError(f"the base config sets {sets}, which driver {driver} cannot set. "
                         f"Fix: add --driver {next(iter(elsewhere.values()))[0]}")
    unsafe = {k: v for k, v in catalog.unsafe_in(full).items() if k not in knobs}
    if unsafe and not allow_unsafe:
        base_unsafe = ", ".join(f"{k}={full[k]} ({v})" for k, v in unsafe.items())
        raise UsageError(f"the base config sets unsafe values: {base_unsafe}. "
                         "Fix: add --allow-unsafe to sweep around it")
    steps = points or DEFAULT_POINTS[len(knobs)]
    axes = [make_axis(catalog[name], steps, study_value=full[name] if around else None, allow_unsafe=allow_unsafe,
                      impossible=(impossible or {}).get(name, ())) for name in knobs]
    grid = []
    for index, combo in enumerate(itertools.product(*(axis.values for axis in axes))):
        values = {axis.name: value for axis, value in zip(axes, combo)}
        shown = {axis.name: knob_value(axis.knob, value) for axis, value in zip(axes, combo)}
        is_default = all(values[a.name] == a.knob.default for a in axes)
        is_study = around is not None and all(values[a.name] == a.study_value for a in axes)
        config, repairs, refused = _point_config(catalog, axes, {**full, **values})
        grid.append(SweepPoint(index, values, shown, catalog.changed(config), config, is_default, is_study,
                               tuple(repairs), refused))
    for axis in axes:
        if not any(axis.knob.applies(p.config) for p in grid):
            conditions = " and ".join(f"{c.knob} is one of {list(c.values)}" for c in axis.knob.conditions)
            raise UsageError(f"knob '{axis.name}' matters only when {conditions}, which the base config never has. "
                             f"Fix: sweep {axis.knob.conditions[0].knob} with it (a second --knob), or --around a "
                             "study whose result sets it")
    others = {k: v for k, v in catalog.changed(full).items() if k not in knobs}
    return SweepPlan(tuple(axes), tuple(grid), others, around)


def _check_sweepable(knob: Knob, allow_unsafe: bool, driver: str | None, system: str) -> None:
    """Like ``tune --knobs``: a knob the driver cannot set, or whose every other value is unsafe, is refused.

    Raises:
        UsageError: naming the knob and the fix.
    """
    if driver is not None and not knob.supports(spelling_of(system, driver)):
        raise UsageError(f"knob '{knob.name}' cannot be set through driver {driver}. Fix: sweep another knob, "
                         "or choose another --driver")
    if driver is not None and not knob.settable_by(driver):
        raise UsageError(f"knob '{knob.name}' can be set only by driver {' or '.join(knob.drivers)}, not {driver}. "
                         f"Fix: add --driver {knob.drivers[0]}")
    wholly_unsafe = knob.unsafe_values is None or knob.type is KnobType.BOOL
    if knob.safety.excluded_by_default and wholly_unsafe and not allow_unsafe:
        raise UsageError(f"knob '{knob.name}' is of safety class '{knob.safety}' ({knob.safety_note}). "
                         "Fix: add --allow-unsafe to sweep it")


def _point_config(catalog: Catalog, axes: Sequence[Axis], config: dict[str, Value]
                  ) -> tuple[dict[str, Value], list[str], str | None]:
    """The config a point runs, the repairs made to the base config's knobs, and why it is refused (None: it runs).

    Where a swept knob does not apply (its condition fails), its values all run the same config: only
    its default is run, the other values are refused as the same config.
    """
    for axis in axes:
        if not axis.knob.applies(config) and config[axis.name] != axis.knob.default:
            conditions = ", ".join(f"{c.knob}={config.get(c.knob)}" for c in axis.knob.conditions)
            return config, [], f"{axis.name} does not apply under {conditions}: the same config as its default"
    swept = {axis.name: config[axis.name] for axis in axes}
    room = _make_room(catalog, config, set(swept))
    mended, repairs = mend(catalog, dict(config))
    repairs = room + repairs
    moved = [name for name, value in swept.items() if mended[name] != value]
    if moved:
        broken = [str(r) for r in catalog.relations if not r.holds(config)]
        broken += [str(i) for i in catalog.implications
                   if i.applies(config) and any(config[k] != v for k, v in i.then.items())]
        return config, repairs, f"refused: the point breaks {'; '.join(broken)}"
    try:
        return catalog.config(catalog.changed(mended)), repairs, None
    except ConfigError as exc:
        return mended, repairs, f"refused: {exc}"


def _make_room(catalog: Catalog, config: dict[str, Value], swept: set[str]) -> list[str]:
    """Mend each relation a swept value breaks by moving the unswept side to meet it (``space.mend`` would
    move the left side, which may be the swept one). A moved knob then stays where it was put, so a
    chain (stop >= slowdown >= trigger) gives way away from the swept knob; what cannot move is left for
    ``mend`` and the caller's check."""
    repairs: list[str] = []
    pinned = set(swept)
    for _ in range(len(catalog.relations) + 1):
        moved = False
        for relation in catalog.relations:
            if relation.holds(config) or (relation.left in pinned) == (relation.right in pinned):
                continue
            if relation.left in pinned:
                fixed, other = relation.left, relation.right
            else:
                fixed, other = relation.right, relation.left
            knob, value = catalog.knobs[other], meeting_value(catalog, relation, config, other)
            if not (knob.min is None or knob.min <= value) or not (knob.max is None or value <= knob.max):
                continue
            repairs.append(f"{relation} broken by {fixed}={config[fixed]}: set {other}={value} (was {config[other]})")
            config[other] = value
            pinned.add(other)
            moved = True
        if not moved:
            break
    return repairs


@dataclass(frozen=True)
class PointResult:
    """One point's runs: a median with its interval, or the reason it has no number."""

    point: SweepPoint
    values: tuple[float, ...]  # the objective of each finished run
    failure: str | None  # why the point has no number (refused, crash, timeout, ...)
    interval: MedianInterval | None  # None when it failed
    versus_default: Speedup | None  # the point over the default point (> 1: better)
    costs: Mapping[str, float | None]


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
            "around": dict(self.plan.around) if self.plan.around else None, "base": dict(self.plan.base),
            "axes": [axis.to_dict() for axis in self.plan.axes],
            "points": [_point_dict(p, judgement) for p in self.points],
            "default_point": self.plan.default_point.index,
            "study_point": study.index if study else None,
            "best_point": None if judgement is None else judgement.best,
            "within_noise_of_best": [] if judgement is None else list(judgement.within_noise),
            "study_within_noise": None if judgement is None else judgement.reference_within_noise,
            "study_versus_best": (_speedup_dict(judgement.versus[study.index])
                                  if judgement and study and study.index in judgement.versus else None),
        }


def _point_dict(result: PointResult, judgement: Judgement | None) -> dict[str, object]:
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
        measured = failure is None and bool(values)
        results.append(PointResult(
            point, values, failure, median_interval(values, seed) if measured else None,
            speedup(default_values, values, objective.maximize, seed)
            if measured and default_values and not point.is_default else None,
            runs.costs() if runs else {}))
    finished: dict[Hashable, tuple[float, ...]] = {r.point.index: r.values for r in results if r.interval is not None}
    study = plan.study_point
    judgement = judge(finished, objective.maximize, study.index if study else None, seed)
    facts = {"knobtune_version": knobtune.__version__, "system": target.catalog.system, "driver": target.driver,
             "system_version": target.version(), "workload": target.workload.name,
             "records": target.workload.records, "settled": target.settle,
             "memory_limit_bytes": target.memory_limit_bytes}
    return SweepResult(plan, objective, rung, repeats, seed, limit_s, timeout_factor, tuple(results), judgement,
                       noise(default_values), facts)
