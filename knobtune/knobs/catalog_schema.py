"""A knob catalog's schema (docs/catalog-format.md): every table and field it may hold, typed, read through the one
reader (``knobtune.schema``): an unknown field at any depth is refused with the nearest name, a wrong type or a
value out of range in one line naming the field and the fix. A knob's values (its default, bounds, special and
unsafe values, the values conditions and implications name) take the knob's own type, so they are any value here:
``knobtune.knobs.catalog`` reads them as the knob's type next, with what the fields must agree on (relations,
implications, defaults within range)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knobtune.knobs.knob import KnobType, Safety
from knobtune.schema import TEXT, required, section, setting, table

DOCS = "docs/catalog-format.md"
VALUE = {"example": 4096, "note": "a value of the knob's type (sizes may be \"64MiB\", durations \"10s\")"}


@dataclass(frozen=True, kw_only=True)
class ConditionDoc:
    """The knob matters only while another knob holds one of ``values``."""

    knob: str = required(**TEXT, example="memtablerep")
    values: tuple[Any, ...] = required(example=["vector"])


@dataclass(frozen=True, kw_only=True)
class KnobDoc:
    """One knob: its type, range, the system's default, and how it is searched, spelt and judged safe."""

    type: str = required(choices=tuple(t.value for t in KnobType), what="a knob type")
    default: Any = required(**VALUE)
    min: Any = setting(None, **VALUE)
    max: Any = setting(None, **VALUE)
    log: bool = setting(False, example=True, note="sample on a log scale")
    choices: tuple[str, ...] = setting((), example=["level", "universal"])
    special: Mapping[str, str] = table(**TEXT, example="unlimited")  # a value outside the range -> its meaning
    unit: str = setting("", example="bytes")
    restart: bool = setting(True, example=True, note="changing it needs a restart")
    safety: str | None = setting(None, choices=tuple(s.value for s in Safety), what="a safety class")
    unsafe_values: tuple[Any, ...] | None = setting(None, example=["fifo"])
    safety_note: str = setting("", example="FIFO compaction deletes the oldest files")
    conditions: tuple[ConditionDoc, ...] = ()
    group: str = setting("other", example="memtable")
    description: str = setting("", example="what it does")
    names: Mapping[str, str] = table(example="filter_policy")  # format -> the knob's name there ("": none)
    spell: Mapping[str, Mapping[str, str]] = table(example="0")  # format -> value -> how the format writes it
    tunable: bool = setting(True, example=False, note="false: known and renderable, searched only when named")
    search_special: bool = setting(True, example=False, note="false: special values are never proposed")
    drivers: tuple[str, ...] | None = setting(None, example=["kvbench-tunable"])
    data_sized: bool = setting(False, example=True, note="a size relative to the data, scaled with a rung")
    data_sized_min: Any = setting(None, example="64KiB", note="the least value scaling gives (default: min)")


@dataclass(frozen=True, kw_only=True)
class RelationDoc:
    """``left op factor x right`` must hold between two numeric knobs while ``when`` holds."""

    left: str = required(**TEXT, example="level0_stop_writes_trigger")
    op: str = required(choices=(">=", "<="), what="a comparison")
    right: str = required(**TEXT, example="level0_slowdown_writes_trigger")
    factor: float = setting(1.0, positive=True, example=0.0625)
    when: Mapping[str, tuple[Any, ...]] = table(example=["hash_linkedlist"])


@dataclass(frozen=True, kw_only=True)
class ImplicationDoc:
    """When every knob of ``when`` holds one of its values, the system requires the values of ``then``."""

    when: Mapping[str, Any] = required(example=["vector"])  # knob -> a value or a list of values
    then: Mapping[str, Any] = required(example=False)  # knob -> the value it must hold


@dataclass(frozen=True, kw_only=True)
class MemoryDoc:
    """What a config will hold in memory: sums of products of numeric knobs and numbers."""

    planned: tuple[tuple[Any, ...], ...] = setting((), example=[["cache_size"], ["write_buffer_size", 2]])
    write_buffers: tuple[tuple[Any, ...], ...] = setting((), example=[["write_buffer_size"]])


@dataclass(frozen=True, kw_only=True)
class CatalogDoc:
    """A system's knob catalog: its knobs, the relations and implications between them, its memory model."""

    system: str = required(**TEXT, example="rocksdb")
    version: str = setting("", example="7.8.3")
    description: str = setting("", example="what the catalog covers")
    formats: tuple[str, ...] = setting((), example=["db_bench", "options"])
    knobs: Mapping[str, KnobDoc] = required()
    relations: tuple[RelationDoc, ...] = ()
    implications: tuple[ImplicationDoc, ...] = ()
    memory: MemoryDoc = section(MemoryDoc)
