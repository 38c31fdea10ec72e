"""Walking a document of the schema field by field, for tests that break each field of a file in turn: every field
given at every depth (with its keys and the label the reader says), and a value of another type for a field."""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any


def fields(kind: Any, data: Mapping[str, Any], prefix: tuple[Any, ...] = (), label: str = "") -> \
        Iterator[tuple[tuple[Any, ...], str, Any, Any]]:
    """Every field given in ``data`` at every depth: (its keys from the top, its label as the reader says it, its
    type, its dataclass field)."""
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        if f.name not in data:
            continue
        keys, path = (*prefix, f.name), f"{label}.{f.name}" if label else f.name
        yield keys, path, hints[f.name], f
        yield from inside(inner(hints[f.name]), data[f.name], keys, path)


def inside(hint: Any, value: Any, keys: tuple[Any, ...], path: str) -> Iterator[tuple[tuple[Any, ...], str, Any,
                                                                                         Any]]:
    if dataclasses.is_dataclass(hint):
        yield from fields(hint, value, keys, path)
    elif typing.get_origin(hint) is tuple and dataclasses.is_dataclass(typing.get_args(hint)[0]):
        for i, item in enumerate(value):
            yield from fields(typing.get_args(hint)[0], item, (*keys, i), f"{path} #{i + 1}")
    elif typing.get_origin(hint) in (Mapping, dict):
        for name, item in value.items():
            yield (*keys, name), f"{path}.{name}", typing.get_args(hint)[1], None
            yield from inside(inner(typing.get_args(hint)[1]), item, (*keys, name), f"{path}.{name}")


def inner(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(hint) else hint


def wrong(hint: Any) -> Any:
    """A value of another type than ``hint`` (None: any value is of its type)."""
    kinds = [k for k in typing.get_args(hint) if k is not type(None)] if typing.get_origin(hint) in (
        typing.Union, types.UnionType) else [hint]
    if len(kinds) > 1:  # one of several kinds (a number or an expression): true or false is none of them
        return None if bool in kinds else True
    hint = kinds[0]
    if hint is Any:
        return None
    if hint in (int, float):
        return "many"
    if hint is bool:
        return "yes"
    if hint is str:
        return 5
    return 5 if typing.get_origin(hint) in (tuple, Mapping, dict) or dataclasses.is_dataclass(hint) else None


def broken(data: Mapping[str, Any], what: str, keys: tuple[Any, ...], label: str, value: Any) -> \
        tuple[dict[str, Any], list[str]]:
    """A copy of ``data`` with one field broken (``what``: "misspelt", its key becomes ``value``; else its value
    does), and the words the reader's one line must hold."""
    copied = copy.deepcopy(dict(data))
    parent = copied
    for key in keys[:-1]:
        parent = parent[key]
    if what == "misspelt":
        parent[value] = parent.pop(keys[-1])
        return copied, [f"unknown field '{label.rsplit('.', 1)[0] + '.' if '.' in label else ''}{value}'",
                        f"did you mean '{keys[-1]}'"]
    parent[keys[-1]] = value
    return copied, [f"{label} "]
