"""Turn a configuration into the text a system reads: flags, option names.

A *spelling* is a key of the catalog's ``formats`` list (``db_bench``, ``kvbench``, ``postgresql-conf``, ...):
how one driver or config file names a knob (``names``) and writes its values (``spell``).
"""

from __future__ import annotations

from collections.abc import Mapping

from knobtune.errors import ConfigError
from knobtune.knobs.knob import Knob, KnobType, Value
from knobtune.knobs.model import Catalog


def spell_value(knob: Knob, value: Value, spelling: str) -> str:
    """How ``spelling`` writes ``value`` of ``knob`` (``compaction_style=fifo`` -> ``2`` for db_bench)."""
    text = str(value).lower() if knob.type is KnobType.BOOL else _plain(value)
    return knob.spell.get(spelling, {}).get(text, text)


def render_flags(catalog: Catalog, config: Mapping[str, Value], spelling: str = "db_bench") -> list[str]:
    """``--name=value`` for every knob that differs from the default and applies under ``config``.

    The list goes straight into an argv: knob values never pass through a shell.
    """
    changed = catalog.changed(config)
    return [f"--{catalog.knobs[name].names.get(spelling, name)}={spell_value(catalog.knobs[name], value, spelling)}"
            for name, value in sorted(changed.items())]


def render_named(catalog: Catalog, config: Mapping[str, Value], spelling: str) -> dict[str, str]:
    """``{name-as-spelling-names-it: value-as-text}`` for the changed knobs.

    Raises:
        ConfigError: a changed knob that ``spelling`` cannot express.
    """
    changed = catalog.changed(config)
    _check_expressible(catalog, changed, spelling)
    return {catalog.knobs[name].names.get(spelling, name): spell_value(catalog.knobs[name], value, spelling)
            for name, value in sorted(changed.items())}


def render_every(catalog: Catalog, config: Mapping[str, Value], spelling: str) -> dict[str, str]:
    """Like ``render_named``, but every knob ``spelling`` can express that applies under ``config``, at its default
    too: for a driver whose system, left alone, would not run the catalog's defaults (kvbench opens RocksDB with the
    library's own, where the catalog holds db_bench's). A knob absent from ``config`` holds its default. A knob that
    only some drivers can set (``drivers``) is named only when changed: any other driver runs its built-in value,
    which is its default.

    Raises:
        ConfigError: a changed knob that ``spelling`` cannot express.
    """
    full = {**catalog.defaults(), **config}
    _check_expressible(catalog, catalog.changed(full), spelling)
    every = {name: value for name, value in full.items()
             if catalog.knobs[name].supports(spelling) and catalog.knobs[name].applies(full)
             and (not catalog.knobs[name].drivers or value != catalog.knobs[name].default)}
    return {catalog.knobs[name].names.get(spelling, name): spell_value(catalog.knobs[name], value, spelling)
            for name, value in sorted(every.items())}


def _check_expressible(catalog: Catalog, changed: Mapping[str, Value], spelling: str) -> None:
    unsupported = [name for name in changed if not catalog.knobs[name].supports(spelling)]
    if unsupported:
        them = "them" if len(unsupported) > 1 else "it"
        raise ConfigError(f"{', '.join(unsupported)} cannot be set through {spelling}. "
                          f"Fix: leave {them} at the default, or use another driver")


def check_driver(catalog: Catalog, config: Mapping[str, Value], driver: str) -> None:
    """Raises ConfigError when ``config`` changes a knob that only other drivers can set (catalog field ``drivers``)."""
    blocked = catalog.needs_other_driver(config, driver)
    if blocked:
        needed = sorted({d for drivers in blocked.values() for d in drivers})
        raise ConfigError(f"{', '.join(sorted(blocked))} can be set only through driver {' or '.join(needed)}, not "
                          f"{driver}. Fix: add --driver {needed[0]}, or leave "
                          f"{'them' if len(blocked) > 1 else 'it'} at the default")


def _plain(value: Value) -> str:
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) or abs(value) >= 1e-4 else repr(value)
    return str(value)
