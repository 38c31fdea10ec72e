"""The formats a config is exported in: each system's own file, each driver's spelling.

A format belongs to a system (RocksDB's OPTIONS file, whatever driver ran the
study) or to a driver (kvbench's option map); a target lists the formats its
studies export to (``Target.formats``). The CLI and the report ask for a
format by name and never know which system or driver it came from.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from knobtune.errors import ConfigError, ToolMissingError
from knobtune.knobs import Catalog, Knob, KnobType, Value, render_flags, render_named, spell_value
from knobtune.targets._process import run_logged


_ROCKSDB_ERROR = re.compile(r"error|Invalid argument|Not supported|should be", re.IGNORECASE)


@dataclass(frozen=True)
class ExportFormat:
    name: str
    description: str
    comment: str | None  # how the format starts a comment line (notes go on top), None: it has none
    render: Callable[[Catalog, Mapping[str, Value]], str]


def _rocksdb_options(catalog: Catalog, config: Mapping[str, Value]) -> str:
    """The OPTIONS file RocksDB itself writes when opened under ``config`` (through db_bench, one key).

    Raises:
        ConfigError: RocksDB refused the config.
        ToolMissingError: db_bench is not installed.
    """
    binary = shutil.which("db_bench")
    if binary is None:
        raise ToolMissingError("db_bench is not installed (it writes RocksDB's OPTIONS file). "
                               "Fix: install it with `apt-get install rocksdb-tools` (the README's set-up does this)")
    with tempfile.TemporaryDirectory(prefix="knobtune-options-") as tmp:
        db_dir, log = Path(tmp) / "db", Path(tmp) / "log"
        argv = [binary, f"--db={db_dir}", "--benchmarks=fillseq", "--num=1", "--progress_reports=false",
                *render_flags(catalog, config, "db_bench")]
        result = run_logged(argv, log_path=log, timeout_s=60)
        written = sorted(db_dir.glob("OPTIONS-*"))
        if result.returncode != 0 or not written:
            lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
            said = [line for line in lines if _ROCKSDB_ERROR.search(line)] or lines[-2:]
            raise ConfigError(f"cannot write an OPTIONS file for this config (RocksDB said: "
                              f"{' | '.join(said[-2:])[-300:]}). Fix: export a config that ran, e.g. the study's result")
        options = written[-1].read_text()
    return _options_header(catalog.changed(config)) + options


def _options_header(changed: Mapping[str, Value]) -> str:
    lines = ["# Written by RocksDB 7.8 itself for this configuration (knobtune export --format rocksdb-options).",
             "# Load it with rocksdb::LoadOptionsFromFile or db_bench --options_file=FILE."]
    if "cache_size" in changed:
        lines.append(f"# Not representable in an OPTIONS file: block cache of {changed['cache_size']} bytes; "
                     "set BlockBasedTableOptions::block_cache = NewLRUCache(...) in code.")
    if "row_cache_size" in changed:
        lines.append(f"# Not representable in an OPTIONS file: row cache of {changed['row_cache_size']} bytes; "
                     "set DBOptions::row_cache = NewLRUCache(...) in code.")
    return "\n".join(lines) + "\n"


ROCKSDB_OPTIONS = ExportFormat("rocksdb-options", "RocksDB's own OPTIONS file, written by RocksDB", "#",
                               _rocksdb_options)
DB_BENCH_FLAGS = ExportFormat("db_bench-flags", "db_bench command-line flags", None,
                              lambda catalog, config: " ".join(render_flags(catalog, config, "db_bench")) + "\n")
KVBENCH_CONFIG = ExportFormat("kvbench-config", "the option map kvbench takes (JSON)", None,
                              lambda catalog, config: json.dumps(render_named(catalog, config, "kvbench"), indent=2) + "\n")

def postgresql_settings(catalog: Catalog, config: Mapping[str, Value]) -> dict[str, str]:
    """The changed settings as PostgreSQL reads them, with units: sizes in kB, times in ms, booleans on/off.

    A bare number would be read in the setting's own base unit (8 kB pages for shared_buffers), so every
    size and time carries its unit; a special value (-1 = auto) is written as it is.
    """
    return _with_units(catalog, config, "postgresql", lambda knob, size: f"{max(size // 1024, 1)}kB", ("on", "off"),
                       plain_specials=True)


def _with_units(catalog: Catalog, config: Mapping[str, Value], fmt: str, size: Callable[[Knob, int], str],
                booleans: tuple[str, str], plain_specials: bool) -> dict[str, str]:
    """The changed knobs ``fmt`` can set, as text: sizes by ``size``, durations in ms, booleans as ``booleans``."""
    settings = {}
    for name, value in sorted(catalog.changed(config).items()):
        knob = catalog.knobs[name]
        if not knob.supports(fmt):
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
            settings[name] = spell_value(knob, value, fmt)
    return settings


def _postgresql_conf(catalog: Catalog, config: Mapping[str, Value]) -> str:
    lines = ["# PostgreSQL settings written by knobtune; include this file from postgresql.conf:",
             "#   include 'knobtune.conf'"]
    lines += [f"{name} = '{text}'" for name, text in postgresql_settings(catalog, config).items()]
    return "\n".join(lines) + "\n"


def _alter_system(catalog: Catalog, config: Mapping[str, Value]) -> str:
    settings = postgresql_settings(catalog, config)
    restart = sorted(n for n in settings if catalog.knobs[n].restart)
    lines = ["-- PostgreSQL settings written by knobtune: run with psql as a superuser."]
    lines += [f"ALTER SYSTEM SET {name} = '{text}';" for name, text in settings.items()]
    lines.append("SELECT pg_reload_conf();")
    if restart:
        lines.append(f"-- these take effect only after a restart: {', '.join(restart)}")
    return "\n".join(lines) + "\n"


POSTGRESQL_CONF = ExportFormat("postgresql-conf", "a postgresql.conf include file, with units", "#", _postgresql_conf)
ALTER_SYSTEM = ExportFormat("alter-system", "ALTER SYSTEM statements for psql", "--", _alter_system)

def cassandra_yaml_settings(catalog: Catalog, config: Mapping[str, Value]) -> dict[str, str]:
    """The changed cassandra.yaml settings as Cassandra 5.0 reads them: sizes with a unit (MiB, KiB, B; a rate
    with /s), durations in ms, booleans true/false. A value left at its default is not written."""
    return _with_units(catalog, config, "cassandra-yaml",
                       lambda knob, size: _cassandra_size(size) + ("/s" if knob.unit == "bytes/s" and size >= 0 else ""),
                       ("true", "false"), plain_specials=False)


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


CASSANDRA_YAML = ExportFormat("cassandra-yaml", "cassandra.yaml settings, with Cassandra 5.0's units", "#",
                              _cassandra_yaml)
CASSANDRA_JVM = ExportFormat("jvm-options", "JVM options (heap, garbage collector) for conf/jvm17-server.options", "#",
                             _cassandra_jvm)

SYSTEM_FORMATS: dict[str, tuple[ExportFormat, ...]] = {"rocksdb": (ROCKSDB_OPTIONS, DB_BENCH_FLAGS),
                                                       "postgresql": (POSTGRESQL_CONF, ALTER_SYSTEM),
                                                       "cassandra": (CASSANDRA_YAML, CASSANDRA_JVM)}
