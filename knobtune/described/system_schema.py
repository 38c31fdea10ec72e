"""A system file's schema (docs/system-file.md): every table and field it may hold, typed, read through the one
reader (``knobtune.schema``): an unknown field at any depth is refused with the nearest name, a wrong type, an
empty command or a value out of range in one line naming the field and the fix. What a field's value must agree
with (a placeholder the commands may use, a format the catalog has, a knob the catalog has) ``system_file`` checks
next."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knobtune.schema import TEXT, required, section, setting, table

DOCS = "docs/system-file.md"
STOP_NAMES = ("SIGTERM", "SIGINT", "SIGQUIT")  # the signals a clean stop may send
ARGV = {"items": "argv", "example": ["/usr/bin/prog", "--socket={socket}"]}
STATEMENTS = {"items": "statements", "example": ["STATEMENT"]}
SECONDS = {"positive": True, "most": 86400.0}


@dataclass(frozen=True, kw_only=True)
class Command:
    """A command knobtune runs: its argv, the program first, without a shell."""

    argv: tuple[str, ...] = required(**ARGV)


@dataclass(frozen=True, kw_only=True)
class Version:
    """How to ask the system its version: the argv, and a pattern whose group is the version."""

    argv: tuple[str, ...] = required(**ARGV)
    pattern: str = required(**TEXT, example="Ver (\\S+)")


@dataclass(frozen=True, kw_only=True)
class Config:
    """How a config reaches the server: a file in one of the export formats, or one argv flag per changed knob."""

    format: str | None = setting(None, **TEXT, example="my-conf")
    flag: str | None = setting(None, **TEXT, example="--{name}={value}")


@dataclass(frozen=True, kw_only=True)
class Load:
    """Statements run once before the workload's load."""

    sql: tuple[str, ...] = setting((), **STATEMENTS)


@dataclass(frozen=True, kw_only=True)
class Wait:
    """A query polled after the settle's statements until it answers ``equals``."""

    sql: str = required(**TEXT, example="SELECT ...")
    equals: str = setting("0", example="0")
    poll_s: float = setting(0.2, positive=True, most=10.0, example=0.2)


@dataclass(frozen=True, kw_only=True)
class Settle:
    """After the crash recovery: statements that start the flush, and the query that says it is done."""

    sql: tuple[str, ...] = setting((), **STATEMENTS)
    wait: Wait | None = None
    dirty_sql: str | None = setting(None, **TEXT, example="SELECT ...")


@dataclass(frozen=True, kw_only=True)
class ReadCounters:
    """One query answering (name, number) rows; ``names`` maps our counter names to the system's."""

    sql: str = required(**TEXT, example="SELECT name, value FROM ...")
    names: Mapping[str, str] = required(**TEXT, example="System_Name")
    levels: tuple[str, ...] = setting((), example=["pages_dirty_at_end"])


@dataclass(frozen=True, kw_only=True)
class Durability:
    """The crash check: a ledger table gains one row per commit (``{n}``); after a kill and recovery, count it."""

    setup: tuple[str, ...] = setting((), **STATEMENTS)
    commit: str = required(**TEXT, example="INSERT INTO ledger VALUES ({n})")
    count: str = required(**TEXT, example="SELECT COUNT(*) FROM ledger")


@dataclass(frozen=True, kw_only=True)
class Driver:
    """What a workload's ``{connection}`` stands for with this driver."""

    connection: tuple[str, ...] = required(items="argv", example=["--host={socket}"])


@dataclass(frozen=True, kw_only=True)
class Format:
    """An export format: a file of ``line`` lines after ``header``, knob names in a catalog's ``spelling``."""

    name: str = required(**TEXT, example="my-conf")
    description: str | None = setting(None, **TEXT, example="a config file fragment")
    spelling: str | None = setting(None, **TEXT, example="my-conf")
    comment: str | None = setting(None, example="#")
    header: tuple[str, ...] = setting((), items="lines", example=["[server]"])
    line: str = setting("{name} = {value}", **TEXT, example="{name} = {value}")
    booleans: tuple[str, ...] = setting(("ON", "OFF"), items="lines", example=["ON", "OFF"])


@dataclass(frozen=True, kw_only=True)
class Known:
    """A known starting config: its values (numbers, text, or expressions over the machine) and their source."""

    label: str = required(**TEXT, example="vendor-guide")
    source: str = required(**TEXT, example="the vendor's tuning guide (https://...)")
    values: Mapping[str, Any] = required(example="0.65 * memory_bytes")


@dataclass(frozen=True, kw_only=True)
class SystemDocument:
    """A system file as written: a server knobtune runs from data (docs/system-file.md)."""

    name: str = required(pattern=r"[a-z][a-z0-9_-]*", what="a plain lower-case name (letters, digits, - and _)",
                         example="mydb")
    label: str | None = setting(None, **TEXT, example="MyDB")
    description: str | None = setting(None, **TEXT, example="MyDB 1.2 as a scratch server")
    catalog: str = required(**TEXT, example="catalog.toml")
    rules: str | None = setting(None, **TEXT, example="rules.toml")
    counters: str | None = setting(None, **TEXT, example="counters.toml")
    user: str | None = setting(None, pattern=r"\S+", what="a user name", example="dbuser",
                               note="or leave it out: knobtune's own")
    noun: str = setting("server", **TEXT, example="server")
    install: str = setting("install the system's packages", **TEXT, example="apt-get install mydb-server")
    tools: tuple[str, ...] = setting((), pattern="/.*", what="an absolute path", example=["/usr/sbin/mydbd"])
    default_driver: str | None = setting(None, **TEXT, example="sysbench")
    ready_limit_s: float = setting(120.0, **SECONDS, example=120)
    stop_limit_s: float = setting(60.0, **SECONDS, example=60)
    clean_stop: str = setting("SIGTERM", choices=STOP_NAMES, what="a signal knobtune stops servers with")
    version: Version = required()
    paths: Mapping[str, str] = table(**TEXT, example="{home}/server.sock")
    init: Command = required()
    start: Command = required()
    config: Config = required()
    ready: Command = required()
    sql: Command = required()
    load: Load = section(Load)
    settle: Settle = section(Settle)
    read_counters: ReadCounters | None = None
    durability: Durability | None = None
    drivers: Mapping[str, Driver] = required()
    formats: tuple[Format, ...] = ()
    known: tuple[Known, ...] = ()
