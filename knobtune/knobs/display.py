"""Knob values and ranges as people read them (tables, reports, docs)."""

from __future__ import annotations

from typing import Any

from knobtune.knobs.knob import Knob
from knobtune.knobs.units import approx_bytes, format_bytes


def knob_value(knob: Knob, value: Any) -> str:
    """A value as a person reads it: special values named, sizes in KiB..TiB, short floats."""
    if value in knob.special:
        return f"{value} ({knob.special[value]})"
    if knob.type.value == "bytes" and isinstance(value, int):
        return approx_bytes(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).lower() if isinstance(value, bool) else str(value)


def knob_range(knob: Knob) -> str:
    """The values a knob may take, e.g. "1 MiB .. 1 GiB (log)" or "level | universal | fifo"."""
    if knob.choices:
        return " | ".join(knob.choices)
    if knob.type.value == "bool":
        return "true | false"
    low, high = (format_bytes(int(knob.min)), format_bytes(int(knob.max))) if knob.type.value == "bytes" \
        else (f"{knob.min:g}", f"{knob.max:g}")
    return f"{low} .. {high}" + (" (log)" if knob.log else "")
