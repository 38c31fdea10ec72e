"""A system described as data: a system file (TOML) read and checked into what the server life needs.

A system file says, for a server knobtune ships no package for: its catalog
(and rules and counters) beside it, how to make a data folder, the argv that
starts the server in the foreground as knobtune's child (and as which user),
how to tell it answers, how a config reaches it (a file in one of its export
formats, or one argv flag per changed knob), how to run one SQL statement, what
to run once before a workload's load, how to settle after a crash, which
counters to read, how to check that acknowledged commits survive a kill, its
known starting configs and its export formats. docs/system-file.md is the
reference, with a complete example; ``described/target.py`` runs it.

Every command is an argv list run without a shell. A placeholder (``{socket}``)
fills part of one argv element, or, when it is the whole element, may stand
for several (``{connection}``): a value never splits or joins elements.
Validated on load: every error is one line naming the file, the field and the
fix.
"""

from __future__ import annotations

import re
import signal
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpleeval import SimpleEval

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError, KnobtuneError
from knobtune.names import nearest
from knobtune.knobs import Catalog, KnobType, Value, load_catalog, render_named
from knobtune.targets._formats import ExportFormat

PLACES = ("home", "data", "config_file")  # what every command may name, besides the file's own [paths]
SQL_PLACE = "sql"  # the statement, in [sql].argv only
STOPS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGQUIT": signal.SIGQUIT}
MACHINE_NAMES = ("memory_bytes", "cores")  # what a known config's values may be computed from
_TOP = ("name", "label", "description", "catalog", "rules", "counters", "user", "noun", "install", "tools",
        "default_driver", "ready_limit_s", "stop_limit_s", "clean_stop", "version", "paths", "init", "start",
        "config", "ready", "sql", "load", "settle", "read_counters", "durability", "drivers", "formats", "known")


@dataclass(frozen=True)
class SettleSpec:
    """After the crash recovery: statements that start the flush, and a query polled until it answers ``equals``."""

    sql: tuple[str, ...] = ()
    wait_sql: str | None = None
    equals: str = "0"
    poll_s: float = 0.2
    dirty_sql: str | None = None  # the write-ahead log the restart will replay, in bytes, read before the kill


@dataclass(frozen=True)
class CountersSpec:
    """One query answering (name, number) rows; ``names`` maps our counter names to the system's."""

    sql: str
    names: Mapping[str, str]  # our name -> the system's name, as the query spells it
    levels: frozenset[str] = frozenset()  # ours read at the end of the run, not as a difference over it


@dataclass(frozen=True)
class DurabilitySpec:
    """The crash check: a ledger table gains one row per commit (``{n}``); after a kill and recovery, count it."""

    setup: tuple[str, ...]
    commit: str
    count: str


@dataclass(frozen=True)
class KnownSpec:
    """A known starting config: values (numbers, text, or expressions over the machine) and where they come from."""

    label: str
    source: str
    values: Mapping[str, Any]


@dataclass(frozen=True)
class SystemFile:
    path: Path
    name: str
    label: str
    description: str
    catalog_path: Path
    rules: Path | None
    counters_doc: Path | None
    user: str | None
    noun: str
    install: str
    tools: tuple[str, ...]
    default_driver: str
    drivers: Mapping[str, tuple[str, ...]]  # driver -> the connection argv elements its workload sections name
    paths: Mapping[str, str]
    init: tuple[str, ...]
    start: tuple[str, ...]
    ready: tuple[str, ...]
    sql: tuple[str, ...]
    version_argv: tuple[str, ...]
    version_pattern: str
    config_format: str | None = None  # the config is written as this export format into {config_file}
    config_flag: str | None = None  # or each changed knob is one argv element: "--{name}={value}"
    load_sql: tuple[str, ...] = ()
    settle: SettleSpec = field(default_factory=SettleSpec)
    counters: CountersSpec | None = None
    durability: DurabilitySpec | None = None
    formats: tuple[ExportFormat, ...] = ()
    known: tuple[KnownSpec, ...] = ()
    ready_limit_s: float = 120.0
    stop_limit_s: float = 60.0
    clean_stop: int = signal.SIGTERM

    def format(self, name: str) -> ExportFormat:
        return next(f for f in self.formats if f.name == name)


