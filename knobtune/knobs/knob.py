"""One knob of a catalog: its type, range, default, special values, safety class and conditions.

``knobtune.knobs.model`` gathers knobs into a catalog; ``knobtune.knobs.catalog`` reads them from a file.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from knobtune.errors import ConfigError
from knobtune.names import nearest
from knobtune.units import parse_bytes, parse_duration_s

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

NUMERIC_TYPES = (KnobType.INT, KnobType.FLOAT, KnobType.BYTES, KnobType.DURATION)


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
    names: Mapping[str, str] = field(default_factory=dict)  # spelling key -> the name as it is spelled there
    spell: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # spelling key -> value -> text
    tunable: bool = True
    search_special: bool = True  # False: special values are valid but never proposed by a search
    drivers: tuple[str, ...] = ()  # only these drivers can set it (another runs the system's built-in value); (): any
    data_sized: bool = False  # a size relative to the data: a small rung runs it scaled down by its fraction
    data_sized_min: Value | None = None  # the least value scaling goes to (the system's own floor; default: min)

    @property
    def is_numeric(self) -> bool:
        return self.type in NUMERIC_TYPES

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
            return coerce_value(self.type, raw)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"knob '{self.name}': {exc}. Fix: give a {self.type} value{self._range_hint()}") from None

    def check(self, value: Value) -> None:
        """Raises ConfigError naming the knob and the allowed values when ``value`` is not one."""
        if self.type is KnobType.ENUM and value not in self.choices:
            raise ConfigError(f"knob '{self.name}': {value!r} is not one of {', '.join(self.choices)}"
                              f"{nearest(str(value), self.choices)}. Fix: use one of {', '.join(self.choices)}")
        if self.is_numeric and value not in self.special:
            if (self.min is not None and as_number(value) < self.min) \
                    or (self.max is not None and as_number(value) > self.max):
                raise ConfigError(f"knob '{self.name}': {value!r} is out of range. "
                                  f"Fix: use a value{self._range_hint()}")

    def supports(self, spelling: str) -> bool:
        """Whether ``spelling`` (a key of the catalog's ``formats``: a driver's or a config file's way of naming
        knobs) can express this knob (a catalog marks it impossible with an empty name)."""
        return self.names.get(spelling, self.name) != ""

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
        floor = as_number(self.data_sized_min) if self.data_sized_min is not None else self.min
        if floor is None or as_number(value) <= floor:
            return value
        scaled = max(floor, as_number(value) * fraction)
        return float(scaled) if self.type is KnobType.FLOAT else int(round(scaled))

    @property
    def bounds(self) -> tuple[float, float]:
        """A numeric knob's (min, max).

        Raises:
            TypeError: the knob has no min or no max (it is not numeric).
        """
        if self.min is None or self.max is None:
            raise TypeError(f"knob '{self.name}' has no min and max")
        return self.min, self.max

    def to_dict(self) -> dict[str, Any]:
        """The knob as JSON-ready data (``knobtune knobs --json``)."""
        return {"name": self.name, "group": self.group, "type": self.type.value, "default": self.default,
                "min": self.min, "max": self.max, "log": self.log, "choices": list(self.choices),
                "special": {str(v): label for v, label in self.special.items()}, "unit": self.unit,
                "restart": self.restart, "safety": self.safety.value, "safety_note": self.safety_note,
                "unsafe_values": None if self.unsafe_values is None else list(self.unsafe_values),
                "conditions": [{"knob": c.knob, "values": list(c.values)} for c in self.conditions],
                "names": dict(self.names), "description": self.description, "tunable": self.tunable,
                "drivers": list(self.drivers)}

    def _range_hint(self) -> str:
        parts = []
        if self.is_numeric:
            parts.append(f" in [{_bound_text(self.min)}, {_bound_text(self.max)}]")
        if self.special:
            parts.append(" or one of " + ", ".join(f"{k} ({v})" for k, v in self.special.items()))
        if self.choices:
            parts.append(" among " + ", ".join(self.choices))
        return "".join(parts)



def as_number(value: Value) -> float:
    """``value`` as it is, narrowed to a number, for comparing with bounds and for arithmetic.

    Raises:
        TypeError: ``value`` is text (an enum's choice), not a number.
    """
    if isinstance(value, str):
        raise TypeError(f"{value!r} is not a number")
    return value


def _bound_text(bound: float | None) -> str:
    return "-inf" if bound is None else f"{bound:g}"


def coerce_value(knob_type: KnobType, raw: Any) -> Value:
    """``raw`` (from a file or the command line) as a value of ``knob_type``.

    Raises:
        ValueError, TypeError: ``raw`` cannot be read as that type.
    """
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
