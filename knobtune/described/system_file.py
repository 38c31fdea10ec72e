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
Validated on load: its fields through the schema (``system_schema``: an
unknown or misspelt field at any depth, a wrong type), then what they must
agree on; every error is one line naming the file, the field and the fix.
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

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.described.system_schema import DOCS, SystemDocument
from knobtune.errors import CatalogError, KnobtuneError
from knobtune.names import nearest
from knobtune.knobs import Catalog, KnobType, Value, load_catalog, render_named
from knobtune.targets import ExportFormat

PLACES = ("home", "data", "config_file")  # what every command may name, besides the file's own [paths]
SQL_PLACE = "sql"  # the statement, in [sql].argv only
STOPS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGQUIT": signal.SIGQUIT}  # STOP_NAMES's
MACHINE_NAMES = ("memory_bytes", "cores")  # what a known config's values may be computed from


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
    """Read and check a system file: its fields through the schema (``system_schema``), then what they must agree
    on (placeholders, formats, the catalog's knobs).

    Raises:
        CatalogError: one line per problem naming the file, the field and the fix.
    """
    path = path.resolve()
    data = read_toml(path, CatalogError, "system file")
    document = schema.read(SystemDocument, data, schema.Where(str(path), docs=DOCS), CatalogError)
    return _Checker(path, document).system()


