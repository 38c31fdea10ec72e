"""Typed documents: nested frozen dataclasses, one reader and one writer for all of them.

A document's schema is its dataclasses: each field's type, default and a ``Rule`` (range, choices, unit, the
command-line option that sets it and its help, an example for the fix). ``read`` checks plain data (a TOML file,
options given on the command line, a study's stored record) against it: unknown keys, types, ranges and choices, one
line per problem naming the field (its option when the value came from the command line) and the fix. ``to_dict`` and
``to_toml`` write a document back as data ``read`` accepts, so a document round-trips. ``schema_views`` says the
same schema as a JSON Schema and as rows of a page (docs/files.md).

A field is a value (bool, int, float, text, any value: ``Any``, whose owner checks it, or one of several kinds:
``int | float | str``, a number or an expression, read as the kind its type matches), a list (of texts: ``Rule.items``
says which kind of list; of whole numbers: ``tuple[int, ...]``; of numbers: ``tuple[float, ...]``, each held to the
range; of values of any kind: ``tuple[Any, ...]``, or of such lists), a section (a nested dataclass, optional when
typed ``X | None``), a table of named values or sections (``Mapping[str, X]``) or a list of sections (``tuple[X,
...]``, an array of tables), at any depth; a field made with ``required`` has no default. Unknown keys are refused at
every depth with the nearest name.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from knobtune.errors import KnobtuneError
from knobtune.units import human_bytes, parse_bytes, parse_duration_s
from knobtune.names import nearest

T = TypeVar("T")
COMMAND_LINE = "the command line"  # a Where's source when no file was given
PARSERS: dict[str, Callable[[Any], float]] = {"duration": parse_duration_s, "size": parse_bytes}
TEXT: dict[str, Any] = {"pattern": r"[\s\S]*\S[\s\S]*", "what": "text (not blank)"}  # a rule's: not only spaces


@dataclass(frozen=True)
class Rule:
    """What a field accepts beyond its type, and how a person sets it."""

    least: float | None = None
    most: float | None = None
    positive: bool = False  # above zero
    choices: tuple[str, ...] = ()
    what: str = ""  # the choices' kind, said when a value is none of them ("a sampler")
    removed: tuple[str, ...] = ()  # choices earlier releases offered: read from a study's record, refused from a person
    unit: str | None = None  # "duration" or "size": a string with a unit ("20m", "2GiB") is read as its number
    option: str | None = None  # the command-line option that sets it ("--trials"); None: only in a document
    sets: Any = None  # what the option sets when it is a flag without a value (--no-rules: false); None: its value
    help: str = ""  # what the option means, as every command that takes it says in --help (the default is added)
    example: Any = None  # a good value, for the fix ("e.g. --trials 50")
    note: str = ""  # said after the example ("0: no verification")
    pattern: str = ""  # a text (or each text of a list) matches it whole; ``what`` says what it is ("a user name")
    items: str = "names"  # a list of texts is names, argv, statements or lines (LISTS)


LISTS = {  # a list's kind -> (it may be empty, an item may repeat, an item may be blank, one text is a list of one)
    "names": (True, False, False, False),  # knob names: each once
    "argv": (False, True, False, False),  # a command, the program first
    "sequence": (False, True, False, False),  # steps in order, a step may repeat (db_bench's benchmarks)
    "statements": (True, True, False, True),  # SQL statements: one statement alone is a list of one
    "lines": (True, True, True, False),  # lines of a file
}


def setting(default: Any = None, **rule: Any) -> Any:
    """A document field with its default and its ``Rule``."""
    return field(default=default, metadata={"rule": Rule(**rule)})


def required(**rule: Any) -> Any:
    """A document field with no default: a document without it is refused (declare its dataclass ``kw_only``)."""
    return field(metadata={"rule": Rule(**rule)})


def table(**rule: Any) -> Any:
    """A table whose keys the document's author names (``[paths]``), each value held to ``rule``; absent: empty."""
    return field(default_factory=dict, metadata={"rule": Rule(**rule)})


def section(kind: type[T]) -> Any:
    """A nested section whose every field has a default: absent, it takes them all."""
    return field(default_factory=kind)


