"""What an export format is; each system's and each driver's formats live with it (``systems/SYSTEM/formats.py``).

A format belongs to a system (RocksDB's OPTIONS file, whatever driver ran the
study) or to a driver (kvbench's option map); the registry lists the formats a
study exports to (``export_formats``). The CLI and the report ask for a format
by name and never know which system or driver it came from.

What a format cannot hold is never dropped without a word: its ``beside``
says, per config, what the file leaves out and gives the file to write beside
it that sets it (code, or the system's other format), and the export says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from knobtune.knobs import Catalog, Knob, KnobType, Value, spell_value


@dataclass(frozen=True)
class Beside:
    """Part of a config that an export format cannot hold, and the file beside the export that sets it."""

    note: str  # one line: what the file leaves out and where it is instead
    suffix: str  # the file beside: the export's own name + this ("OPTIONS.ini" -> "OPTIONS.ini.cc")
    text: str  # what that file holds
    comment: str = "#"  # how that file's format starts a comment line (its first line says knobtune wrote it)


def _nothing_beside(catalog: Catalog, config: Mapping[str, Value]) -> tuple[Beside, ...]:
    return ()


@dataclass(frozen=True)
class ExportFormat:
    name: str
    description: str
    comment: str | None  # how the format starts a comment line (notes go on top), None: it has none
    render: Callable[[Catalog, Mapping[str, Value]], str]
    beside: Callable[[Catalog, Mapping[str, Value]], tuple[Beside, ...]] = _nothing_beside  # what it cannot hold


def settings_with_units(catalog: Catalog, config: Mapping[str, Value], spelling: str,
                        size: Callable[[Knob, int], str], booleans: tuple[str, str],
                        plain_specials: bool) -> dict[str, str]:
    """The changed knobs ``spelling`` can set, as text: sizes by ``size``, durations in ms, booleans as ``booleans``.

    A special value is written as it is when ``plain_specials``; otherwise ``size`` spells it too.
    """
    settings = {}
    for name, value in sorted(catalog.changed(config).items()):
        knob = catalog.knobs[name]
        if not knob.supports(spelling):
            continue
        if plain_specials and value in knob.special:
            settings[name] = str(value)
        elif knob.type is KnobType.BYTES:
            settings[name] = size(knob, int(value))
        elif knob.type is KnobType.DURATION:
            settings[name] = f"{round(float(value) * 1000)}ms"
        elif knob.type is KnobType.BOOL:
            settings[name] = booleans[0] if value else booleans[1]
        else:
            settings[name] = spell_value(knob, value, spelling)
    return settings
