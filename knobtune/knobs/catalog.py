"""Knob catalogs: one TOML data file per system, validated on load.

A catalog says, for every knob: its type and range, the system's default,
log scale, special values (``-1`` = unlimited), unit, whether a restart is
needed, its safety class, the conditions under which it matters, and how each
output format spells its name and values. ``docs/catalog-format.md`` is the
reference for the file format.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, ConfigError
from knobtune.knobs.units import human_bytes, parse_bytes, parse_duration_s

CATALOG_DIR = Path(__file__).parent / "catalogs"
Value = int | float | bool | str


class KnobType(enum.StrEnum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    ENUM = "enum"
    BYTES = "bytes"
    DURATION = "duration"


class Safety(enum.StrEnum):
    """What a knob's unsafe values cost. Only ``SAFE`` knobs are searched by default (``--allow-unsafe`` adds the rest).

    ``OPERATIONAL`` values lose nothing but leave work undone for ever (auto-compaction off): the store
    never settles by itself, so a speedup measured with them is not one a user keeps.
    """

    SAFE = "safe"
    DURABILITY = "durability"  # acknowledged writes may be lost on a crash
    DATA_LOSS = "data-loss"  # data is dropped by design (FIFO compaction, TTL)
    RECOVERY = "recovery"  # crash recovery may take far longer
    OPERATIONAL = "operational"  # nothing lost, but space or read cost grows without bound

    @property
    def excluded_by_default(self) -> bool:
        return self is not Safety.SAFE


# Knob names that touch durability or data retention must say what they risk.
_NEEDS_SAFETY = re.compile(r"wal|sync|fsync|fifo|ttl|auto_compaction|full_page|paranoid|reuse_logs")
_NUMERIC = (KnobType.INT, KnobType.FLOAT, KnobType.BYTES, KnobType.DURATION)
_KNOWN_FIELDS = {
    "type", "default", "min", "max", "log", "choices", "special", "unit", "restart",
    "safety", "unsafe_values", "safety_note", "conditions", "group", "description",
    "names", "spell", "tunable", "search_special", "drivers", "data_sized", "data_sized_min",
}


@dataclass(frozen=True)
class Condition:
    """The knob matters only while ``knob`` holds one of ``values``."""

    knob: str
    values: tuple[Value, ...]

    def holds(self, config: Mapping[str, Value]) -> bool:
        return config.get(self.knob) in self.values

    def __str__(self) -> str:
        return f"{self.knob} in {list(self.values)}"


def all_hold(conditions: tuple[Condition, ...], config: Mapping[str, Value]) -> bool:
    return all(c.holds(config) for c in conditions)


@dataclass(frozen=True)
class Relation:
    """``left op factor x right`` must hold between two knobs while ``when`` holds, e.g. stop >= slowdown."""

    left: str
    op: str  # ">=" or "<="
    right: str
    factor: float = 1.0
    when: tuple[Condition, ...] = ()

    def applies(self, config: Mapping[str, Value]) -> bool:
        return all_hold(self.when, config)

    def bound(self, config: Mapping[str, Value]) -> float:
        """What the left side is compared with: ``factor`` x the right side."""
        return self.factor * config[self.right]  # type: ignore[operator]

    def holds(self, config: Mapping[str, Value]) -> bool:
        if not self.applies(config):
            return True
        left, bound = config[self.left], self.bound(config)
        return left >= bound if self.op == ">=" else left <= bound  # type: ignore[operator]

    def __str__(self) -> str:
        right = self.right if self.factor == 1 else f"{self.factor:g} x {self.right}"
        when = f" when {' and '.join(map(str, self.when))}" if self.when else ""
        return f"{self.left} {self.op} {right}{when}"


@dataclass(frozen=True)
class Implication:
    """When every condition holds, the system requires the knobs in ``then`` to hold those values."""

    when: tuple[Condition, ...]
    then: Mapping[str, Value]

    def applies(self, config: Mapping[str, Value]) -> bool:
        return all_hold(self.when, config)

    def __str__(self) -> str:
        return f"{' and '.join(map(str, self.when))} requires " + ", ".join(f"{k}={v}" for k, v in self.then.items())


@dataclass(frozen=True)
class Knob:
    name: str
    type: KnobType
    default: Value
    description: str = ""
    group: str = "other"
    min: float | None = None
    max: float | None = None
    log: bool = False
    choices: tuple[str, ...] = ()
    special: Mapping[Value, str] = field(default_factory=dict)
    unit: str = ""
    restart: bool = True
    safety: Safety = Safety.SAFE
    unsafe_values: tuple[Value, ...] | None = None  # None: every non-default value is unsafe
    safety_note: str = ""
    conditions: tuple[Condition, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)  # format -> spelling of the name
    spell: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # format -> value -> text
    tunable: bool = True
    search_special: bool = True  # False: special values are valid but never proposed by a search
    drivers: tuple[str, ...] = ()  # only these drivers can set it (another runs the system's built-in value); (): any
    data_sized: bool = False  # a size relative to the data: a small rung runs it scaled down by its fraction
    data_sized_min: Value | None = None  # the least value scaling goes to (the system's own floor; default: min)

    @property
    def is_numeric(self) -> bool:
        return self.type in _NUMERIC

    def parse(self, raw: Any) -> Value:
        """Turn a value from a file or the command line into this knob's type.

        Raises:
            ConfigError: the value has the wrong type or lies outside the range.
        """
        value = self.typed(raw)
        self.check(value)
        return value

    def typed(self, raw: Any) -> Value:
        """``raw`` in this knob's type ("16MiB" in bytes, "on" a bool), not yet checked against the range.

        Raises:
            ConfigError: the value cannot be read as this knob's type.
        """
        try:
            return _coerce(self.type, raw)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"knob '{self.name}': {exc}. Fix: give a {self.type} value{self._range_hint()}") from None

    def check(self, value: Value) -> None:
        """Raises ConfigError naming the knob and the allowed values when ``value`` is not one."""
        if self.type is KnobType.ENUM and value not in self.choices:
            raise ConfigError(f"knob '{self.name}': {value!r} is not one of {', '.join(self.choices)}")
        if self.is_numeric and value not in self.special:
            if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
                raise ConfigError(f"knob '{self.name}': {value!r} is out of range. Fix: use a value{self._range_hint()}")

    def supports(self, fmt: str) -> bool:
        """Whether format ``fmt`` can express this knob (a catalog marks it impossible with an empty name)."""
        return self.names.get(fmt, self.name) != ""

    def settable_by(self, driver: str) -> bool:
        """Whether ``driver`` can set this knob (a knob with ``drivers`` is fixed at its default under any other)."""
        return not self.drivers or driver in self.drivers

    def is_unsafe(self, value: Value) -> bool:
        """True when ``value`` carries this knob's safety class (never for SAFE knobs)."""
        if self.safety is Safety.SAFE:
            return False
        if self.unsafe_values is None:
            return value != self.default
        return value in self.unsafe_values

    def applies(self, config: Mapping[str, Value]) -> bool:
        """Whether the knob matters under ``config`` (all its conditions hold)."""
        return all_hold(self.conditions, config)

    def at_fraction(self, value: Value, fraction: float) -> Value:
        """``value`` scaled by ``fraction`` when the knob is data-sized (never below its floor; a special value and
        a value already under the floor stay as they are); any other knob's value unchanged."""
        if not self.data_sized or fraction >= 1 or value in self.special or isinstance(value, bool):
            return value
        floor = self.data_sized_min if self.data_sized_min is not None else self.min
        if floor is None or value <= floor:
            return value
        scaled = max(floor, value * fraction)
        return float(scaled) if self.type is KnobType.FLOAT else int(round(scaled))

    def _range_hint(self) -> str:
        parts = []
        if self.is_numeric:
            parts.append(f" in [{_fmt(self.min)}, {_fmt(self.max)}]")
        if self.special:
            parts.append(" or one of " + ", ".join(f"{k} ({v})" for k, v in self.special.items()))
        if self.choices:
            parts.append(" among " + ", ".join(self.choices))
        return "".join(parts)


