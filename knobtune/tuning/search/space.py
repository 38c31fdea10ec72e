"""From a knob catalog to Optuna suggestions, define-by-run.

- A knob with special values (``-1`` = unlimited) is a categorical choice
  ``<knob>.special`` between ``value`` and each special value, plus the numeric
  knob when ``value`` is chosen.
- A conditional knob is suggested only when its condition holds.
- Unsafe values (durability, data-loss, recovery) are left out unless allowed.
- Knobs only other drivers can set (the catalog's ``drivers``) are left out, and
  ``SearchSpace.driver_note`` says which driver would search them.
- Implications (vector memtables need concurrent writes off) and relations
  (stop >= slowdown) are mended once, explicitly, never by rejection.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import cast

import optuna

from knobtune.errors import UsageError
from knobtune.knobs import Catalog, Knob, KnobType, Relation, Safety, Value, as_number
from knobtune.units import human_bytes
from knobtune.systems import spelling_of

SPECIAL_SUFFIX = ".special"
VALUE_CHOICE = "value"


@dataclass(frozen=True)
class SearchSpace:
    """Which knobs a study searches, and what it keeps out and why."""

    catalog: Catalog
    knobs: tuple[str, ...]
    allow_unsafe: bool
    left_out: Mapping[str, Safety]  # knob -> class kept out (its unsafe values or the whole knob)
    allow_operational: bool = False  # operational values searched, the other unsafe classes not
    impossible: Mapping[str, tuple[Value, ...]] = field(default_factory=dict)  # values this machine refuses
    driver: str | None = None  # the driver the space is for (None: any)
    other_drivers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # knob -> the drivers that can set it
    ceilings: Mapping[str, float] = field(default_factory=dict)  # knob -> the highest value searched (a memory plan)
    planned_limit: int | None = None  # a sampled config planning more memory is scaled down to it (``fit_memory``)

    def excluding(self, impossible: Mapping[str, tuple[Value, ...]]) -> SearchSpace:
        """The same space without values the system cannot take on this machine (a target says which)."""
        known = {name: tuple(values) for name, values in impossible.items() if name in self.knobs}
        return replace(self, impossible={**self.impossible, **known})

    def capped_under(self, limit_bytes: int | None) -> SearchSpace:
        """The same space capped at a planned memory of ``limit_bytes``: each numeric knob of the catalog's memory
        plan is searched only up to the value that fits the limit with the other knobs of the plan at their least
        (so no config that fits is out of reach), and a sampled config whose knobs together plan more is scaled
        down to fit (``fit_memory``): a limit narrows the search instead of refusing most of its proposals."""
        if limit_bytes is None:
            return self
        least = self.catalog.defaults()
        for name in self.catalog.memory.knobs():
            knob = self.catalog.knobs[name]
            if knob.is_numeric and knob.min is not None and name in self.knobs:
                least[name] = knob.min
        ceilings = {}
        for name in self.knobs:
            knob = self.catalog.knobs[name]
            if knob.is_numeric and knob.max is not None \
                    and (top := self.catalog.memory.ceiling(name, least, limit_bytes)) is not None \
                    and top < knob.max:
                ceilings[name] = top
        return replace(self, ceilings=ceilings, planned_limit=limit_bytes)

    def driver_note(self) -> str | None:
        """One line naming the knobs left out because this driver cannot set them and how to search them; or None."""
        if not self.other_drivers:
            return None
        needed = sorted({d for drivers in self.other_drivers.values() for d in drivers})
        return (f"not searched, driver {self.driver} cannot set them (they keep their defaults): "
                f"{', '.join(self.other_drivers)}; add --driver {' or '.join(needed)} to search them")

    def suggest(self, trial: optuna.Trial, focus: Mapping[str, tuple[float, float]] | None = None,
                capped: bool = False) -> tuple[dict[str, Value], list[str]]:
        """A full config for ``trial`` and the repairs applied to it. With a ``focus`` (knob -> narrowed range,
        ``tuning.search.guide``) a numeric knob it names is searched within that range, every other knob over its own.
        ``capped`` (a sampled config): under the memory plan's ceilings, and scaled down to ``planned_limit`` when
        its knobs together plan more (a known config is run as it is, or refused)."""
        config = self.catalog.defaults()
        for name in self.knobs:
            knob = self.catalog.knobs[name]
            if knob.applies(config):
                config[name] = _suggest_knob(trial, knob, self._choices(knob), self._bounds(knob, focus, capped))
        config, repairs = mend(self.catalog, config)
        if capped and self.planned_limit is not None and (fitted := fit_to_plan(
                self.catalog, config, list(self.knobs), self.planned_limit)):
            config, after = mend(self.catalog, config)  # smaller buffers may break a relation (hash buckets)
            repairs += [fitted, *after]
        return config, repairs

    def _bounds(self, knob: Knob, focus: Mapping[str, tuple[float, float]] | None,
                capped: bool) -> tuple[float, float] | None:
        """A numeric knob's range: the focus's narrowed one or the catalog's, under its ceiling when ``capped``
        (None: the catalog's)."""
        bounds = focus.get(knob.name) if focus else None
        ceiling = self.ceilings.get(knob.name) if capped else None
        if ceiling is None:
            return bounds
        low, high = bounds if bounds is not None else knob.bounds
        return low, max(min(high, ceiling), low)

    def param_names(self) -> list[str]:
        """Every Optuna param ``suggest`` may ask for, in a stable order."""
        names = []
        for name in self.knobs:
            knob = self.catalog.knobs[name]
            if knob.special and knob.search_special and self._choices(knob) is None:
                names.append(name + SPECIAL_SUFFIX)
            names.append(name)
        return names

    def deciding_knobs(self) -> list[str]:
        """The searched knobs whose choice decides whether another searched knob applies (a catalog's
        ``conditions`` name them): the choices a basin of the search is made of (``basins``)."""
        named = {c.knob for name in self.knobs for c in self.catalog.knobs[name].conditions}
        return [name for name in self.knobs if name in named]

    def params_of(self, config: Mapping[str, Value]) -> dict[str, object]:
        """The Optuna params that make ``suggest`` return ``config`` (to enqueue the default)."""
        params: dict[str, object] = {}
        for name in self.knobs:
            knob = self.catalog.knobs[name]
            choices = self._choices(knob)
            if not knob.applies(config) or (choices is not None and len(choices) < 2):
                continue
            value = config[name]
            if knob.special and knob.search_special:
                params[name + SPECIAL_SUFFIX] = str(value) if value in knob.special else VALUE_CHOICE
                if value in knob.special:
                    continue
            params[name] = value
        return params

    def within(self, config: Mapping[str, Value]) -> dict[str, Value]:
        """``config`` with every value this space keeps out (unsafe unless allowed, refused on this machine)
        set back to its default: a config from elsewhere made fit to be tried here."""
        fitted = dict(config)
        for name, value in config.items():
            knob = self.catalog.knobs[name]
            kept_out = knob.is_unsafe(value) and not allows(knob.safety, self.allow_unsafe, self.allow_operational)
            if kept_out or value in self.impossible.get(name, ()):
                fitted[name] = knob.default
        return fitted

    def _choices(self, knob: Knob) -> list[Value] | None:
        """Allowed values of a bool/enum knob (unsafe ones removed unless allowed); None for numeric."""
        if knob.type is KnobType.BOOL:
            values: list[Value] = [False, True]
        elif knob.type is KnobType.ENUM:
            values = list(knob.choices)
        else:
            return None
        if not allows(knob.safety, self.allow_unsafe, self.allow_operational):
            values = [v for v in values if not knob.is_unsafe(v)]
        return [v for v in values if v not in self.impossible.get(knob.name, ())]


def allows(safety: Safety, allow_unsafe: bool, allow_operational: bool) -> bool:
    """Whether a knob of class ``safety`` is searched: safe ones always, operational ones with either flag."""
    return (not safety.excluded_by_default or allow_unsafe
            or (allow_operational and safety is Safety.OPERATIONAL))


def build_space(catalog: Catalog, knobs: Iterable[str] | None = None, allow_unsafe: bool = False,
                driver: str | None = None, allow_operational: bool = False) -> SearchSpace:
    """The search space over ``knobs`` (every tunable knob ``driver`` can set when None).

    Knobs of an unsafe class are left out (their unsafe values, when the rest of the knob is safe) unless
    ``allow_unsafe``; ``allow_operational`` lets in the operational class alone (auto-compaction off).

    ``driver`` is the driver's name: a knob whose ``names`` entry for a format of that name is empty, or whose
    ``drivers`` does not list it, is left out (``other_drivers`` keeps the latter for ``driver_note``).

    Raises:
        UsageError: a named knob is unknown, cannot be set through ``driver``, or is unsafe as a
            whole and --allow-unsafe is missing.
    """
    named = list(knobs) if knobs is not None else None
    for name in named or ():
        catalog[name]  # raises ConfigError naming close matches
    left_out: dict[str, Safety] = {}
    other_drivers: dict[str, tuple[str, ...]] = {}
    chosen: list[str] = []
    for name, knob in catalog.knobs.items():
        if named is not None and name not in named:
            continue
        if named is None and not knob.tunable:
            continue
        if driver is not None and not knob.supports(spelling_of(catalog.system, driver)):
            if named is not None:
                raise UsageError(f"knob '{name}' cannot be set through driver {driver}. Fix: leave it out of --knobs")
            continue
        if driver is not None and not knob.settable_by(driver):
            if named is not None:
                raise UsageError(f"knob '{name}' can be set only through driver {' or '.join(knob.drivers)}, not "
                                 f"{driver}. Fix: add --driver {knob.drivers[0]}, or leave it out of --knobs")
            other_drivers[name] = knob.drivers
            continue
        if not allows(knob.safety, allow_unsafe, allow_operational):
            left_out[name] = knob.safety
            wholly_unsafe = knob.unsafe_values is None or knob.type not in (KnobType.BOOL, KnobType.ENUM)
            if wholly_unsafe or knob.type is KnobType.BOOL:  # a bool's only other value is the unsafe one
                if named is not None:
                    raise UsageError(f"knob '{name}' is of safety class '{knob.safety}' ({knob.safety_note}). "
                                     f"Fix: add {opt_in_flag(knob.safety)} to search it, or leave it out of --knobs")
                continue
        chosen.append(name)
    if not chosen:
        raise UsageError("no knob left to search. Fix: name tunable knobs with --knobs")
    return SearchSpace(catalog, tuple(_parents_first(catalog, chosen)), allow_unsafe, left_out,
                       allow_operational=allow_operational, driver=driver, other_drivers=other_drivers)


def opt_in_flag(safety: Safety) -> str:
    """The narrowest flag that lets knobs of class ``safety`` into the search."""
    return "--allow-operational" if safety is Safety.OPERATIONAL else "--allow-unsafe"


def left_out_line(left_out: Mapping[str, Safety | str], catalog: Catalog | None = None) -> str:
    """One line naming what the search keeps out and the flags that let it in: a whole knob by its name, the unsafe
    values of a knob whose other values are searched as ``knob=value`` (``compaction_style=fifo``)."""
    # the narrow flag first (a study stores str)
    flags = " or ".join(sorted({opt_in_flag(Safety(s)) for s in left_out.values()}))
    return ("kept out of the search (would trade durability or data, or never settle; " + flags + " to include): "
            + ", ".join(f"{kept_out_label(k, catalog)} ({Safety(v).value})" for k, v in left_out.items()))


def kept_out_label(name: str, catalog: Catalog | None) -> str:
    """What the search keeps out of knob ``name``: the knob (all of it), or ``knob=value`` when only its unsafe
    values are kept out (``compaction_style=fifo``)."""
    knob = catalog.knobs.get(name) if catalog is not None else None
    if knob is None or knob.unsafe_values is None or knob.type is not KnobType.ENUM:
        return name
    return f"{name}={'/'.join(map(str, knob.unsafe_values))}"


def mend(catalog: Catalog, config: dict[str, Value]) -> tuple[dict[str, Value], list[str]]:
    """Apply the catalog's implications, then mend broken relations by raising the left side
    (or lowering the right one) to meet the other. Returns the config and what was changed."""
    repairs: list[str] = []
    for implication in catalog.implications:
        if implication.applies(config) and any(config[k] != v for k, v in implication.then.items()):
            config.update(implication.then)
            repairs.append(str(implication))
    for relation in catalog.relations:
        if relation.holds(config):
            continue
        left = catalog.knobs[relation.left]
        before = f"{relation.left}={config[relation.left]}, {relation.right}={config[relation.right]}"
        target = meeting_value(catalog, relation, config, relation.left)
        if left.min is not None and left.max is not None and left.min <= target <= left.max:
            config[relation.left] = target
        else:
            config[relation.right] = meeting_value(catalog, relation, config, relation.right)
        repairs.append(f"{relation} broken ({before}): set {relation.left}={config[relation.left]}, "
                       f"{relation.right}={config[relation.right]}")
    return config, repairs


def fit_to_plan(catalog: Catalog, config: dict[str, Value], searched: Iterable[str], limit_bytes: int) -> str | None:
    """Scale the searched byte-sized knobs of the memory plan down by one factor (never below their least) until
    ``config``'s plan is within ``limit_bytes``; what was done, or None when it already fit."""
    before = catalog.memory.planned_bytes(config)
    if before <= limit_bytes:
        return None
    sized = [n for n in searched if n in catalog.memory.knobs() and catalog.knobs[n].type is KnobType.BYTES
             and config[n] not in catalog.knobs[n].special]
    original = {n: config[n] for n in sized}

    def scaled(factor: float) -> dict[str, Value]:
        return {**config, **{n: max(int(as_number(v) * factor), int(catalog.knobs[n].min or 0))
                             for n, v in original.items()}}

    low, high = 0.0, 1.0  # the plan falls as the factor does: find the largest factor that fits
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if catalog.memory.planned_bytes(scaled(middle)) <= limit_bytes else (low, middle)
    config.update(scaled(low))
    return (f"planned memory {human_bytes(before)} over the limit {human_bytes(limit_bytes)}: "
            f"{', '.join(sized)} scaled by {low:.2f} (plan {human_bytes(catalog.memory.planned_bytes(config))})")


def meeting_value(catalog: Catalog, relation: Relation, config: Mapping[str, Value], move: str) -> float:
    """The value knob ``move`` (either side of ``relation``) takes to meet the other side, the other held."""
    if move == relation.left:
        return _on_the_safe_side(catalog.knobs[move], relation.bound(config), relation.op)
    flipped = "<=" if relation.op == ">=" else ">="
    return _on_the_safe_side(catalog.knobs[move], as_number(config[relation.left]) / relation.factor, flipped)


def _on_the_safe_side(knob: Knob, value: float, op: str) -> float:
    """``value`` in ``knob``'s type, rounded so that ``knob op value`` still holds (down for <=, up for >=)."""
    if knob.type is KnobType.FLOAT:
        return value
    return int(math.floor(value) if op == "<=" else math.ceil(value))


def config_hash(changed: Mapping[str, Value]) -> str:
    """A stable short hash of the changed knobs: equal configs, equal hashes."""
    text = json.dumps({k: changed[k] for k in sorted(changed)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _suggest_knob(trial: optuna.Trial, knob: Knob, choices: list[Value] | None,
                  bounds: tuple[float, float] | None = None) -> Value:
    if choices is not None:
        if len(choices) == 1:
            return choices[0]
        return cast(Value, trial.suggest_categorical(knob.name, choices))  # no choice is None
    if knob.special and knob.search_special:
        options = [VALUE_CHOICE] + [str(v) for v in knob.special]
        mode = trial.suggest_categorical(knob.name + SPECIAL_SUFFIX, options)
        if mode != VALUE_CHOICE:
            return next(v for v in knob.special if str(v) == mode)
    low, high = bounds if bounds is not None else knob.bounds
    if knob.type in (KnobType.FLOAT, KnobType.DURATION):
        return trial.suggest_float(knob.name, float(low), float(high), log=knob.log)
    return trial.suggest_int(knob.name, math.ceil(low), math.floor(high), log=knob.log)


def _parents_first(catalog: Catalog, names: list[str]) -> list[str]:
    """Order knobs so a knob comes after every knob its conditions name."""
    ordered: list[str] = []

    def visit(name: str, seen: tuple[str, ...] = ()) -> None:
        if name in ordered or name in seen:
            return
        for condition in catalog.knobs[name].conditions:
            if condition.knob in names:
                visit(condition.knob, seen + (name,))
        ordered.append(name)

    for name in names:
        visit(name)
    return ordered
