"""What a system itself says it holds, in the catalog's terms, and the rule that picks the knobs a test changes.

Read from the system, never from what knobtune wrote for it: RocksDB's own OPTIONS file and LOG in the store's
folder, the options kvbench handed LevelDB (LevelDB keeps no record of its own), PostgreSQL's ``pg_settings``,
MariaDB's ``GLOBAL_VARIABLES`` (SHOW VARIABLES), and the settings and JVM arguments a Cassandra node logs as it
starts. ``watch`` reads them in the middle of a run as a trial makes it: right after the driver ran the workload (an
embedded store before its settle reopens it, a server while it is still up under the config).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knobtune.errors import ConfigError
from knobtune.knobs import Catalog, Knob, KnobType, Value, spell_value
from knobtune.units import parse_bytes, parse_duration_s
from knobtune.targets import Target
from knobtune.systems import spelling_of
from knobtune.drivers.embedded import EmbeddedTarget
from knobtune.systems.rocksdb.formats import block_cache_logged

# ---------------------------------------------------------------- the knobs a test changes

PER_TYPE = 2  # knobs of each type (int, float, bool, enum, bytes, duration) a pair's changed config sets

# Knobs a system keeps no record of: the rule passes them over, and this says why.
CANNOT_READ = {
    "rocksdb": {"disable_wal": "a WriteOptions field, given with each write: no OPTIONS file or LOG line holds it"},
}


def changed_config(catalog: Catalog, driver: str, impossible: Mapping[str, tuple[Value, ...]] | None = None,
                   per_type: int = PER_TYPE) -> dict[str, Value]:
    """The knobs a test sets to other values than their defaults, by one rule for every (system, driver): the first
    ``per_type`` knobs of each type, in the catalog's order, that are tunable, that the driver can set (its own
    knobs, those only it can set, first) and that the system records (``CANNOT_READ``), each at the first of its
    candidate values (``_candidates``) that is safe, possible on this machine and keeps the config valid under the
    catalog's conditions, relations and implications, together with the knobs picked before it."""
    spelling = spelling_of(catalog.system, driver)
    skipped = CANNOT_READ.get(catalog.system, {})
    eligible = [knob for knob in catalog.knobs.values()
                if knob.tunable and knob.settable_by(driver) and knob.supports(spelling) and knob.name not in skipped]
    own_first = sorted(eligible, key=lambda knob: driver not in knob.drivers)  # stable: the catalog's order within
    changes: dict[str, Value] = {}
    for knob in own_first:
        if sum(catalog.knobs[name].type is knob.type for name in changes) >= per_type:
            continue
        for value in _candidates(knob):
            if _fits(catalog, knob, value, changes, (impossible or {}).get(knob.name, ())):
                changes[knob.name] = value
                break
    return catalog.config(changes)


def _candidates(knob: Knob) -> list[Value]:
    """Values of ``knob`` other than its default, nearest first: the other boolean; the enum's other choices; twice
    and half a positive default; the range's lower end and its middle."""
    if knob.type is KnobType.BOOL:
        return [not knob.default]
    if knob.type is KnobType.ENUM:
        return list(knob.choices)
    low, high = knob.bounds
    whole = knob.type in (KnobType.INT, KnobType.BYTES)
    numbers = [2 * knob.default, knob.default / 2] if knob.default not in knob.special and knob.default > 0 else []
    numbers += [low, (low + high) / 2]
    return [int(n) if whole else float(n) for n in numbers]


def _fits(catalog: Catalog, knob: Knob, value: Value, changes: Mapping[str, Value],
          impossible: tuple[Value, ...]) -> bool:
    if value == knob.default or value in knob.special or value in impossible or knob.is_unsafe(value):
        return False
    try:
        knob.check(value)
        config = catalog.config({**changes, knob.name: value})
    except ConfigError:
        return False
    return knob.name in catalog.changed(config)


def same(knob: Knob, held: object, value: Value) -> bool:
    """Whether the system holds ``value`` of ``knob`` (numbers to a millionth: a float printed with six digits)."""
    if knob.is_numeric and isinstance(held, (int, float)) and not isinstance(held, bool):
        return math.isclose(float(held), float(value), rel_tol=1e-6, abs_tol=1e-9)
    return held == value