@dataclass(frozen=True)
class Where:
    """Where a document's values came from: a file (or a study's record), and the paths given as options."""

    source: str
    options: Mapping[str, str] = field(default_factory=dict)  # dotted path -> the option that gave it
    ranges: bool = True  # False: types and names are checked, not ranges (a study's record: what it ran, as asked)
    docs: str = "docs/experiment.md"  # where a field with no example is explained

    def label(self, path: str) -> str:
        return self.options.get(path) or f"{self.source}: {path}"


def option_fields(kind: Any, prefix: str = "") -> dict[str, tuple[str, Rule]]:
    """Each command-line option of a document's schema -> the dotted path of the field it sets, and its rule."""
    fields: dict[str, tuple[str, Rule]] = {}
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        path = _dotted(prefix, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            fields |= option_fields(hints[f.name], path)
        elif (rule := f.metadata.get("rule")) is not None and rule.option:
            fields[rule.option] = (path, rule)
    return fields


def read(kind: type[T], data: Any, where: Where, error: type[KnobtuneError]) -> T:
    """``data`` as a ``kind`` document.

    Raises:
        error: one line per problem, each naming the field and the fix.
    """
    problems: list[str] = []
    document = _section(kind, data, "", where, problems)
    if problems or document is None:
        raise error("\n".join(problems))
    return document


def _section(kind: Any, data: Any, prefix: str, where: Where, problems: list[str]) -> Any:
    """A dataclass ``kind`` from ``data``, or None with what is wrong added to ``problems``."""
    fields = {f.name: f for f in dataclasses.fields(kind)}
    if not isinstance(data, Mapping):
        problems.append(f"{where.label(prefix)} is not a table. Fix: write it as a table of its fields "
                        f"({', '.join(fields)})")
        return None
    before = len(problems)
    meant: set[str] = set()  # the fields a misspelt key was meant for: its line says so, none says the field is missing
    for key in data:
        if key not in fields:
            meant |= set(difflib.get_close_matches(str(key), list(fields), n=1))
            problems.append(f"{where.source}: unknown field '{_dotted(prefix, key)}'{nearest(str(key), fields)}. "
                            f"Fix: remove it, or use one of {', '.join(fields)}")
    hints = typing.get_type_hints(kind)
    values: dict[str, Any] = {}
    for name, f in fields.items():
        path = _dotted(prefix, name)
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and name not in meant:
                problems.append(f"{where.source}: no [{path}]. Fix: add it ({where.docs})"
                                if dataclasses.is_dataclass(hints[name]) or is_sections(hints[name]) or
                                typing.get_origin(hints[name]) in (Mapping, dict) else
                                f"{where.source}: no '{path}'. Fix: add it, e.g. {_example(path, f)}")
            continue
        if data[name] is None and is_optional(hints[name]):
            values[name] = None  # JSON's null for an optional field: as if absent
            continue
        values[name] = _any(hints[name], f.metadata.get("rule", Rule()), data[name], path, where, problems)
    return None if len(problems) > before else kind(**values)


def _any(hint: Any, rule: Rule, raw: Any, path: str, where: Where, problems: list[str]) -> Any:
    """``raw`` read as ``hint``: a section, a table of them or of values, a list of sections, or one value."""
    kind = inner(hint)
    if dataclasses.is_dataclass(kind):
        return _section(kind, raw, path, where, problems)
    if typing.get_origin(kind) in (Mapping, dict):
        return _table(typing.get_args(kind)[1], rule, raw, path, where, problems)
    if is_sections(kind):
        return _array(typing.get_args(kind)[0], raw, path, where, problems)
    return _value(hint, rule, raw, path, where, problems)


def inner(hint: Any) -> Any:
    """``hint`` without its ``| None``."""
    return next(k for k in typing.get_args(hint) if k is not type(None)) if is_optional(hint) else hint


def is_sections(hint: Any) -> bool:
    """Whether ``hint`` is a list of sections (an array of tables: ``[[formats]]``)."""
    args = typing.get_args(hint)
    return typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis and \
        dataclasses.is_dataclass(args[0])


def _table(kind: Any, rule: Rule, raw: Any, path: str, where: Where, problems: list[str]) -> Any:
    """A table whose keys the document's author names (``[paths]``), each value read as ``kind``."""
    if not isinstance(raw, Mapping):
        problems.append(f"{where.label(path)} is not a table. Fix: write it as a table of NAME = value, e.g. "
                        f"{path.rsplit('.', 1)[-1]} = {{ NAME = ... }}")
        return None
    before = len(problems)
    read = {str(key): _any(kind, rule, value, _dotted(path, str(key)), where, problems) for key, value in raw.items()}
    return None if len(problems) > before else read


def _array(kind: Any, raw: Any, path: str, where: Where, problems: list[str]) -> Any:
    """An array of tables (``[[formats]]``): the n-th is ``path #n``."""
    if not isinstance(raw, list):
        problems.append(f"{where.label(path)} is not a list of tables. Fix: write it as a list of tables, e.g. "
                        f"{path.rsplit('.', 1)[-1]} = [{{ ... }}, {{ ... }}]")
        return None
    before = len(problems)
    read = tuple(_section(kind, item, f"{path} #{i + 1}", where, problems) for i, item in enumerate(raw))
    return None if len(problems) > before else read


def _value(hint: Any, rule: Rule, raw: Any, path: str, where: Where, problems: list[str]) -> Any:
    label, fix = where.label(path), _fix(path, rule, where)
    if len(kinds := kinds_of(hint)) > 1:  # one of several kinds: read as the one its type matches
        if (matched := next((k for k in kinds if _matches(k, raw)), None)) is None:
            words = " or ".join(dict.fromkeys(_KIND_WORDS.get(k, "text") for k in kinds if k is not int or
                                              float not in kinds))
            problems.append(f"{label} {raw!r} is not {words}. Fix: {fix}")
            return None
        return _value(matched, rule, raw, path, where, problems)
    kind = inner(hint)
    if kind is Any:
        return raw  # any value: its owner checks it
    value = raw
    if rule.unit and isinstance(raw, str):
        try:
            value = PARSERS[rule.unit](raw)
        except ValueError as exc:
            problems.append(f"{label} {exc}. Fix: {fix}")
            return None
    shown = raw if not isinstance(raw, float) else f"{raw:g}"
    if kind in _KIND_WORDS and not _matches(kind, value):
        problems.append(f"{label} {raw!r} is not {_KIND_WORDS[kind]}. Fix: {fix}")
        return None
    if kind is str and not _matches(kind, value):
        problems.append(f"{label} {raw!r} is not text. Fix: {fix}")
        return None
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        if item is float:
            return _numbers(value, rule, label, fix, problems, shown)
        if item not in (str, int):
            return _scalars(item, value, label, fix, problems)
        return _list(value, rule, label, fix, problems, item)
    if kind is float:
        value = float(value)
        if not math.isfinite(value):
            problems.append(f"{label} {shown} is not a finite number. Fix: {fix}")
            return None
    if kind is str and rule.pattern and not re.fullmatch(rule.pattern, value):
        problems.append(f"{label} {value!r} is not {rule.what}. Fix: {fix}")
        return None
    if kind is str and rule.choices and value not in rule.choices:
        if value in rule.removed and not where.ranges:
            return value  # what the study ran; running it again says what to use instead
        gone = " any more (knobtune removed it: docs/tuning.md)" if value in rule.removed else \
            nearest(value, rule.choices)
        problems.append(f"{label} '{value}' is not {rule.what}{gone}. Fix: use one of {', '.join(rule.choices)}")
        return None
    if kind in (int, float) and where.ranges and (problem := _out_of_range(value, rule, shown)):
        problems.append(f"{label} {problem}. Fix: {fix}")
        return None
    return value


def _list(value: Any, rule: Rule, label: str, fix: str, problems: list[str], item: type = str) -> tuple | None:
    """A list of texts of the rule's kind (``LISTS``), or of whole numbers (``item`` int)."""
    empty, repeats, blank, lone = LISTS[rule.items]
    noun = "whole numbers" if item is int else {"argv": "texts, the program first", "statements": "SQL statements",
                                                "lines": "lines"}.get(rule.items, "names")
    if lone and isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(_matches(item, v) for v in value):
        problems.append(f"{label} {value!r} is not a list of {noun}. Fix: {fix}")
        return None
    if not value and not empty:
        problems.append(f"{label} is an empty list. Fix: {fix}")
        return None
    if item is int:
        blank = True  # a number is never blank, and has no pattern
    if not blank and not all(v.strip() for v in value):
        problems.append(f"{label} {value!r} holds an empty {'name' if rule.items == 'names' else 'text'}. Fix: {fix}")
        return None
    if not repeats and (twice := sorted({v for v in value if value.count(v) > 1})):
        problems.append(f"{label} names {', '.join(map(str, twice))} twice. Fix: name each once")
        return None
    if rule.pattern and item is str and (wrong := [v for v in value if not re.fullmatch(rule.pattern, v)]):
        problems.append(f"{label} {wrong[0]!r} is not {rule.what}. Fix: {fix}")
        return None
    return tuple(value)


def _numbers(value: Any, rule: Rule, label: str, fix: str, problems: list[str], shown: Any) -> tuple[float, ...] | None:
    """A list of finite numbers (``tuple[float, ...]``), none empty, each within the rule's range."""
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        problems.append(f"{label} {shown!r} is not a non-empty list of numbers. Fix: {fix}")
        return None
    if (wrong := next((p for v in value if (p := _out_of_range(v, rule, v))), None)) is not None:
        problems.append(f"{label} {list(value)}: {wrong}. Fix: {fix}")
        return None
    return tuple(float(v) for v in value)


def _scalars(item: Any, value: Any, label: str, fix: str, problems: list[str]) -> tuple[Any, ...] | None:
    """A list of values of any kind (``tuple[Any, ...]``: texts, numbers, true or false; what they must be, the
    document's owner checks), or a list of such lists, none empty (``tuple[tuple[Any, ...], ...]``)."""
    nested = item is not Any
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (list, tuple)) and v and all(_scalar(x) for x in v) if nested else _scalar(v)
            for v in value):
        problems.append(f"{label} {value!r} is not a list of {'non-empty lists of ' if nested else ''}values "
                        f"(texts, numbers, true or false). Fix: {fix}")
        return None
    return tuple(tuple(v) if nested else v for v in value)


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int)) or isinstance(value, float) and math.isfinite(value)


