"""Knob catalogs: one TOML data file per system, validated on load.

A catalog says, for every knob: its type and range, the system's default,
log scale, special values (``-1`` = unlimited), unit, whether a restart is
needed, its safety class, the conditions under which it matters, and how each
output format spells its name and values. ``docs/catalog-format.md`` is the
reference for the file format; ``knobs.catalog_schema`` its schema, which the one reader (``knobtune.schema``)
holds a file to first. What is checked here is what the fields must agree on, one line per problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, ConfigError
from knobtune.names import nearest
from knobtune.knobs.knob import NUMERIC_TYPES, Condition, Knob, KnobType, Safety, Value, as_number, coerce_value
from knobtune.knobs.memory import MemoryModel, Product
from knobtune.knobs.model import Catalog, Implication, Relation

if TYPE_CHECKING:
    from knobtune.knobs.catalog_schema import KnobDoc, RelationDoc

# The model's names are read from here too (``from knobtune.knobs.catalog import Catalog, Knob``).
__all__ = ["Catalog", "Condition", "Implication", "Knob", "KnobType", "MemoryModel", "Relation",
           "Safety", "SYSTEMS_DIR", "Value", "available_systems", "catalog_path", "forget_catalog", "load_catalog",
           "register_catalog"]

# Knob names that touch durability or data retention must say what they risk.
_NEEDS_SAFETY = re.compile(r"wal|sync|fsync|fifo|ttl|auto_compaction|full_page|paranoid|reuse_logs")


_DESCRIBED: dict[str, Path] = {}  # systems described by a system file: their catalogs, wherever they live


def register_catalog(system: str, path: Path) -> None:
    """Make ``system``'s catalog the file ``path`` (a system file's catalog: ``described.system_file``)."""
    _DESCRIBED[system] = path


def forget_catalog(system: str) -> None:
    """Forget the catalog ``register_catalog`` gave ``system`` (a shipped system's is found in its folder again)."""
    _DESCRIBED.pop(system, None)


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


def _build_catalog(path: Path, data: dict[str, Any]) -> Catalog:
    """A catalog file's data read through its schema, then what its fields must agree on.

    Raises:
        CatalogError: one line per problem, naming the file, the field and the fix.
    """
    from knobtune.knobs.catalog_schema import DOCS, CatalogDoc

    document = schema.read(CatalogDoc, data, schema.Where(str(path), docs=DOCS), CatalogError)
    problems = _Problems(path)
    built = {name: _build_knob(name, spec, document.formats, problems) for name, spec in document.knobs.items()}
    problems.raise_any()  # what follows reads the knobs
    knobs = {name: knob for name, knob in built.items() if knob is not None}
    for knob in knobs.values():
        for i, condition in enumerate(knob.conditions):
            if condition.knob not in knobs:
                problems.add(f"knobs.{knob.name}.conditions #{i + 1}.knob", f"names unknown knob '{condition.knob}'",
                             f"name a knob of this catalog{nearest(condition.knob, knobs)}")
    relations = [_build_relation(i, spec, knobs, problems) for i, spec in enumerate(document.relations)]
    implications = [_build_implication(i, spec.when, spec.then, knobs, problems)
                    for i, spec in enumerate(document.implications)]
    memory = MemoryModel(**{name: _products(name, getattr(document.memory, name), knobs, problems)
                            for name in ("planned", "write_buffers")})
    problems.raise_any()
    catalog = Catalog(system=document.system, version=document.version, description=document.description,
                      formats=document.formats, knobs=knobs, relations=tuple(r for r in relations if r),
                      implications=tuple(i for i in implications if i), source=path, memory=memory)
    for i, relation in enumerate(catalog.relations):
        if not relation.holds(catalog.defaults()):
            problems.add(f"relations #{i + 1}", f"{relation} does not hold for the defaults",
                         "correct the defaults, or the relation")
    problems.raise_any()
    return catalog


class _Problems:
    """The problems of one catalog file, one line each: the field, what is wrong, the fix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def add(self, field_path: str, problem: str, fix: str) -> None:
        self.lines.append(f"{self.path}: {field_path} {problem}. Fix: {fix}")

    def raise_any(self) -> None:
        """Raises CatalogError with every problem added, when there is one."""
        if self.lines:
            raise CatalogError("\n".join(self.lines))


def _build_knob(name: str, spec: KnobDoc, formats: tuple[str, ...], problems: _Problems) -> Knob | None:
    """The knob ``spec`` describes, or None with its problems added."""
    before = len(problems.lines)
    knob_type = KnobType(spec.type)
    where = f"knobs.{name}"

    def coerce(field_name: str, raw: Any) -> Value | None:
        try:
            return coerce_value(knob_type, raw)
        except (ValueError, TypeError) as exc:
            problems.add(f"{where}.{field_name}", str(exc), f"give a {knob_type} value")
            return None

    if spec.safety is None and _NEEDS_SAFETY.search(name):
        problems.add(f"{where}.safety", "is missing for a knob that touches durability or retention",
                     f"add safety = one of {', '.join(s.value for s in Safety)} (\"safe\" too: say it)")
    safety = Safety(spec.safety or "safe")
    default = coerce("default", spec.default)
    special = {value: meaning for k, meaning in spec.special.items()
               if (value := coerce(f"special.{k}", k)) is not None}
    bounds = {b: coerce(b, raw) for b, raw in (("min", spec.min), ("max", spec.max)) if raw is not None}
    if knob_type not in NUMERIC_TYPES and bounds:
        problems.add(f"{where}.{next(iter(bounds))}", f"is given for a {knob_type} knob: only a numeric knob has "
                     "bounds", "remove it")
    elif knob_type in NUMERIC_TYPES and len(bounds) < 2:
        problems.add(f"{where}.{'min' if 'min' not in bounds else 'max'}", "is missing for a numeric knob",
                     "add min and max")
    elif None not in bounds.values() and bounds and bounds["min"] > bounds["max"]:  # type: ignore[operator]
        problems.add(f"{where}.min", f"{bounds['min']} is above max {bounds['max']}", "swap them")
    elif spec.log and bounds and None not in bounds.values() and as_number(bounds["min"]) <= 0:  # type: ignore[arg-type]
        problems.add(f"{where}.log", f"= true needs min above 0 (min is {bounds['min']})",
                     "raise min, or make 0 a special value")
    if (knob_type is KnobType.ENUM) != bool(spec.choices):
        problems.add(f"{where}.choices", "is missing for an enum knob" if spec.choices == () else
                     f"is given for a {knob_type} knob", "list the values of an enum knob, and of no other")
    if spec.drivers == ():
        problems.add(f"{where}.drivers", "is an empty list", "list the drivers that can set the knob, e.g. drivers = "
                     "[\"kvbench-tunable\"], or leave the field out")
    if safety is not Safety.SAFE and not spec.safety_note:
        problems.add(f"{where}.safety_note", f"is missing for the unsafe class '{safety}'",
                     "say in one sentence what the unsafe values risk")
    for key, table in (("names", spec.names), ("spell", spec.spell)):
        for spelling in table:
            if spelling not in formats:
                problems.add(f"{where}.{key}.{spelling}", "names a format the catalog's formats do not list",
                             f"use one of {', '.join(formats) or 'none (formats = [])'}{nearest(spelling, formats)}")
    unsafe = None if spec.unsafe_values is None else tuple(coerce("unsafe_values", u) for u in spec.unsafe_values)
    minimum = coerce("data_sized_min", spec.data_sized_min) if spec.data_sized_min is not None else None
    if len(problems.lines) > before or default is None:
        return None
    knob = Knob(
        name=name, type=knob_type, default=default, description=spec.description, group=spec.group,
        min=_bound(bounds.get("min"), knob_type), max=_bound(bounds.get("max"), knob_type), log=spec.log,
        choices=spec.choices, special=special, unit=spec.unit, restart=spec.restart, safety=safety,
        unsafe_values=unsafe, safety_note=spec.safety_note,  # type: ignore[arg-type]
        conditions=tuple(Condition(c.knob, c.values) for c in spec.conditions),
        names={spelling: spec.names.get(spelling, name) for spelling in formats},
        spell={spelling: dict(values) for spelling, values in spec.spell.items()},
        tunable=spec.tunable, search_special=spec.search_special, drivers=spec.drivers or (),
        data_sized=spec.data_sized, data_sized_min=minimum)
    return _checked(knob, where, problems)


def _bound(value: Value | None, knob_type: KnobType) -> float | None:
    return None if value is None else float(value) if knob_type is KnobType.FLOAT else value  # type: ignore[return-value]


def _checked(knob: Knob, where: str, problems: _Problems) -> Knob | None:
    """``knob`` when its default lies in its range and its data-sized fields fit it; else None, the problem added."""
    before = len(problems.lines)
    if (knob.data_sized or knob.data_sized_min is not None) and not (knob.is_numeric and knob.data_sized):
        problems.add(f"{where}.data_sized", "only a numeric knob can be data-sized, and data_sized_min needs "
                     "data_sized = true", "remove the field, or set data_sized = true on a numeric knob")
    elif knob.data_sized_min is not None and not 0 < as_number(knob.data_sized_min) <= knob.bounds[0]:
        problems.add(f"{where}.data_sized_min", f"{knob.data_sized_min} is not above 0 and at most min {knob.min}",
                     "give the system's own floor for the value, at most the knob's min")
    try:
        knob.check(knob.default)
    except ConfigError as exc:
        allowed = f"one of {', '.join(knob.choices)}" if knob.choices else \
            f"between min {knob.min} and max {knob.max}, or a special value"
        problems.add(f"{where}.default", str(exc).split(". Fix:")[0].removeprefix(f"knob '{knob.name}': "),
                     f"give the system's own default: it must be {allowed}")
    return knob if len(problems.lines) == before else None


def _products(name: str, terms: tuple[tuple[Any, ...], ...], knobs: Mapping[str, Knob],
              problems: _Problems) -> tuple[Product, ...]:
    """A memory model's sum of products: each factor a numeric knob of the catalog or a number."""
    for i, term in enumerate(terms):
        for factor in term:
            if isinstance(factor, bool) or isinstance(factor, str) and (factor not in knobs or
                                                                        not knobs[factor].is_numeric):
                meant = nearest(factor, knobs) if isinstance(factor, str) and factor not in knobs else ""
                problems.add(f"memory.{name} #{i + 1}", f"{factor!r} is neither a numeric knob of this catalog nor "
                             f"a number{meant}",
                             "write a list of products, each a list of numeric knob names and numbers, e.g. "
                             "[[\"cache_size\"], [\"write_buffer_size\", 2]]")
    return terms


def _build_relation(index: int, spec: RelationDoc, knobs: Mapping[str, Knob], problems: _Problems) -> Relation | None:
    where = f"relations #{index + 1}"
    before = len(problems.lines)
    for side, name in (("left", spec.left), ("right", spec.right), *(("when", k) for k in spec.when)):
        if name not in knobs or side != "when" and not knobs[name].is_numeric:
            problems.add(f"{where}.{side}", f"'{name}' is not a {'' if side == 'when' else 'numeric '}knob of this "
                         f"catalog{nearest(name, knobs)}", f"name a {'' if side == 'when' else 'numeric '}knob")
    if len(problems.lines) > before:
        return None
    return Relation(left=spec.left, op=spec.op, right=spec.right, factor=spec.factor,
                    when=tuple(Condition(k, v) for k, v in spec.when.items()))


def _build_implication(index: int, when: Mapping[str, Any], then: Mapping[str, Any], knobs: Mapping[str, Knob],
                       problems: _Problems) -> Implication | None:
    where = f"implications #{index + 1}"
    before = len(problems.lines)
    for key, table in (("when", when), ("then", then)):
        if not table:
            problems.add(f"{where}.{key}", "is an empty table",
                         "write when = { knob = [values] } and then = { knob = value }")
        for name in table:
            if name not in knobs:
                problems.add(f"{where}.{key}.{name}", f"is not a knob of this catalog{nearest(name, knobs)}",
                             "name a knob of this catalog")
    if len(problems.lines) > before:
        return None
    forced = {}
    for name, value in then.items():
        try:
            forced[name] = knobs[name].parse(value)
        except ConfigError as exc:
            problems.add(f"{where}.then.{name}", str(exc).split(". Fix:")[0].removeprefix(f"knob '{name}': "),
                         f"give a value knob '{name}' takes")
    conditions = tuple(Condition(name, tuple(v if isinstance(v, list) else [v])) for name, v in when.items())
    return Implication(conditions, forced) if len(problems.lines) == before else None