# ---------------------------------------------------------------- reading a system while a run goes

Call = Mapping[str, Any]  # the arguments of the target's hook, by name


@dataclass(frozen=True)
class Readback:
    """How to read one system: what is read (for messages) and the reading, knob -> value held (in the catalog's
    terms; the system's own text where it does not read as one). A knob it does not find is not in the result."""

    source: str
    read: Callable[[Target, list[str], Call], dict[str, object]]


def watch(target: Target, names: list[str]) -> list[dict[str, object]]:
    """Read ``names`` back from ``target``'s system each time its driver has run the workload, into the list
    returned: after ``run_workload`` of an embedded store (the store as the driver left it, before the settle
    reopens it) or ``benchmark`` of a server (still up under the run's config). Only this one target's method is
    wrapped; what it returns and raises is unchanged."""
    readback = READBACK[target.catalog.system]
    hook = "run_workload" if isinstance(target, EmbeddedTarget) else "benchmark"
    ran_workload = getattr(target, hook)
    signature = inspect.signature(ran_workload)
    readings: list[dict[str, object]] = []

    def then_read(*args: Any, **kwargs: Any) -> Any:
        ran = ran_workload(*args, **kwargs)
        readings.append(readback.read(target, names, signature.bind(*args, **kwargs).arguments))
        return ran

    setattr(target, hook, then_read)
    return readings


def as_catalog_value(knob: Knob, text: str) -> object:
    """``text`` as the system wrote it (a size with a unit or a rate per second, a duration, a number, on/off) in the
    catalog's terms; the text itself when it does not read as one (``null``, say)."""
    try:
        if knob.type is KnobType.BYTES:
            return parse_bytes(text.removesuffix("/s"))
        if knob.type is KnobType.DURATION:
            return parse_duration_s(text)
        return knob.typed(text)
    except (ValueError, ConfigError):
        return text


# ---------------------------------------------------------------- RocksDB: its OPTIONS file and LOG


def options_settings(options: str) -> dict[tuple[str, str], str]:
    """An OPTIONS file's ``key=value`` lines, keyed by (section, key) (comments left out)."""
    settings, section = {}, ""
    for line in options.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            settings[(section, key)] = value
    return settings


def _field(text: str | None, name: str) -> str | None:
    """One field of an OPTIONS struct value (``{id=HashLinkListRepFactory;bucket_count=4096;...}``)."""
    found = re.search(rf"(?:^|[{{;]){name}=([^;}}]*)", text or "")
    return found.group(1) if found else None


def _fixed_prefix(text: str | None) -> str | None:
    if text == "nullptr":
        return "0"
    found = re.fullmatch(r"rocksdb\.FixedPrefix\.(\d+)", text or "")
    return found.group(1) if found else text


def _bloom_bits(text: str | None) -> str | None:
    found = re.fullmatch(r"bloomfilter:([\d.]+):\w+", text or "")
    return str(round(float(found.group(1)))) if found else text


_FACTORIES = {"SkipListFactory": "skip_list", "VectorRepFactory": "vector", "HashSkipListRepFactory": "prefix_hash",
              "HashLinkListRepFactory": "hash_linkedlist"}
_ROW_CACHE = re.compile(r"Options\.row_cache: (\S+)$", re.MULTILINE)

# Knobs that are no plain OPTIONS key as kvbench names them: where RocksDB writes each (its text, as a catalog value).
# options: every key of the file; cache: the block cache as RocksDB logged it; log: the LOG's text.
_ROCKSDB_ELSEWHERE: dict[str, Callable[[Mapping[str, str], Mapping[str, str], str], str | None]] = {
    "cache_size": lambda options, cache, log: cache.get("capacity"),
    "cache_numshardbits": lambda options, cache, log: cache.get("num_shard_bits"),
    "cache_high_pri_pool_ratio": lambda options, cache, log: cache.get("high_pri_pool_ratio"),
    "row_cache_size": lambda options, cache, log: (found.group(1).replace("None", "0")
                                                   if (found := _ROW_CACHE.search(log)) else None),
    "bloom_bits": lambda options, cache, log: _bloom_bits(options.get("filter_policy")),
    "memtablerep": lambda options, cache, log: _FACTORIES.get(_field(options.get("memtable_factory"), "id") or ""),
    "hash_bucket_count": lambda options, cache, log: _field(options.get("memtable_factory"), "bucket_count"),
    "prefix_size": lambda options, cache, log: _fixed_prefix(options.get("prefix_extractor")),
    "universal_size_ratio": lambda options, cache, log: _field(options.get("compaction_options_universal"),
                                                               "size_ratio"),
    "universal_max_size_amplification_percent": lambda options, cache, log: _field(
        options.get("compaction_options_universal"), "max_size_amplification_percent"),
    "fifo_compaction_max_table_files_size_mb": lambda options, cache, log: (
        str(int(size) >> 20) if (size := _field(options.get("compaction_options_fifo"), "max_table_files_size"))
        else None),
}