def _out_of_range(value: float, rule: Rule, shown: Any) -> str | None:
    if rule.positive and value <= 0:
        return f"{shown!r} is not a positive {rule.unit or 'number'}"
    if rule.least is not None and value < rule.least:
        return f"{shown} is below {human_bytes(rule.least) if rule.unit == 'size' else number_text(rule.least)}"
    if rule.most is not None and value > rule.most:
        return (f"{shown!r} is longer than {rule.most / 86400:g} days" if rule.unit == "duration"
                else f"{shown} is above {number_text(rule.most)}")
    return None


def _fix(path: str, rule: Rule, where: Where) -> str:
    if rule.example is None:
        return f"use one of {', '.join(rule.choices)}" if rule.choices else f"see {where.docs}"
    shown = ",".join(map(str, rule.example)) if isinstance(rule.example, list) else rule.example  # as an option
    given = f"{rule.option} {shown}" if path in where.options and rule.option else \
        f"{path.rsplit('.', 1)[-1]} = {toml_value(rule.example)}"
    return f"e.g. {given}" + (f" ({rule.note})" if rule.note else "")


def _example(path: str, f: Any) -> str:
    rule = f.metadata.get("rule", Rule())
    return f"{path.rsplit('.', 1)[-1]} = {toml_value(rule.example if rule.example is not None else '...')}"