Product = tuple[str | float, ...]  # knob names and constant factors, multiplied


@dataclass(frozen=True)
class MemoryModel:
    """What a config will hold in memory, planned from its knobs: sums of products (see docs/catalog-format.md).

    ``planned`` is a floor (caches and write buffers, not the process itself);
    the measured peak is the truth. ``write_buffers`` is what the store can
    hold before it must write anything to table files.
    """

    planned: tuple[Product, ...] = ()
    write_buffers: tuple[Product, ...] = ()

    def planned_bytes(self, config: Mapping[str, Value]) -> int:
        return _sum_of_products(self.planned, config)

    def write_buffer_bytes(self, config: Mapping[str, Value]) -> int:
        return _sum_of_products(self.write_buffers, config)

    def over_limit(self, config: Mapping[str, Value], limit_bytes: int | None) -> str | None:
        """Why ``config`` is not to be run under ``limit_bytes``; None when its plan fits (or there is no limit)."""
        planned = self.planned_bytes(config)
        if limit_bytes is None or planned <= limit_bytes:
            return None
        return (f"planned memory {human_bytes(planned)} (caches and write buffers) is over the memory limit "
                f"{human_bytes(limit_bytes)}; not run")


def _sum_of_products(terms: tuple[Product, ...], config: Mapping[str, Value]) -> int:
    total = 0.0
    for term in terms:
        product = 1.0
        for factor in term:
            product *= max(float(config[factor]), 0.0) if isinstance(factor, str) else factor
        total += product
    return int(total)


