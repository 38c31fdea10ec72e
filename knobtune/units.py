"""Sizes and durations written the way people write them ("64MiB", "10s")."""

from __future__ import annotations

import re

_BYTE_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kb": 1024, "kib": 1024,
    "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1024**3, "gib": 1024**3,
    "t": 1024**4, "tb": 1024**4, "tib": 1024**4,
}
_DURATION_UNITS = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_NUMBER_WITH_UNIT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text: str | int) -> int:
    """``"64MiB"`` -> 67108864. Binary units; ``MB`` means MiB as in RocksDB's docs.

    Raises:
        ValueError: the text is not a number with a known size unit.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a size")
    if isinstance(text, int):
        return text
    match = _NUMBER_WITH_UNIT.match(str(text))
    if not match or match.group(2).lower() not in _BYTE_UNITS:
        raise ValueError(f"{text!r} is not a size; write bytes or a number with KiB, MiB, GiB")
    value = float(match.group(1)) * _BYTE_UNITS[match.group(2).lower()]
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def parse_duration_s(text: str | int | float) -> float:
    """``"20m"`` -> 1200.0 seconds; a bare number is seconds.

    Raises:
        ValueError: the text is not a number with a known time unit.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, (int, float)):
        return float(text)
    match = _NUMBER_WITH_UNIT.match(str(text))
    if not match or match.group(2).lower() not in _DURATION_UNITS:
        raise ValueError(f"{text!r} is not a duration; write e.g. 90s, 20m or 1h")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


def format_bytes(value: int) -> str:
    """67108864 -> "64 MiB"; exact multiples only, else the plain number."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value and value % size == 0:
            return f"{value // size} {unit}"
    return str(value)


def approx_bytes(value: int) -> str:
    """67108864 -> "64 MiB"; 925344657 -> "882.5 MiB" and 409600000 -> "390.6 MiB" (not "400000 KiB"): a size as a
    person reads it, exact when it is a round number of its largest unit; exports keep the exact bytes."""
    exact = format_bytes(value)
    number = exact.split()[0]
    if value < 1024 or (exact != str(value) and int(number) < 1024):
        return exact
    return human_bytes(value)


def human_bytes(value: int | float) -> str:
    """1288490188 -> "1.2 GiB": a measured size as a person reads it (not exact)."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{int(value)} B"