def fill(template: Sequence[str], values: Mapping[str, str | Sequence[str]]) -> list[str]:
    """``template`` with its placeholders filled: an element that is one placeholder of a list value becomes the
    list's elements; any other placeholder fills its part of one element. Never a shell, never a split.

    Raises:
        KnobtuneError: a placeholder has no value (a system file is checked on load, so this is our bug).
    """
    argv: list[str] = []
    for element in template:
        whole = re.fullmatch(r"\{(\w+)\}", element)
        if whole and not isinstance(values.get(whole.group(1)), str) and whole.group(1) in values:
            argv.extend(str(v) for v in values[whole.group(1)])
            continue

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in values or not isinstance(values[name], str):
                raise KnobtuneError(f"'{{{name}}}' in {element!r} has no single value here")
            return values[name]  # type: ignore[return-value]

        argv.append(re.sub(r"\{(\w+)\}", one, element))
    return argv


def placeholders(template: Sequence[str] | str) -> set[str]:
    """The placeholder names a template uses."""
    texts = [template] if isinstance(template, str) else template
    return {name for text in texts for _, name, _, _ in string.Formatter().parse(text) if name}


def load_system_file(path: Path) -> SystemFile:
    """Read and check a system file.

    Raises:
        CatalogError: one line naming the file, the field and the fix.
    """
    path = path.resolve()
    data = read_toml(path, CatalogError, "system file")
    check = _Checker(path, data)
    return check.system()