@dataclass(frozen=True)
class Catalog:
    system: str
    version: str
    description: str
    formats: tuple[str, ...]
    knobs: Mapping[str, Knob]
    relations: tuple[Relation, ...] = ()
    implications: tuple[Implication, ...] = ()
    source: Path | None = None
    memory: MemoryModel = field(default_factory=MemoryModel)

    def __getitem__(self, name: str) -> Knob:
        try:
            return self.knobs[name]
        except KeyError:
            raise ConfigError(_unknown_knob_message(name, self)) from None

    def defaults(self) -> dict[str, Value]:
        return {name: knob.default for name, knob in self.knobs.items()}

    def config(self, changes: Mapping[str, Any]) -> dict[str, Value]:
        """The full configuration: defaults overridden by ``changes`` (parsed and range-checked).

        Raises:
            ConfigError: an unknown knob, a bad value, or a broken relation between knobs.
        """
        config = self.defaults()
        for name, raw in changes.items():
            config[name] = self[name].parse(raw)
        for implication in self.implications:
            if implication.applies(config) and any(config[k] != v for k, v in implication.then.items()):
                raise ConfigError(f"{implication}, which this config breaks. Fix: set "
                                  + ", ".join(f"{k}={v}" for k, v in implication.then.items()))
        for relation in self.relations:
            if not relation.holds(config):
                raise ConfigError(
                    f"{relation} does not hold ({relation.left}={config[relation.left]}, "
                    f"{relation.right}={config[relation.right]}). Fix: raise {relation.left} or lower {relation.right}")
        return config

    def at_fraction(self, config: Mapping[str, Value], fraction: float) -> dict[str, Value]:
        """``config`` for a run on ``fraction`` of the full data: every data-sized knob (memtables, caches, file
        and level sizes) scaled by it, so a small rung runs a miniature of the full size (as many memtables
        flushed, files compacted, the same share of the data cached). Values below a knob's search range are
        meant: the result is for running, not for checking."""
        return {name: self.knobs[name].at_fraction(value, fraction) for name, value in config.items()}

    @property
    def scales_rungs(self) -> bool:
        """Whether any knob is data-sized (small rungs run scaled configs)."""
        return any(knob.data_sized for knob in self.knobs.values())

    def changed(self, config: Mapping[str, Value]) -> dict[str, Value]:
        """Only the knobs whose value differs from the default and that apply under ``config``."""
        return {k: v for k, v in config.items() if v != self.knobs[k].default and self.knobs[k].applies(config)}

    def needs_other_driver(self, config: Mapping[str, Value], driver: str) -> dict[str, tuple[str, ...]]:
        """Changed knobs of ``config`` that ``driver`` cannot set, each with the drivers that can."""
        return {k: self.knobs[k].drivers for k in self.changed(config) if not self.knobs[k].settable_by(driver)}

    def unsafe_in(self, config: Mapping[str, Value]) -> dict[str, Safety]:
        """Knobs of ``config`` that hold an unsafe value, with the class each carries."""
        return {k: self.knobs[k].safety for k, v in config.items()
                if self.knobs[k].applies(config) and self.knobs[k].is_unsafe(v)}