def rocksdb_held(catalog: Catalog, names: list[str], options_text: str, log: str) -> dict[str, object]:
    """What RocksDB holds of ``names``, read from the OPTIONS file it wrote and its LOG: a plain option under the
    name kvbench gives it (RocksDB's own), its value as kvbench spells it taken back to the catalog's."""
    options = {key: value for (_, key), value in options_settings(options_text).items()}
    cache = block_cache_logged(log) or {}
    held: dict[str, object] = {}
    for name in names:
        knob = catalog.knobs[name]
        if name in _ROCKSDB_ELSEWHERE:
            text = _ROCKSDB_ELSEWHERE[name](options, cache, log)
        else:
            text = options.get(knob.names.get("kvbench") or name)
            unspelled = {spelled: plain for plain, spelled in knob.spell.get("kvbench", {}).items()}
            text = unspelled.get(text, text) if text is not None else None
        if text is not None:
            held[name] = as_catalog_value(knob, text)
    return held


def _rocksdb(target: Target, names: list[str], call: Call) -> dict[str, object]:
    db: Path = call["db_dir"]
    written = sorted(db.glob("OPTIONS-*"))  # numbered as RocksDB numbers its files: the last is this open's
    log = db / "LOG"
    return rocksdb_held(target.catalog, names, written[-1].read_text() if written else "",
                        log.read_text(errors="replace") if log.exists() else "")


# ---------------------------------------------------------------- LevelDB: the options kvbench opened it with


def _leveldb(target: Target, names: list[str], call: Call) -> dict[str, object]:
    result = json.loads(Path(call["log_path"]).with_suffix(".result.json").read_text())
    opened = result.get("options", {})
    knobs = {name: target.catalog.knobs[name] for name in names}
    return {name: as_catalog_value(knob, str(opened[spelled]).lower() if isinstance(opened[spelled], bool)
                                   else str(opened[spelled]))
            for name, knob in knobs.items() if (spelled := knob.names.get("kvbench") or name) in opened}


# ---------------------------------------------------------------- PostgreSQL: pg_settings

_PG_BYTES = {"B": 1, "kB": 1024, "8kB": 8192, "MB": 2**20, "16MB": 16 * 2**20}
_PG_SECONDS = {"ms": 0.001, "s": 1, "min": 60}


def pg_catalog_value(knob: Knob, setting: str, unit: str) -> object:
    """What PostgreSQL says it holds (``setting`` in ``unit``, as pg_settings gives them) as the catalog states
    values: bytes, seconds, booleans, numbers, text."""
    if knob.type is KnobType.BYTES and setting != "-1":
        return int(setting) * _PG_BYTES[unit]
    if knob.type is KnobType.DURATION and setting != "-1":
        return float(setting) * _PG_SECONDS[unit]
    if knob.type is KnobType.BOOL:
        return setting == "on"
    if knob.type in (KnobType.INT, KnobType.FLOAT):
        return float(setting)
    return setting


def pg_held(target: Any, catalog: Catalog, names: list[str], log: Path) -> dict[str, object]:
    """What the running server of ``target`` (a PostgreSQL target) holds of ``names``, from pg_settings."""
    spelled = {catalog.knobs[name].names.get("postgresql") or name: name for name in names}
    listed = ", ".join(f"'{name}'" for name in spelled)
    rows = target._query(f"SELECT string_agg(name || '=' || setting || '=' || coalesce(unit, ''), ';') "
                         f"FROM pg_settings WHERE name IN ({listed})", log)
    return {spelled[name]: pg_catalog_value(catalog.knobs[spelled[name]], setting, unit)
            for name, setting, unit in (row.split("=") for row in rows.split(";") if row)}


