"""Knob catalogs: one TOML data file per system, validated on load.

A catalog says, for every knob: its type and range, the system's default,
log scale, special values (``-1`` = unlimited), unit, whether a restart is
needed, its safety class, the conditions under which it matters, and how each
output format spells its name and values. ``docs/catalog-format.md`` is the
reference for the file format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, ConfigError
from knobtune.names import nearest
from knobtune.knobs.knob import NUMERIC_TYPES, Condition, Knob, KnobType, Safety, Value, as_number, coerce_value
from knobtune.knobs.memory import MemoryModel, Product
from knobtune.knobs.model import Catalog, Implication, Relation

# The model's names are read from here too (``from knobtune.knobs.catalog import Catalog, Knob``).
__all__ = ["Catalog", "Condition", "Implication", "Knob", "KnobType", "MemoryModel", "Relation",
           "Safety", "SYSTEMS_DIR", "Value", "available_systems", "catalog_path", "load_catalog", "register_catalog"]

# Knob names that touch durability or data retention must say what they risk.
_NEEDS_SAFETY = re.compile(r"wal|sync|fsync|fifo|ttl|auto_compaction|full_page|paranoid|reuse_logs")
_KNOWN_FIELDS = {
    "type", "default", "min", "max", "log", "choices", "special", "unit", "restart",
    "safety", "unsafe_values", "safety_note", "conditions", "group", "description",
    "names", "spell", "tunable", "search_special", "drivers", "data_sized", "data_sized_min",
}


_DESCRIBED: dict[str, Path] = {}  # systems described by a system file: their catalogs, wherever they live


def register_catalog(system: str, path: Path) -> None:
    """Make ``system``'s catalog the file ``path`` (a system file's catalog: ``described.system_file``)."""
    _DESCRIBED[system] = path


SYSTEMS_DIR = Path(__file__).resolve().parents[1] / "systems"  # every shipped system: systems/NAME/catalog.toml


def catalog_path(system: str) -> Path:
    return _DESCRIBED.get(system) or SYSTEMS_DIR / system / "catalog.toml"


def available_systems() -> list[str]:
    shipped = {p.parent.name for p in SYSTEMS_DIR.glob("*/catalog.toml")}
    return sorted(shipped | set(_DESCRIBED))


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


_TOP_FIELDS = ("system", "version", "description", "formats", "knobs", "relations", "implications", "memory")


def _build_catalog(path: Path, data: dict[str, Any]) -> Catalog:
    for given in data:
        if given not in _TOP_FIELDS:
            raise CatalogError(f"{path}: top-level field '{given}' is not a field of a catalog"
                               f"{nearest(given, _TOP_FIELDS)}. Fix: use {', '.join(_TOP_FIELDS)} "
                               "(docs/catalog-format.md)")
    for required in ("system", "knobs"):
        if required not in data:
            raise CatalogError(f"{path}: missing top-level field '{required}'. "
                               "Fix: add it (see docs/catalog-format.md)")
    formats = tuple(data.get("formats", ()))
    knobs = {name: _build_knob(path, name, spec, formats) for name, spec in data["knobs"].items()}
    for knob in knobs.values():
        for condition in knob.conditions:
            if condition.knob not in knobs:
                raise CatalogError(f"{path}: knob '{knob.name}': field 'conditions' names unknown knob "
                                   f"'{condition.knob}'. Fix: name a knob of this catalog")
    relations = tuple(_build_relation(path, i, spec, knobs) for i, spec in enumerate(data.get("relations", [])))
    implications = tuple(_build_implication(path, i, spec,
                                            knobs) for i, spec in enumerate(data.get("implications", [])))
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
        first = sorted(unknown)[0]
        raise fail(first, f"unknown field{nearest(first, _KNOWN_FIELDS)}",
                   f"use only {', '.join(sorted(_KNOWN_FIELDS))}")
    try:
        knob_type = KnobType(spec["type"])
    except KeyError:
        raise fail("type", "missing", f"add type = one of {', '.join(t.value for t in KnobType)}") from None
    except ValueError:
        raise fail("type", f"{spec['type']!r} is not a type",
                   f"use one of {', '.join(t.value for t in KnobType)}") from None
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
            return coerce_value(knob_type, raw)
        except (ValueError, TypeError) as exc:
            raise fail(field_name, str(exc), f"give a {knob_type} value") from None

    special = {coerce("special", k): str(v) for k, v in spec.get("special", {}).items()}
    def bound(field_name: str) -> float:
        value = coerce(field_name, spec[field_name])
        if isinstance(value, str):
            raise fail(field_name, "only a numeric knob has bounds", "remove the field")
        return float(value) if knob_type is KnobType.FLOAT else value

    bounds = {b: bound(b) for b in ("min", "max") if b in spec}
    if knob_type in NUMERIC_TYPES and len(bounds) < 2:
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
                   "list the drivers that can set the knob, e.g. drivers = [\"kvbench-tunable\"], or leave the field "
                   "out")
    knob = Knob(
        name=name, type=knob_type, default=coerce("default", spec["default"]),
        description=spec.get("description", ""), group=spec.get("group", "other"),
        min=bounds.get("min"), max=bounds.get("max"), log=bool(spec.get("log", False)),
        choices=choices, special=special, unit=spec.get("unit", ""), restart=bool(spec.get("restart", True)),
        safety=safety, unsafe_values=None if unsafe is None else tuple(coerce("unsafe_values", u) for u in unsafe),
        safety_note=spec.get("safety_note", ""), conditions=conditions,
        names={spelling: spec.get("names", {}).get(spelling, name) for spelling in formats},
        spell={spelling: {str(k): str(v) for k, v in values.items()}
               for spelling, values in spec.get("spell", {}).items()},
        tunable=bool(spec.get("tunable", True)), search_special=bool(spec.get("search_special", True)),
        drivers=tuple(drivers), data_sized=bool(spec.get("data_sized", False)),
        data_sized_min=coerce("data_sized_min", spec["data_sized_min"]) if "data_sized_min" in spec else None,
    )
    if (knob.data_sized or knob.data_sized_min is not None) and not (knob.is_numeric and knob.data_sized):
        raise fail("data_sized", "only a numeric knob can be data-sized, and data_sized_min needs data_sized = true",
                   "remove the field, or set data_sized = true on a numeric knob")
    if knob.data_sized_min is not None and not 0 < as_number(knob.data_sized_min) <= knob.bounds[0]:
        raise fail("data_sized_min", f"{knob.data_sized_min} is not above 0 and at most min {knob.min}",
                   "give the system's own floor for the value, at most the knob's min")
    try:
        knob.check(knob.default)
    except ConfigError as exc:
        raise fail("default", str(exc), "the default must lie in the range or be a special value") from None
    if safety is not Safety.SAFE and not knob.safety_note:
        raise fail("safety_note", "missing for an unsafe class", "say in one sentence what the unsafe values risk")
    for spelling in knob.spell:
        if spelling not in formats:
            raise fail("spell", f"format '{spelling}' is not listed in the catalog's formats", f"use one of {formats}")
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
                            "Fix: write when = { knob = [values] } and then = { knob = value } with knobs of this "
                            "catalog")

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