def _fmt(bound: float | None) -> str:
    return "-inf" if bound is None else f"{bound:g}"


def _unknown_knob_message(name: str, catalog: Catalog) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(catalog.knobs), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"unknown knob '{name}' for {catalog.system}.{hint} Fix: see `knobtune knobs {catalog.system}`"


def _coerce(knob_type: KnobType, raw: Any) -> Value:
    if knob_type is KnobType.BOOL:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("true", "1", "yes", "on"):
            return True
        if str(raw).lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{raw!r} is not true or false")
    if knob_type is KnobType.INT:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError(f"{raw!r} is not an integer")
        return int(raw)
    if knob_type is KnobType.FLOAT:
        if isinstance(raw, bool):
            raise ValueError(f"{raw!r} is not a number")
        return float(raw)
    if knob_type is KnobType.BYTES:
        return parse_bytes(raw)
    if knob_type is KnobType.DURATION:
        return parse_duration_s(raw)
    return str(raw)


# ---------------------------------------------------------------- loading


def catalog_path(system: str) -> Path:
    return CATALOG_DIR / f"{system}.toml"


def available_systems() -> list[str]:
    return sorted(p.stem for p in CATALOG_DIR.glob("*.toml"))


def load_catalog(system_or_path: str | Path) -> Catalog:
    """Load and validate a shipped catalog by system name, or any catalog file by path.

    Raises:
        CatalogError: naming the file, the knob, the field and the fix.
    """
    path = Path(system_or_path)
    if not path.suffix:
        path = catalog_path(str(system_or_path))
        if not path.exists():
            raise CatalogError(f"no knob catalog for system '{system_or_path}'. "
                               f"Fix: choose one of {', '.join(available_systems())}")
    return _build_catalog(path, read_toml(path, CatalogError, "catalog"))


def _build_catalog(path: Path, data: dict[str, Any]) -> Catalog:
    for required in ("system", "knobs"):
        if required not in data:
            raise CatalogError(f"{path}: missing top-level field '{required}'. Fix: add it (see docs/catalog-format.md)")
    formats = tuple(data.get("formats", ()))
    knobs = {name: _build_knob(path, name, spec, formats) for name, spec in data["knobs"].items()}
    for knob in knobs.values():
        for condition in knob.conditions:
            if condition.knob not in knobs:
                raise CatalogError(f"{path}: knob '{knob.name}': field 'conditions' names unknown knob "
                                   f"'{condition.knob}'. Fix: name a knob of this catalog")
    relations = tuple(_build_relation(path, i, spec, knobs) for i, spec in enumerate(data.get("relations", [])))
    implications = tuple(_build_implication(path, i, spec, knobs) for i, spec in enumerate(data.get("implications", [])))
    catalog = Catalog(system=data["system"], version=str(data.get("version", "")),
                      description=data.get("description", ""), formats=formats,
                      knobs=knobs, relations=relations, implications=implications, source=path,
                      memory=_build_memory(path, data.get("memory", {}), knobs))
    for relation in relations:
        if not relation.holds(catalog.defaults()):
            raise CatalogError(f"{path}: relation {relation} does not hold for the defaults. Fix: correct the defaults")
    return catalog