def _postgresql(target: Target, names: list[str], call: Call) -> dict[str, object]:
    return pg_held(target, target.catalog, names, Path(call["log_path"]).with_suffix(".settings.log"))


# ---------------------------------------------------------------- MariaDB: SHOW VARIABLES


def mariadb_shown(target: Any, names: list[str], log: Path) -> dict[str, str]:
    """What the running server of ``target`` (MariaDB's described target) shows of ``names``: SHOW VARIABLES, as
    information_schema.GLOBAL_VARIABLES gives it (name in lower case -> text)."""
    listed = ", ".join(f"'{name.upper()}'" for name in names)
    rows = target._sql(f"SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
                       f"WHERE VARIABLE_NAME IN ({listed})", log, "SHOW VARIABLES", all_rows=True)
    return {name.lower(): value for name, value in (row.split("\t", 1) for row in rows)}


def _mariadb(target: Target, names: list[str], call: Call) -> dict[str, object]:
    spelled = {target.catalog.knobs[name].names.get("my-cnf") or name: name for name in names}
    shown = mariadb_shown(target, list(spelled), Path(call["log_path"]).with_suffix(".variables.log"))
    return {spelled[name]: as_catalog_value(target.catalog.knobs[spelled[name]], text)
            for name, text in shown.items() if name in spelled}


# ---------------------------------------------------------------- Cassandra: what the node logged as it started


def node_configuration(logged: str) -> dict[str, str]:
    """The settings a Cassandra node logged as it started (``Node configuration:[name=value; ...]``, the last start
    in the log), as it spells them."""
    starts = re.findall(r"Node configuration:\[(.*)\]", logged)
    return dict(item.strip().split("=", 1) for item in (starts[-1].split(";") if starts else []) if "=" in item)


def jvm_arguments(logged: str) -> list[str]:
    """The JVM's arguments a Cassandra node logged as it started (the last start in the log)."""
    starts = re.findall(r"JVM Arguments: \[(.*)\]", logged)
    return starts[-1].split(", ") if starts else []


def cassandra_held(catalog: Catalog, names: list[str], logged: str) -> dict[str, object]:
    """What the node holds of ``names``: a cassandra.yaml setting from its logged configuration, a JVM knob from the
    JVM's logged arguments."""
    settings, arguments = node_configuration(logged), jvm_arguments(logged)
    held: dict[str, object] = {}
    for name in names:
        knob = catalog.knobs[name]
        text = (settings.get(knob.names.get("cassandra-yaml") or name) if knob.supports("cassandra-yaml")
                else _jvm_value(knob, arguments))
        if text is not None:
            held[name] = as_catalog_value(knob, text)
    return held


def _jvm_value(knob: Knob, arguments: list[str]) -> str | None:
    """A JVM knob's value among the JVM's arguments: the choice whose option is there (``-XX:+UseG1GC``), or the
    number after the option's name (``-Xmx805306368``)."""
    option = knob.names["jvm"]
    if knob.type is KnobType.ENUM:
        return next((choice for choice in knob.choices if option + spell_value(knob, choice, "jvm") in arguments),
                    None)
    return next((rest for argument in arguments
                 if argument.startswith(option) and (rest := argument.removeprefix(option)).isdigit()), None)


def _cassandra(target: Target, names: list[str], call: Call) -> dict[str, object]:
    from knobtune.systems.cassandra.node import system_log

    node = target.scratch_dir / "node" / "run"  # the node's folder a run restores (ServerTarget._restore)
    return cassandra_held(target.catalog, names, system_log(node).read_text(errors="replace"))


READBACK = {
    "rocksdb": Readback("the OPTIONS file and LOG RocksDB wrote in the store's folder", _rocksdb),
    "leveldb": Readback("the options kvbench reports it opened LevelDB with", _leveldb),
    "postgresql": Readback("pg_settings of the running server", _postgresql),
    "mariadb": Readback("SHOW VARIABLES of the running server", _mariadb),
    "cassandra": Readback("the settings and JVM arguments the node logged as it started", _cassandra),
}