class _Checker:
    """What a system file's typed fields must agree on, each checked in turn."""

    def __init__(self, path: Path, document: SystemDocument) -> None:
        self.path, self.doc = path, document

    def fail(self, where: str, problem: str, fix: str) -> CatalogError:
        return CatalogError(f"{self.path}: {where}: {problem}. Fix: {fix}")

    def argv(self, argv: tuple[str, ...], where: str, allowed: set[str]) -> tuple[str, ...]:
        self.known_places(argv, where, allowed)
        return argv

    def known_places(self, template: Sequence[str] | str, where: str, allowed: set[str]) -> None:
        try:
            unknown = placeholders(template) - allowed
        except ValueError as exc:
            raise self.fail(where, f"a placeholder is malformed ({exc})", "write placeholders as {name}") from None
        if unknown:
            raise self.fail(where, f"names unknown placeholder {{{sorted(unknown)[0]}}}",
                            f"use one of {', '.join('{' + p + '}' for p in sorted(allowed))}")

    def beside(self, key: str, name: str | None) -> Path | None:
        if name is None:
            return None
        file = self.path.parent / name
        if not file.exists():
            raise self.fail(key, f"{file} does not exist", f"give a path relative to {self.path.parent}")
        return file

    def system(self) -> SystemFile:
        d = self.doc
        catalog_path = self.beside("catalog", d.catalog)
        catalog = load_catalog(catalog_path)  # type: ignore[arg-type]
        if catalog.system != d.name:
            raise self.fail("catalog", f"{catalog_path} is the catalog of '{catalog.system}'",
                            f"set system = \"{d.name}\" in it, or name this system '{catalog.system}'")
        for key, value in d.paths.items():
            if key in PLACES or key == SQL_PLACE:
                raise self.fail(f"[paths] {key}", "must be text and not one of the built-in places",
                                f"rename it; {', '.join(PLACES)} are given")
            self.known_places(value, f"[paths] {key}", set(PLACES))
        places = set(PLACES) | set(d.paths)
        formats = self.formats(catalog)
        config_format, config_flag = d.config.format, d.config.flag
        if (config_format is None) == (config_flag is None):
            raise self.fail("[config]", "needs exactly one of format (a file in an export format, written to "
                            "{config_file}) or flag (one argv element per changed knob)",
                            "write format = \"NAME\" or flag = \"--{name}={value}\"")
        if config_format is not None and config_format not in {f.name for f in formats}:
            raise self.fail("[config] format", f"'{config_format}' is not one of the file's [[formats]]",
                            f"use one of {', '.join(f.name for f in formats) or '(none: add a [[formats]] table)'}")
        if config_flag is not None:
            self.known_places(config_flag, "[config] flag", {"name", "value"})
        start_argv = self.argv(d.start.argv, "[start] argv", places | ({"config"} if config_flag else set()))
        if config_flag is not None and "{config}" not in start_argv:
            raise self.fail("[start] argv", "does not place the config's flags", "add the element \"{config}\"")
        if config_format is not None and not any("{config_file}" in a for a in start_argv):
            raise self.fail("[start] argv", "never names {config_file}, where the config is written",
                            "add it, e.g. \"--defaults-file={config_file}\"")
        sql_argv = self.argv(d.sql.argv, "[sql] argv", places | {SQL_PLACE})
        if "{sql}" not in sql_argv:
            raise self.fail("[sql] argv", "must have the statement as one whole element", "add the element \"{sql}\"")
        self.regex(d.version.pattern, "[version] pattern")
        connections = {driver: self.argv(spec.connection, f"[drivers.{driver}] connection", places)
                       for driver, spec in d.drivers.items()}
        default_driver = d.default_driver or next(iter(connections), "")
        if default_driver not in connections:
            raise self.fail("default_driver", f"'{default_driver}' has no [drivers.{default_driver}] table",
                            f"use one of {', '.join(connections) or '(none: add a [drivers.NAME] table)'}")
        return SystemFile(
            path=self.path, name=d.name, label=d.label or d.name, description=d.description or d.name,
            catalog_path=catalog_path, rules=self.beside("rules", d.rules),  # type: ignore[arg-type]
            counters_doc=self.beside("counters", d.counters), user=d.user, noun=d.noun, install=d.install,
            tools=d.tools, default_driver=default_driver, drivers=connections, paths=dict(d.paths),
            init=self.argv(d.init.argv, "[init] argv", places), start=start_argv,
            ready=self.argv(d.ready.argv, "[ready] argv", places), sql=sql_argv,
            version_argv=self.argv(d.version.argv, "[version] argv", set()), version_pattern=d.version.pattern,
            config_format=config_format, config_flag=config_flag, load_sql=d.load.sql,
            settle=SettleSpec(sql=d.settle.sql, wait_sql=d.settle.wait.sql if d.settle.wait else None,
                              equals=d.settle.wait.equals if d.settle.wait else "0",
                              poll_s=d.settle.wait.poll_s if d.settle.wait else 0.2, dirty_sql=d.settle.dirty_sql),
            counters=self.counters(), durability=self.durability(), formats=formats, known=self.known(catalog),
            ready_limit_s=d.ready_limit_s, stop_limit_s=d.stop_limit_s, clean_stop=STOPS[d.clean_stop])

    def regex(self, pattern: str, where: str) -> None:
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise self.fail(where, f"is not a regular expression ({exc})", "correct the pattern") from None
        if compiled.groups < 1:
            raise self.fail(where, "has no group to read", "put what to read in parentheses, e.g. \"Ver (\\\\S+)\"")

    def counters(self) -> CountersSpec | None:
        c = self.doc.read_counters
        if c is None:
            return None
        if not c.names:
            raise self.fail("[read_counters] names", "must map our counter names to the system's",
                            "write names = { our_name = \"System_Name\", ... }")
        if set(c.levels) - set(c.names):
            raise self.fail("[read_counters] levels", "must list names of [read_counters] names",
                            "list the counters read at the end of a run, not as differences")
        return CountersSpec(c.sql, dict(c.names), frozenset(c.levels))

    def durability(self) -> DurabilitySpec | None:
        dur = self.doc.durability
        if dur is None:
            return None
        if placeholders(dur.commit) != {"n"}:
            raise self.fail("[durability] commit", "must name {n} (the commit's number) and nothing else",
                            "write commit = \"INSERT INTO ledger VALUES ({n})\"")
        return DurabilitySpec(dur.setup, dur.commit, dur.count)

    def formats(self, catalog: Catalog) -> tuple[ExportFormat, ...]:
        formats = []
        for i, spec in enumerate(self.doc.formats):
            where = f"[[formats]] #{i + 1}"
            spelling = spec.spelling or (catalog.formats[0] if catalog.formats else "")
            if spelling not in catalog.formats:
                raise self.fail(f"{where} spelling", f"'{spelling}' is not one of the catalog's formats",
                                f"use one of {', '.join(catalog.formats)}")
            self.known_places(spec.line, f"{where} line", {"name", "value"})
            if len(spec.booleans) != 2:
                raise self.fail(f"{where} booleans", "must be two texts, for true and false", "write [\"ON\", \"OFF\"]")
            formats.append(ExportFormat(spec.name, spec.description or spec.name, spec.comment,
                                        _SettingsFile(spelling, spec.line, (spec.booleans[0], spec.booleans[1]),
                                                      spec.header, spec.comment)))
        return tuple(formats)

    def known(self, catalog: Catalog) -> tuple[KnownSpec, ...]:
        known = []
        for i, spec in enumerate(self.doc.known):
            where = f"[[known]] #{i + 1}"
            if not spec.values:
                raise self.fail(f"{where} values", "must map knobs to values", "write values = { knob = value }")
            for knob, value in spec.values.items():
                if knob not in catalog.knobs:
                    raise self.fail(f"{where} values",
                                    f"'{knob}' is not a knob of the catalog{nearest(knob, catalog.knobs)}",
                                    "name a knob of the catalog")
                try:
                    known_value(catalog, knob, value, {n: 1 << 30 for n in MACHINE_NAMES})
                except (KnobtuneError, ValueError, TypeError, SyntaxError, KeyError) as exc:
                    raise self.fail(f"{where} values.{knob}", f"{value!r} cannot be read ({exc})",
                                    f"give a value or an expression over {', '.join(MACHINE_NAMES)}") from None
            known.append(KnownSpec(spec.label, spec.source, dict(spec.values)))
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