def _build_knob(path: Path, name: str, spec: dict[str, Any], formats: tuple[str, ...]) -> Knob:
    def fail(field_name: str, problem: str, fix: str) -> CatalogError:
        return CatalogError(f"{path}: knob '{name}': field '{field_name}': {problem}. Fix: {fix}")

    unknown = set(spec) - _KNOWN_FIELDS
    if unknown:
        raise fail(sorted(unknown)[0], "unknown field", f"use only {', '.join(sorted(_KNOWN_FIELDS))}")
    try:
        knob_type = KnobType(spec["type"])
    except KeyError:
        raise fail("type", "missing", f"add type = one of {', '.join(t.value for t in KnobType)}") from None
    except ValueError:
        raise fail("type", f"{spec['type']!r} is not a type", f"use one of {', '.join(t.value for t in KnobType)}") from None
    if "default" not in spec:
        raise fail("default", "missing", "add the system's own default value")
    if "safety" not in spec and _NEEDS_SAFETY.search(name):
        raise fail("safety", "missing for a knob that touches durability or retention",
                   "add safety = \"safe\", \"durability\", \"data-loss\", \"recovery\" or \"operational\"")
    try:
        safety = Safety(spec.get("safety", "safe"))
    except ValueError:
        raise fail("safety", f"{spec['safety']!r} is not a safety class",
                   f"use one of {', '.join(s.value for s in Safety)}") from None

    def coerce(field_name: str, raw: Any) -> Value:
        try:
            return _coerce(knob_type, raw)
        except (ValueError, TypeError) as exc:
            raise fail(field_name, str(exc), f"give a {knob_type} value") from None

    special = {coerce("special", k): str(v) for k, v in spec.get("special", {}).items()}
    bounds = {b: float(coerce(b, spec[b])) if knob_type is KnobType.FLOAT else coerce(b, spec[b])
              for b in ("min", "max") if b in spec}
    if knob_type in _NUMERIC and len(bounds) < 2:
        raise fail("min" if "min" not in bounds else "max", "missing for a numeric knob", "add min and max")
    if bounds and bounds["min"] > bounds["max"]:
        raise fail("min", f"{bounds['min']} > max {bounds['max']}", "swap them")
    if spec.get("log") and bounds and bounds["min"] <= 0:
        raise fail("log", "log scale needs min > 0", "raise min, or use a special value for 0")
    choices = tuple(str(c) for c in spec.get("choices", ()))
    if (knob_type is KnobType.ENUM) != bool(choices):
        raise fail("choices", "required for enum knobs and only for them", "list the values as strings")
    conditions = tuple(
        Condition(knob=str(c.get("knob")), values=tuple(c.get("values", ())))
        for c in spec.get("conditions", ()))
    unsafe = spec.get("unsafe_values")
    drivers = spec.get("drivers", [])
    if not (isinstance(drivers, list) and all(isinstance(d, str) and d for d in drivers)) \
            or ("drivers" in spec and not drivers):
        raise fail("drivers", f"{drivers!r} is not a non-empty list of driver names",
                   "list the drivers that can set the knob, e.g. drivers = [\"kvbench-tunable\"], or leave the field out")
    knob = Knob(
        name=name, type=knob_type, default=coerce("default", spec["default"]),
        description=spec.get("description", ""), group=spec.get("group", "other"),
        min=bounds.get("min"), max=bounds.get("max"), log=bool(spec.get("log", False)),
        choices=choices, special=special, unit=spec.get("unit", ""), restart=bool(spec.get("restart", True)),
        safety=safety, unsafe_values=None if unsafe is None else tuple(coerce("unsafe_values", u) for u in unsafe),
        safety_note=spec.get("safety_note", ""), conditions=conditions,
        names={fmt: spec.get("names", {}).get(fmt, name) for fmt in formats},
        spell={fmt: {str(k): str(v) for k, v in values.items()} for fmt, values in spec.get("spell", {}).items()},
        tunable=bool(spec.get("tunable", True)), search_special=bool(spec.get("search_special", True)),
        drivers=tuple(drivers), data_sized=bool(spec.get("data_sized", False)),
        data_sized_min=coerce("data_sized_min", spec["data_sized_min"]) if "data_sized_min" in spec else None,
    )
    if (knob.data_sized or knob.data_sized_min is not None) and not (knob.is_numeric and knob.data_sized):
        raise fail("data_sized", "only a numeric knob can be data-sized, and data_sized_min needs data_sized = true",
                   "remove the field, or set data_sized = true on a numeric knob")
    if knob.data_sized_min is not None and not 0 < knob.data_sized_min <= knob.min:
        raise fail("data_sized_min", f"{knob.data_sized_min} is not above 0 and at most min {knob.min}",
                   "give the system's own floor for the value, at most the knob's min")
    try:
        knob.check(knob.default)
    except ConfigError as exc:
        raise fail("default", str(exc), "the default must lie in the range or be a special value") from None
    if safety is not Safety.SAFE and not knob.safety_note:
        raise fail("safety_note", "missing for an unsafe class", "say in one sentence what the unsafe values risk")
    for fmt in knob.spell:
        if fmt not in formats:
            raise fail("spell", f"format '{fmt}' is not listed in the catalog's formats", f"use one of {formats}")
    return knob


