"""Typed documents: nested frozen dataclasses, one reader and one writer for all of them.

A document's schema is its dataclasses: each field's type, default and a ``Rule`` (range, choices, unit, the
command-line option that sets it, an example for the fix). ``read`` checks plain data (a TOML file, options given
on the command line, a study's stored record) against it: unknown keys, types, ranges and choices, one line per
problem naming the field (its option when the value came from the command line) and the fix. ``to_dict`` and
``to_toml`` write a document back as data ``read`` accepts, so a document round-trips. ``json_schema`` says the
same schema as a JSON Schema, and ``field_rows`` as rows of a page (docs/files.md).

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
                                if dataclasses.is_dataclass(hints[name]) or _sections(hints[name]) or
                                typing.get_origin(hints[name]) in (Mapping, dict) else
                                f"{where.source}: no '{path}'. Fix: add it, e.g. {_example(path, f)}")
            continue
        if data[name] is None and _optional(hints[name]):
            values[name] = None  # JSON's null for an optional field: as if absent
            continue
        values[name] = _any(hints[name], f.metadata.get("rule", Rule()), data[name], path, where, problems)
    return None if len(problems) > before else kind(**values)


def _any(hint: Any, rule: Rule, raw: Any, path: str, where: Where, problems: list[str]) -> Any:
    """``raw`` read as ``hint``: a section, a table of them or of values, a list of sections, or one value."""
    inner = _inner(hint)
    if dataclasses.is_dataclass(inner):
        return _section(inner, raw, path, where, problems)
    if typing.get_origin(inner) in (Mapping, dict):
        return _table(typing.get_args(inner)[1], rule, raw, path, where, problems)
    if _sections(inner):
        return _array(typing.get_args(inner)[0], raw, path, where, problems)
    return _value(hint, rule, raw, path, where, problems)


def _inner(hint: Any) -> Any:
    """``hint`` without its ``| None``."""
    return next(k for k in typing.get_args(hint) if k is not type(None)) if _optional(hint) else hint


def _sections(hint: Any) -> bool:
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
    if len(kinds := _kinds(hint)) > 1:  # one of several kinds: read as the one its type matches
        if (matched := next((k for k in kinds if _matches(k, raw)), None)) is None:
            words = " or ".join(dict.fromkeys(_KIND_WORDS.get(k, "text") for k in kinds if k is not int or
                                              float not in kinds))
            problems.append(f"{label} {raw!r} is not {words}. Fix: {fix}")
            return None
        return _value(matched, rule, raw, path, where, problems)
    kind = _inner(hint)
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
    if kind is bool and not isinstance(value, bool) or kind in (int, float) and (
            isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float))):
        problems.append(f"{label} {raw!r} is not {_KIND_WORDS[kind]}. Fix: {fix}")
        return None
    if kind is str and not isinstance(value, str):
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
        return f"{shown} is below {human_bytes(rule.least) if rule.unit == 'size' else _number(rule.least)}"
    if rule.most is not None and value > rule.most:
        return (f"{shown!r} is longer than {rule.most / 86400:g} days" if rule.unit == "duration"
                else f"{shown} is above {_number(rule.most)}")
    return None


def _fix(path: str, rule: Rule, where: Where) -> str:
    if rule.example is None:
        return f"use one of {', '.join(rule.choices)}" if rule.choices else f"see {where.docs}"
    shown = ",".join(map(str, rule.example)) if isinstance(rule.example, list) else rule.example  # as an option
    given = f"{rule.option} {shown}" if path in where.options and rule.option else \
        f"{path.rsplit('.', 1)[-1]} = {_toml(rule.example)}"
    return f"e.g. {given}" + (f" ({rule.note})" if rule.note else "")


def _example(path: str, f: Any) -> str:
    rule = f.metadata.get("rule", Rule())
    return f"{path.rsplit('.', 1)[-1]} = {_toml(rule.example if rule.example is not None else '...')}"


def _kinds(hint: Any) -> tuple[Any, ...]:
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


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


_KIND_WORDS = {bool: "true or false", int: "a whole number", float: "a number"}


# ------------------------------------------------------------ writing


def to_dict(document: Any) -> dict[str, Any]:
    """The document as plain data (what ``read`` accepts back): sections as tables, no None."""
    return {f.name: _plain(getattr(document, f.name)) for f in dataclasses.fields(document)
            if getattr(document, f.name) is not None}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if isinstance(value, tuple) else value


def to_toml(document: Any) -> str:
    """The document as TOML: top-level fields first, then one table per section."""
    data = to_dict(document)
    lines = [f"{key} = {_toml(value)}" for key, value in data.items() if not isinstance(value, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{name}]"] + [f"{key} = {_toml(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf") if value == value else "nan"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's


# ------------------------------------------------------------ JSON Schema

JSON_SCHEMA = "https://json-schema.org/draft/2020-12/schema"


def json_schema(kind: type, title: str | None = None) -> dict[str, Any]:
    """A document's schema as a JSON Schema (draft 2020-12), for editors and other tools: types, choices as
    ``enum``, ranges as ``minimum``/``maximum``, no field but the document's own (``additionalProperties: false``),
    the required fields, defaults, and descriptions from the dataclasses' docstrings and the rules' notes. A
    document whose author may add fields of their own says what they may be in a class attribute ``json_extra``;
    one read from JSON whose optional fields may be null says so in a class attribute ``json_null``.

    What ``read`` checks beyond a field (fields that must agree, a knob of a catalog) is not in it, and
    a field with a unit (``"20m"``) takes its number or the text.
    """
    return {"$schema": JSON_SCHEMA, "title": title or kind.__name__, **_object_schema(kind)}


def _object_schema(kind: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(kind)
    properties: dict[str, Any] = {}
    needed = []
    for f in dataclasses.fields(kind):
        rule = f.metadata.get("rule", Rule())
        properties[f.name] = _field_schema(hints[f.name], rule)
        if getattr(kind, "json_null", False) and _optional(hints[f.name]) and isinstance(properties[f.name].get(
                "type"), str):  # a JSON file's null for an optional field: as if absent (``read`` says so too)
            properties[f.name]["type"] = [properties[f.name]["type"], "null"]
        if f.default is not dataclasses.MISSING and f.default is not None and not dataclasses.is_dataclass(f.default):
            properties[f.name]["default"] = _plain(f.default)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            needed.append(f.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": getattr(kind, "json_extra", False)}
    if needed:
        schema["required"] = needed
    if description := _docstring(kind):
        schema["description"] = description
    return schema


def _field_schema(hint: Any, rule: Rule) -> dict[str, Any]:
    inner = _inner(hint)
    if dataclasses.is_dataclass(inner):
        return _object_schema(inner)
    if typing.get_origin(inner) in (Mapping, dict):
        return {"type": "object", "additionalProperties": _field_schema(typing.get_args(inner)[1], rule)}
    if _sections(inner):
        return {"type": "array", "items": _object_schema(typing.get_args(inner)[0])}
    kinds = _kinds(hint)
    schema: dict[str, Any] = _value_schema(inner, rule) if len(kinds) == 1 else {
        "anyOf": [_value_schema(k, rule) for k in kinds]}
    if rule.note:
        schema["description"] = rule.note
    return schema


def _value_schema(kind: Any, rule: Rule) -> dict[str, Any]:
    if kind is Any:
        return {}
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[0] is float:
        return {"type": "array", "minItems": 1, "items": _value_schema(float, rule)}
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[0] is Any:
        return {"type": "array", "items": {"type": ["string", "number", "boolean"]}}
    if typing.get_origin(kind) is tuple and typing.get_origin(typing.get_args(kind)[0]) is tuple:
        return {"type": "array", "items": {"type": "array", "minItems": 1,
                                           "items": {"type": ["string", "number", "boolean"]}}}
    if typing.get_origin(kind) is tuple:
        empty, repeats, blank, lone = LISTS[rule.items]
        item = {"type": "integer"} if typing.get_args(kind)[0] is int else _text_schema(rule, blank)
        array: dict[str, Any] = {"type": "array", "items": item}
        if not empty:
            array["minItems"] = 1
        if not repeats:
            array["uniqueItems"] = True
        return {"anyOf": [item, array]} if lone else array
    if kind is str:
        return _text_schema(rule, True)
    schema: dict[str, Any] = {"type": {bool: "boolean", int: "integer", float: "number"}[kind]}
    if kind is not bool:
        if rule.least is not None:
            schema["minimum"] = rule.least
        if rule.most is not None:
            schema["maximum"] = rule.most
        if rule.positive:
            schema["exclusiveMinimum"] = 0
        if rule.unit:
            schema = {"anyOf": [schema, {"type": "string", "description": f"a {rule.unit} with its unit"}]}
    return schema


def _text_schema(rule: Rule, blank: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if rule.choices:
        schema["enum"] = list(rule.choices)
    if rule.pattern:
        schema["pattern"] = f"^(?:{rule.pattern})$"
    elif not blank:
        schema["pattern"] = r"\S"
    return schema


# ------------------------------------------------------------ the fields, for a page


@dataclass(frozen=True)
class FieldRow:
    """One field of a document as a page lists it: its dotted path (``NAME``: a key the author chooses; ``#n``: the
    n-th table of a list), its type, its default ("required" when it has none), its range or choices, its meaning."""

    path: str
    type: str
    default: str
    limits: str
    meaning: str


def field_rows(kind: Any, prefix: str = "") -> list[FieldRow]:
    """One row per field of the document ``kind``, a section's own fields after its row."""
    rows = []
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        path, rule, hint = f"{prefix}{f.name}", f.metadata.get("rule", Rule()), _inner(hints[f.name])
        if dataclasses.is_dataclass(hint):
            rows += [FieldRow(path, "table", _default(f), "", _docstring(hint)), *field_rows(hint, f"{path}.")]
        elif typing.get_origin(hint) in (Mapping, dict):
            value = _inner(typing.get_args(hint)[1])
            rows += [FieldRow(path, "table of tables", "", "", rule.note or _docstring(value)),
                     *field_rows(value, f"{path}.NAME.")] if dataclasses.is_dataclass(value) else \
                [FieldRow(f"{path}.NAME", _type_words(typing.get_args(hint)[1], rule), "", _limits(rule), rule.note)]
        elif _sections(hint):
            item = typing.get_args(hint)[0]
            rows += [FieldRow(path, "list of tables", "", "", _docstring(item)), *field_rows(item, f"{path} #n.")]
        else:
            meaning = rule.note or ("" if rule.example is None else f"e.g. {_toml(rule.example)}")
            rows.append(FieldRow(path, _type_words(hints[f.name], rule), _default(f), _limits(rule), meaning))
    return rows


