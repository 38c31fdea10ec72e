"""The one schema (``knobtune.schema``) said two more ways: as a JSON Schema (``json_schema``: for editors and other
tools, as mlos_bench ships one per config kind) and as the rows of a page of fields (``field_rows``: docs/files.md,
written by ``python -m knobtune.file_kinds``). Both read the same dataclasses ``schema.read`` reads."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knobtune.schema import LISTS, Rule, inner, is_optional, is_sections, kinds_of, number_text, plain, toml_value
from knobtune.units import human_bytes


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
        if getattr(kind, "json_null", False) and is_optional(hints[f.name]) and isinstance(properties[f.name].get(
                "type"), str):  # a JSON file's null for an optional field: as if absent (``read`` says so too)
            properties[f.name]["type"] = [properties[f.name]["type"], "null"]
        if f.default is not dataclasses.MISSING and f.default is not None and not dataclasses.is_dataclass(f.default):
            properties[f.name]["default"] = plain(f.default)
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
    kind = inner(hint)
    if dataclasses.is_dataclass(kind):
        return _object_schema(kind)
    if typing.get_origin(kind) in (Mapping, dict):
        return {"type": "object", "additionalProperties": _field_schema(typing.get_args(kind)[1], rule)}
    if is_sections(kind):
        return {"type": "array", "items": _object_schema(typing.get_args(kind)[0])}
    kinds = kinds_of(hint)
    schema: dict[str, Any] = _value_schema(kind, rule) if len(kinds) == 1 else {
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
        path, rule, hint = f"{prefix}{f.name}", f.metadata.get("rule", Rule()), inner(hints[f.name])
        if dataclasses.is_dataclass(hint):
            rows += [FieldRow(path, "table", _default(f), "", _docstring(hint)), *field_rows(hint, f"{path}.")]
        elif typing.get_origin(hint) in (Mapping, dict):
            value = inner(typing.get_args(hint)[1])
            rows += [FieldRow(path, "table of tables", _default(f), "", rule.note or _docstring(value)),
                     *field_rows(value, f"{path}.NAME.")] if dataclasses.is_dataclass(value) else \
                [FieldRow(f"{path}.NAME", _type_words(typing.get_args(hint)[1], rule), "", _limits(rule), rule.note)]
        elif is_sections(hint):
            item = typing.get_args(hint)[0]
            rows += [FieldRow(path, "list of tables", "", "", _docstring(item)), *field_rows(item, f"{path} #n.")]
        else:
            meaning = rule.note or ("" if rule.example is None else f"e.g. {toml_value(rule.example)}")
            rows.append(FieldRow(path, _type_words(hints[f.name], rule), _default(f), _limits(rule), meaning))
    return rows


def _type_words(hint: Any, rule: Rule) -> str:
    kinds = kinds_of(hint)
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
    return "" if f.default in (dataclasses.MISSING, None, ()) else toml_value(f.default)


def _limits(rule: Rule) -> str:
    if rule.choices:
        return ", ".join(rule.choices)
    parts = ["above 0"] if rule.positive else []
    parts += [f"{word} {human_bytes(bound) if rule.unit == 'size' else number_text(bound)}"
              for word, bound in (("at least", rule.least), ("at most", rule.most)) if bound is not None]
    if rule.unit:
        parts.append(f"a {rule.unit} with its unit, or its number")
    return "; ".join(parts + ([rule.what] if rule.pattern and rule.what else []))


def _docstring(kind: Any) -> str:
    """A dataclass's docstring on one line ("" when it has none: then Python gives its signature)."""
    doc = kind.__doc__ or ""
    return "" if doc.startswith(f"{kind.__name__}(") else " ".join(doc.split())