def kinds_of(hint: Any) -> tuple[Any, ...]:
    """The kinds of value ``hint`` allows, None left out (``int | str | None``: int, str)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(k for k in typing.get_args(hint) if k is not type(None))
    return (hint,)


def _matches(kind: Any, raw: Any) -> bool:
    """Whether ``raw`` is of the value kind ``kind`` (an int is a float too; a bool is neither)."""
    if kind is bool or kind is str:
        return isinstance(raw, kind)
    if kind in (int, float):
        return isinstance(raw, int if kind is int else (int, float)) and not isinstance(raw, bool)
    return typing.get_origin(kind) is tuple and isinstance(raw, (list, tuple))


def is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


def number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


_KIND_WORDS = {bool: "true or false", int: "a whole number", float: "a number"}


# ------------------------------------------------------------ writing


def to_dict(document: Any) -> dict[str, Any]:
    """The document as plain data (what ``read`` accepts back): sections as tables, no None."""
    return {f.name: plain(getattr(document, f.name)) for f in dataclasses.fields(document)
            if getattr(document, f.name) is not None}


def plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    return [plain(item) for item in value] if isinstance(value, tuple) else value


def to_toml(document: Any) -> str:
    """The document as TOML: top-level fields first, then one table per section."""
    data = to_dict(document)
    lines = [f"{key} = {toml_value(value)}" for key, value in data.items() if not isinstance(value, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{name}]"] + [f"{key} = {toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf") if value == value else "nan"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's
