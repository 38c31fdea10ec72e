"""Cassandra's own formats: cassandra.yaml settings (Cassandra 5.0's names and units) and JVM options.

Each holds its half of a config: the heap and the garbage collector are JVM
options, every other knob a cassandra.yaml setting. An export of one whose
config changes the other's writes the other file beside it and says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from knobtune.knobs import Catalog, Knob, Value, spell_value
from knobtune.targets import Beside, ExportFormat, settings_with_units


def cassandra_yaml_settings(catalog: Catalog, config: Mapping[str, Value]) -> dict[str, str]:
    """The changed cassandra.yaml settings as Cassandra 5.0 reads them: sizes with a unit (MiB, KiB, B; a rate
    with /s), durations in ms, booleans true/false. A value left at its default is not written."""
    def size_text(knob: Knob, size: int) -> str:
        return _cassandra_size(size) + ("/s" if knob.unit == "bytes/s" and size >= 0 else "")

    return settings_with_units(catalog, config, "cassandra-yaml", size_text, ("true", "false"), plain_specials=False)


def cassandra_jvm_flags(catalog: Catalog, config: Mapping[str, Value]) -> list[str]:
    """The java command line's arguments for every JVM knob that applies (a special value: the JVM's own default).

    The heap's maximum (-Xmx) is also its initial size (-Xms), as Cassandra's own scripts set it.
    """
    flags = []
    for name, knob in catalog.knobs.items():
        value = config[name]
        if knob.supports("jvm") and knob.applies(config) and value not in knob.special:
            flags.append(knob.names["jvm"] + spell_value(knob, value, "jvm"))
            if knob.names["jvm"] == "-Xmx":
                flags.append("-Xms" + spell_value(knob, value, "jvm"))
    return flags


def _cassandra_size(size: int) -> str:
    """A size in the largest unit Cassandra takes that keeps it whole enough: MiB from 1 MiB up, then KiB, then B.

    0 is written 0MiB (fields bound in MiB refuse 0B); a negative special value (disabled, unset) is null, as
    Cassandra 5.0 spells it.
    """
    if size < 0:
        return "null"
    if size == 0:
        return "0MiB"
    if size >= 2**20:
        return f"{round(size / 2**20)}MiB"
    if size >= 2**10:
        return f"{round(size / 2**10)}KiB"
    return f"{size}B"


def _cassandra_yaml(catalog: Catalog, config: Mapping[str, Value]) -> str:
    lines = ["# cassandra.yaml settings written by knobtune (Cassandra 5.0 names and units): merge into cassandra.yaml"]
    lines += [f"{name}: {text}" for name, text in cassandra_yaml_settings(catalog, config).items()]
    return "\n".join(lines) + "\n"


def _cassandra_jvm(catalog: Catalog, config: Mapping[str, Value]) -> str:
    lines = ["# JVM options written by knobtune: one per line, as conf/jvm17-server.options takes them"]
    lines += cassandra_jvm_flags(catalog, config)
    return "\n".join(lines) + "\n"


def _jvm_beside(catalog: Catalog, config: Mapping[str, Value]) -> tuple[Beside, ...]:
    """The JVM options file beside a cassandra.yaml export whose config changes a JVM knob."""
    changed = sorted(name for name in catalog.changed(config) if catalog.knobs[name].supports("jvm"))
    if not changed:
        return ()
    return (Beside(f"{', '.join(changed)}: JVM options, not cassandra.yaml settings; FILE.jvm-options beside it "
                   "holds them (for conf/jvm17-server.options)", ".jvm-options", _cassandra_jvm(catalog, config)),)


def _yaml_beside(catalog: Catalog, config: Mapping[str, Value]) -> tuple[Beside, ...]:
    """The cassandra.yaml settings beside a JVM options export whose config changes a cassandra.yaml knob."""
    changed = list(cassandra_yaml_settings(catalog, config))
    if not changed:
        return ()
    return (Beside(f"{', '.join(changed)}: cassandra.yaml settings, not JVM options; FILE.cassandra.yaml beside it "
                   "holds them", ".cassandra.yaml", _cassandra_yaml(catalog, config)),)


CASSANDRA_YAML = ExportFormat("cassandra-yaml", "cassandra.yaml settings, with Cassandra 5.0's units", "#",
                              _cassandra_yaml, _jvm_beside)
CASSANDRA_JVM = ExportFormat("jvm-options", "JVM options (heap, garbage collector) for conf/jvm17-server.options", "#",
                             _cassandra_jvm, _yaml_beside)
FORMATS = (CASSANDRA_YAML, CASSANDRA_JVM)
