"""The grid of a sweep: one knob (or a coarse grid of two) and the config at every point.

The grid comes from the catalog: a numeric knob's range in ``points`` steps
(geometric when the knob is log-scaled, rounded to whole numbers, sizes to
about 2%), each special value the search may use (``-1`` = unlimited) as a
point of its own, every choice of a bool or enum knob; the default and the
base config's value (``--around`` a study) are always on it. The other knobs
stay at the base config: the defaults, or a study's result. ``run`` measures
the points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from knobtune.errors import ConfigError, UsageError
from knobtune.knobs import Catalog, Knob, KnobType, Value
from knobtune.knobs.display import knob_value
from knobtune.systems import spelling_of
from knobtune.tuning.search import meeting_value, mend

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
