"""Knob values and ranges as people read them (tables, reports, docs)."""

from __future__ import annotations

from typing import Any

from knobtune.knobs.knob import Knob
from knobtune.units import approx_bytes, format_bytes


def knob_value(knob: Knob, value: Any) -> str:
    """A value as a person reads it: special values named, sizes in KiB..TiB, short floats."""
    if value in knob.special:
        return f"{value} ({knob.special[value]})"
    if knob.type.value == "bytes" and isinstance(value, int):
        return approx_bytes(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).lower() if isinstance(value, bool) else str(value)


def same_behaviour(knob: Knob, a: Any, b: Any) -> bool:
    """Whether values ``a`` and ``b`` of ``knob`` make the system behave the same: equal numbers (1 MiB and
    1048576.0), or two special values that mean the same (-1 and 0 of ``bloom_bits``: no filter). A table of
    changes lists a knob only when they do not."""
    if a == b:
        return True
    if a in knob.special and b in knob.special:
        return knob.special[a] == knob.special[b]
    numbers = (int, float)
    return (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool)
            and float(a) == float(b))


def knob_range(knob: Knob) -> str:
    """The values a knob may take, e.g. "1 MiB .. 1 GiB (log)" or "level | universal | fifo"."""
    if knob.choices:
        return " | ".join(knob.choices)
    if knob.type.value == "bool":
        return "true | false"
    least, most = knob.bounds
    low, high = (format_bytes(int(least)), format_bytes(int(most))) if knob.type.value == "bytes" \
        else (f"{least:g}", f"{most:g}")
    return f"{low} .. {high}" + (" (log)" if knob.log else "")