class _Checker:
    """Reads one system file's fields, each checked as it is read."""

    def __init__(self, path: Path, data: Mapping[str, Any]) -> None:
        self.path, self.data = path, data

    def fail(self, where: str, problem: str, fix: str) -> CatalogError:
        return CatalogError(f"{self.path}: {where}: {problem}. Fix: {fix}")

    def text(self, table: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
        value = table.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, "missing" if value is None else f"must be text (got {value!r})",
                            f"write {key.split('.')[-1]} = \"...\"")
        return value

    def argv(self, table: Mapping[str, Any], key: str, where: str, allowed: set[str]) -> tuple[str, ...]:
        value = table.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(where, "must be a non-empty list of text, the program first",
                            "write it as an argv list, e.g. [\"/usr/bin/prog\", \"--flag={socket}\"]")
        self.known_places(value, where, allowed)
        return tuple(value)

    def known_places(self, template: Sequence[str] | str, where: str, allowed: set[str]) -> None:
        try:
            unknown = placeholders(template) - allowed
        except ValueError as exc:
            raise self.fail(where, f"a placeholder is malformed ({exc})", "write placeholders as {name}") from None
        if unknown:
            raise self.fail(where, f"names unknown placeholder {{{sorted(unknown)[0]}}}",
                            f"use one of {', '.join('{' + p + '}' for p in sorted(allowed))}")

    def sql_list(self, table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.fail(where, "must be SQL text or a list of it", f"write {key} = [\"STATEMENT\", ...]")
        return tuple(value)

    def table(self, key: str, required: bool = True) -> Mapping[str, Any]:
        value = self.data.get(key)
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            raise self.fail(f"[{key}]", "missing" if value is None else "must be a table",
                            f"add a [{key}] table (docs/system-file.md)")
        return value

    def beside(self, key: str, required: bool) -> Path | None:
        if key not in self.data and not required:
            return None
        file = self.path.parent / self.text(self.data, key, key)
        if not file.exists():
            raise self.fail(key, f"{file} does not exist", f"give a path relative to {self.path.parent}")
        return file

    def system(self) -> SystemFile:
        d = self.data
        unknown = sorted(set(d) - set(_TOP))
        if unknown:
            raise self.fail(unknown[0], f"is not a field of a system file{nearest(unknown[0], _TOP)}",
                            f"use one of {', '.join(_TOP)}")
        name = self.text(d, "name", "name")
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
            raise self.fail("name", f"'{name}' is not a plain lower-case name", "use letters, digits, - and _")
        catalog_path = self.beside("catalog", required=True)
        catalog = load_catalog(catalog_path)  # type: ignore[arg-type]
        if catalog.system != name:
            raise self.fail("catalog", f"{catalog_path} is the catalog of '{catalog.system}'",
                            f"set system = \"{name}\" in it, or name this system '{catalog.system}'")
        paths = self.table("paths", required=False)
        for key, value in paths.items():
            if key in PLACES or key == SQL_PLACE or not isinstance(value, str):
                raise self.fail(f"[paths] {key}", "must be text and not one of the built-in places",
                                f"rename it; {', '.join(PLACES)} are given")
            self.known_places(value, f"[paths] {key}", set(PLACES))
        places = set(PLACES) | set(paths)
        start = self.table("start")
        config = self.table("config")
        formats = self.formats(catalog)
        config_format = config.get("format")
        config_flag = config.get("flag")
        if (config_format is None) == (config_flag is None):
            raise self.fail("[config]", "needs exactly one of format (a file in an export format, written to "
                            "{config_file}) or flag (one argv element per changed knob)",
                            "write format = \"NAME\" or flag = \"--{name}={value}\"")
        if config_format is not None and config_format not in {f.name for f in formats}:
            raise self.fail("[config] format", f"'{config_format}' is not one of the file's [[formats]]",
                            f"use one of {', '.join(f.name for f in formats) or '(none: add a [[formats]] table)'}")
        if config_flag is not None:
            self.known_places(str(config_flag), "[config] flag", {"name", "value"})
        start_argv = self.argv(start, "argv", "[start] argv", places | ({"config"} if config_flag else set()))
        if config_flag is not None and "{config}" not in start_argv:
            raise self.fail("[start] argv", "does not place the config's flags", "add the element \"{config}\"")
        if config_format is not None and not any("{config_file}" in a for a in start_argv):
            raise self.fail("[start] argv", "never names {config_file}, where the config is written",
                            "add it, e.g. \"--defaults-file={config_file}\"")
        sql = self.table("sql")
        sql_argv = self.argv(sql, "argv", "[sql] argv", places | {SQL_PLACE})
        if "{sql}" not in sql_argv:
            raise self.fail("[sql] argv", "must have the statement as one whole element", "add the element \"{sql}\"")
        version = self.table("version")
        pattern = self.text(version, "pattern", "[version] pattern")
        self.regex(pattern, "[version] pattern")
        drivers = self.table("drivers")
        connections = {}
        for driver, spec in drivers.items():
            if not isinstance(spec, dict):
                raise self.fail(f"[drivers.{driver}]", "must be a table",
                                f"write [drivers.{driver}] connection = [...]")
            connections[driver] = self.argv(spec, "connection", f"[drivers.{driver}] connection", places)
        default_driver = self.text(d, "default_driver", "default_driver", next(iter(connections), None))
        if default_driver not in connections:
            raise self.fail("default_driver", f"'{default_driver}' has no [drivers.{default_driver}] table",
                            f"use one of {', '.join(connections) or '(none: add a [drivers.NAME] table)'}")
        stop = self.text(d, "clean_stop", "clean_stop", "SIGTERM")
        if stop not in STOPS:
            raise self.fail("clean_stop", f"'{stop}' is not a signal knobtune stops servers with",
                            f"use one of {', '.join(STOPS)}")
        tools = d.get("tools", [])
        if not isinstance(tools, list) or not all(isinstance(t, str) and t.startswith("/") for t in tools):
            raise self.fail("tools", "must be a list of absolute paths", "write tools = [\"/usr/sbin/server\", ...]")
        user = d.get("user")
        if user is not None and (not isinstance(user, str) or not user):
            raise self.fail("user", "must be a user name", "write user = \"NAME\" or leave it out (knobtune's own)")
        return SystemFile(
            path=self.path, name=name, label=self.text(d, "label", "label", name),
            description=self.text(d, "description", "description", name), catalog_path=catalog_path,  # type: ignore[arg-type]
            rules=self.beside("rules", required=False), counters_doc=self.beside("counters", required=False),
            user=user, noun=self.text(d, "noun", "noun", "server"),
            install=self.text(d, "install", "install", "install the system's packages"), tools=tuple(tools),
            default_driver=default_driver, drivers=connections, paths=dict(paths),
            init=self.argv(self.table("init"), "argv", "[init] argv", places),
            start=start_argv, ready=self.argv(self.table("ready"), "argv", "[ready] argv", places), sql=sql_argv,
            version_argv=self.argv(version, "argv", "[version] argv", set()), version_pattern=pattern,
            config_format=config_format, config_flag=config_flag,
            load_sql=self.sql_list(self.table("load", required=False), "sql", "[load] sql"),
            settle=self.settle(), counters=self.counters(), durability=self.durability(), formats=formats,
            known=self.known(catalog), ready_limit_s=self.seconds("ready_limit_s", 120.0),
            stop_limit_s=self.seconds("stop_limit_s", 60.0), clean_stop=STOPS[stop])

    def regex(self, pattern: str, where: str) -> None:
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise self.fail(where, f"is not a regular expression ({exc})", "correct the pattern") from None
        if compiled.groups < 1:
            raise self.fail(where, "has no group to read", "put what to read in parentheses, e.g. \"Ver (\\\\S+)\"")

    def seconds(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 86400:
            raise self.fail(key, f"must be a number of seconds above 0 (got {value!r})", f"write {key} = {default:g}")
        return float(value)

    def settle(self) -> SettleSpec:
        s = self.table("settle", required=False)
        wait = s.get("wait", {})
        if not isinstance(wait, dict):
            raise self.fail("[settle] wait", "must be a table", "write wait = { sql = \"...\", equals = \"0\" }")
        poll = wait.get("poll_s", 0.2)
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 < poll <= 10:
            raise self.fail("[settle] wait.poll_s", f"must be seconds in (0, 10] (got {poll!r})", "write poll_s = 0.2")
        return SettleSpec(sql=self.sql_list(s, "sql", "[settle] sql"),
                          wait_sql=self.text(wait, "sql", "[settle] wait.sql") if wait else None,
                          equals=str(wait.get("equals", "0")), poll_s=float(poll),
                          dirty_sql=self.text(s, "dirty_sql", "[settle] dirty_sql") if "dirty_sql" in s else None)

    def counters(self) -> CountersSpec | None:
        c = self.table("read_counters", required=False)
        if not c:
            return None
        names = c.get("names")
        if not isinstance(names, dict) or not names or not all(isinstance(v, str) for v in names.values()):
            raise self.fail("[read_counters] names", "must map our counter names to the system's",
                            "write names = { our_name = \"System_Name\", ... }")
        levels = c.get("levels", [])
        if not isinstance(levels, list) or set(levels) - set(names):
            raise self.fail("[read_counters] levels", "must list names of [read_counters] names",
                            "list the counters read at the end of a run, not as differences")
        return CountersSpec(self.text(c, "sql", "[read_counters] sql"), dict(names), frozenset(levels))

    def durability(self) -> DurabilitySpec | None:
        dur = self.table("durability", required=False)
        if not dur:
            return None
        commit = self.text(dur, "commit", "[durability] commit")
        if placeholders(commit) != {"n"}:
            raise self.fail("[durability] commit", "must name {n} (the commit's number) and nothing else",
                            "write commit = \"INSERT INTO ledger VALUES ({n})\"")
        return DurabilitySpec(self.sql_list(dur, "setup", "[durability] setup"), commit,
                              self.text(dur, "count", "[durability] count"))

    def tables(self, key: str, first: str) -> list[Mapping[str, Any]]:
        """The array of tables ``[[key]]`` (none: empty)."""
        specs = self.data.get(key, [])
        if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
            raise self.fail(f"[[{key}]]", "must be an array of tables", f"write each as [[{key}]] {first} = ...")
        return specs

    def formats(self, catalog: Catalog) -> tuple[ExportFormat, ...]:
        specs = self.tables("formats", "name")
        formats = []
        for i, spec in enumerate(specs):
            where = f"[[formats]] #{i + 1}"
            name = self.text(spec, "name", f"{where} name")
            spelling = self.text(spec, "spelling", f"{where} spelling", catalog.formats[0] if catalog.formats else None)
            if spelling not in catalog.formats:
                raise self.fail(f"{where} spelling", f"'{spelling}' is not one of the catalog's formats",
                                f"use one of {', '.join(catalog.formats)}")
            line = self.text(spec, "line", f"{where} line", "{name} = {value}")
            self.known_places(line, f"{where} line", {"name", "value"})
            booleans = spec.get("booleans", ["ON", "OFF"])
            if not (isinstance(booleans, list) and len(booleans) == 2 and all(isinstance(b, str) for b in booleans)):
                raise self.fail(f"{where} booleans", "must be two texts, for true and false", "write [\"ON\", \"OFF\"]")
            header = spec.get("header", [])
            if not isinstance(header, list) or not all(isinstance(h, str) for h in header):
                raise self.fail(f"{where} header", "must be a list of lines", "write header = [\"[section]\"]")
            comment = spec.get("comment")
            formats.append(ExportFormat(name, self.text(spec, "description", f"{where} description", name),
                                        comment if isinstance(comment, str) else None,
                                        _SettingsFile(spelling, line, tuple(booleans), tuple(header),
                                                      comment if isinstance(comment, str) else None)))
        return tuple(formats)

    def known(self, catalog: Catalog) -> tuple[KnownSpec, ...]:
        specs = self.tables("known", "label")
        known = []
        for i, spec in enumerate(specs):
            where = f"[[known]] #{i + 1}"
            values = spec.get("values")
            if not isinstance(values, dict) or not values:
                raise self.fail(f"{where} values", "must map knobs to values", "write values = { knob = value }")
            for knob, value in values.items():
                if knob not in catalog.knobs:
                    raise self.fail(f"{where} values", f"'{knob}' is not a knob of the catalog",
                                    "name a knob of the catalog")
                try:
                    known_value(catalog, knob, value, {n: 1 << 30 for n in MACHINE_NAMES})
                except (KnobtuneError, ValueError, TypeError, SyntaxError, KeyError) as exc:
                    raise self.fail(f"{where} values.{knob}", f"{value!r} cannot be read ({exc})",
                                    f"give a value or an expression over {', '.join(MACHINE_NAMES)}") from None
            known.append(KnownSpec(self.text(spec, "label", f"{where} label"),
                                   self.text(spec, "source", f"{where} source"),
                                   dict(values)))
        return tuple(known)


def known_value(catalog: Catalog, knob: str, value: Any, machine: Mapping[str, int]) -> Value:
    """A known config's value for ``knob``: as written, or an expression over the machine (simpleeval, never
    eval) when it is text for a numeric knob; typed by the catalog.

    Raises:
        KnobtuneError, ValueError, TypeError, SyntaxError, KeyError: the value cannot be read.
    """
    spec = catalog.knobs[knob]
    if isinstance(value, str) and spec.is_numeric and spec.type is not KnobType.BYTES:
        value = SimpleEval(names=dict(machine)).eval(value)
    elif isinstance(value, str) and spec.type is KnobType.BYTES and any(n in value for n in MACHINE_NAMES):
        value = int(SimpleEval(names=dict(machine)).eval(value))
    return spec.typed(value)


@dataclass(frozen=True)
class _SettingsFile:
    """A config file of ``name = value`` lines (``line``), after ``header`` lines; booleans as the file spells them."""

    spelling: str
    line: str
    booleans: tuple[str, str]
    header: tuple[str, ...]
    comment: str | None

    def __call__(self, catalog: Catalog, config: Mapping[str, Value]) -> str:
        named = render_named(catalog, config, self.spelling)
        for knob, value in catalog.changed(config).items():  # booleans as this file spells them
            if catalog.knobs[knob].type is KnobType.BOOL:
                named[catalog.knobs[knob].names.get(self.spelling, knob)] = self.booleans[0 if value else 1]
        if not named:
            return f"{self.comment} nothing differs from the defaults\n" if self.comment else "\n"
        lines = list(self.header)
        lines += [self.line.replace("{name}", name).replace("{value}", text) for name, text in sorted(named.items())]
        return "\n".join(lines) + "\n"