def _build_memory(path: Path, spec: Any, knobs: Mapping[str, Knob]) -> MemoryModel:
    def fail(where: str, problem: str) -> CatalogError:
        return CatalogError(f"{path}: memory.{where}: {problem}. Fix: write a list of products, each a list of "
                            "numeric knob names and numbers, e.g. [[\"cache_size\"], [\"write_buffer_size\", 2]]")

    if not isinstance(spec, dict) or set(spec) - {"planned", "write_buffers"}:
        raise fail("", "only 'planned' and 'write_buffers' may be given")
    built: dict[str, tuple[Product, ...]] = {}
    for name in ("planned", "write_buffers"):
        terms = spec.get(name, [])
        if not isinstance(terms, list) or not all(isinstance(t, list) and t for t in terms):
            raise fail(name, "is not a list of non-empty lists")
        for factor in (f for t in terms for f in t):
            if isinstance(factor, str) and (factor not in knobs or not knobs[factor].is_numeric):
                raise fail(name, f"'{factor}' is not a numeric knob of this catalog")
            if not isinstance(factor, (str, int, float)) or isinstance(factor, bool):
                raise fail(name, f"{factor!r} is neither a knob name nor a number")
        built[name] = tuple(tuple(t) for t in terms)
    return MemoryModel(**built)


def _build_relation(path: Path, index: int, spec: dict[str, Any], knobs: Mapping[str, Knob]) -> Relation:
    factor, when = spec.get("factor", 1.0), spec.get("when", {})
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
        raise CatalogError(f"{path}: relations[{index}]: field 'factor' is {factor!r}. Fix: give a positive number")
    if not isinstance(when, dict) or any(k not in knobs or not isinstance(v, list) for k, v in when.items()):
        raise CatalogError(f"{path}: relations[{index}]: field 'when' must map knobs of this catalog to lists of "
                           "values. Fix: e.g. when = { memtablerep = [\"hash_linkedlist\"] }")
    relation = Relation(left=str(spec.get("left")), op=str(spec.get("op")), right=str(spec.get("right")),
                        factor=float(factor), when=tuple(Condition(k, tuple(v)) for k, v in when.items()))
    if relation.op not in (">=", "<="):
        raise CatalogError(f"{path}: relations[{index}]: field 'op' is {relation.op!r}. Fix: use \">=\" or \"<=\"")
    for side in (relation.left, relation.right):
        if side not in knobs or not knobs[side].is_numeric:
            raise CatalogError(f"{path}: relations[{index}]: '{side}' is not a numeric knob of this catalog. "
                               "Fix: name a numeric knob")
    return relation


def _build_implication(path: Path, index: int, spec: dict[str, Any], knobs: Mapping[str, Knob]) -> Implication:
    def fail(problem: str) -> CatalogError:
        return CatalogError(f"{path}: implications[{index}]: {problem}. "
                            "Fix: write when = { knob = [values] } and then = { knob = value } with knobs of this catalog")

    when, then = spec.get("when"), spec.get("then")
    if not isinstance(when, dict) or not isinstance(then, dict) or not when or not then:
        raise fail("needs tables 'when' and 'then'")
    for name in [*when, *then]:
        if name not in knobs:
            raise fail(f"unknown knob '{name}'")
    try:
        forced = {name: knobs[name].parse(value) for name, value in then.items()}
    except ConfigError as exc:
        raise fail(str(exc)) from None
    conditions = tuple(Condition(name, tuple(v if isinstance(v, list) else [v])) for name, v in when.items())
    return Implication(conditions, forced)