def _type_words(hint: Any, rule: Rule) -> str:
    kinds = _kinds(hint)
    if len(kinds) > 1:
        return " or ".join(dict.fromkeys(_type_words(k, rule) for k in kinds if k is not int or float not in kinds))
    if typing.get_origin(kinds[0]) is tuple:
        item = typing.get_args(kinds[0])[0]
        words = {int: "list of whole numbers", float: "list of numbers", str: f"list ({rule.items})"}
        return "list of lists of values" if typing.get_origin(item) is tuple else words.get(item, "list of values")
    return {bool: "true or false", int: "whole number", float: "number", str: "text"}.get(kinds[0], "any value")


def _default(f: Any) -> str:
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        return "required"
    return "" if f.default in (dataclasses.MISSING, None, ()) else _toml(f.default)


def _limits(rule: Rule) -> str:
    if rule.choices:
        return ", ".join(rule.choices)
    parts = ["above 0"] if rule.positive else []
    parts += [f"{word} {human_bytes(bound) if rule.unit == 'size' else _number(bound)}"
              for word, bound in (("at least", rule.least), ("at most", rule.most)) if bound is not None]
    if rule.unit:
        parts.append(f"a {rule.unit} with its unit, or its number")
    return "; ".join(parts + ([rule.what] if rule.pattern and rule.what else []))


def _docstring(kind: Any) -> str:
    """A dataclass's docstring on one line ("" when it has none: then Python gives its signature)."""
    doc = kind.__doc__ or ""
    return "" if doc.startswith(f"{kind.__name__}(") else " ".join(doc.split())
