"""A config file: a JSON file that ``compare --config FILE``, ``diagnose --config FILE`` and a start from a file read.

Three kinds are read: what ``knobtune export --format json`` writes (``ExportedConfig``), what ``knobtune baseline
-o`` writes (``BaselineConfig``), each read through the one schema (``knobtune.schema``: an unknown field at any
depth refused with the nearest name, a wrong type in one line naming the field and the fix), and a plain
``{"knob": value}`` object, whose knobs the system's catalog checks. A file knobtune wrote for another system, or
of another kind (a report's data, a sweep's), is refused by name.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from knobtune import schema
from knobtune.errors import UsageError
from knobtune.schema import required, setting, table
from knobtune.targets import DISKS

DOCS = "docs/experiment.md"
FIX = "Fix: give a file written by `knobtune export --format json` or a {\"knob\": value} object"
CONFIG = {"example": {"write_buffer_size": 67108864}, "note": "knob -> value, as the system's catalog names them"}


@dataclass(frozen=True, kw_only=True)
class ExportedConfig:
    """A study's config as ``knobtune export --format json`` writes it: the config, and what the study said of it."""

    written_by: str = setting("", example="knobtune 0.4.0")
    system: str = setting("", example="rocksdb", note="whose config it is: another system's is refused")
    study: str = setting("", example="pgd-1")
    workload: str = setting("", example="put-get-delete")
    config: Mapping[str, Any] = required(**CONFIG)
    verified: bool = setting(False, example=True)
    verdict: str = setting("", example="1.8x the default")
    allow_unsafe: bool = setting(False, example=False)
    allow_operational: bool = setting(False, example=False)
    unsafe_knobs: Mapping[str, str] = table(example="durability")  # knob -> its safety class
    left_out_unsafe: Mapping[str, str] = table(example="durability")  # knob -> the class kept out of the search
    warnings: tuple[str, ...] = setting((), items="lines", example=["..."])
    settled: bool = setting(True, example=True)
    costs: Mapping[str, Mapping[str, Any]] = table(example={"workload_s": 1.5})  # role -> what its runs cost


@dataclass(frozen=True, kw_only=True)
class MachineFacts:
    """The machine a heuristic's config was made for."""

    json_null: ClassVar[bool] = True  # connections is null when the profile's count was used

    memory_bytes: int = required(least=1, example=8589934592)
    cpus: int = required(least=1, example=4)
    disk: str = setting("ssd", choices=DISKS, what="a disk type")
    connections: int | None = setting(None, least=1, example=100)


@dataclass(frozen=True, kw_only=True)
class BaselineConfig:
    """The config a heuristic users know (PGTune, a guide's settings) makes, as ``knobtune baseline -o`` writes it."""

    json_null: ClassVar[bool] = True

    written_by: str = setting("", example="knobtune 0.4.0")
    system: str = required(example="postgresql", note="whose config it is: another system's is refused")
    baseline: str = required(example="pgtune")
    profile: str = setting("", example="oltp")
    machine: MachineFacts | None = None
    max_connections: int = setting(0, least=0, example=100)
    config: Mapping[str, Any] = required(**CONFIG)
    notes: tuple[str, ...] = setting((), items="lines", example=["..."])
    source: Mapping[str, Any] = table(example="https://pgtune.leopard.in.ua")  # where the heuristic is published


KINDS: tuple[type, ...] = (ExportedConfig, BaselineConfig)


def load_config_file(path: Path, system: str | None = None) -> dict[str, Any]:
    """Changed knobs from a JSON config file (see the module doc), of ``system`` when given.

    Raises:
        UsageError: the file is unreadable, not UTF-8, not JSON, holds a number that is not finite (NaN, Infinity),
            a misspelt or wrongly typed field (one line per problem), or is knobtune's file of another system or of
            another kind (a report, a sweep).
    """
    data = _parsed(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path} holds no JSON object of knobs. Fix: write {{\"knob\": value, ...}}")
    if "config" not in data and not difflib.get_close_matches("config", [str(k) for k in data], n=1):
        if "written_by" in data:
            raise UsageError(f"{path} is a file knobtune wrote that holds no config (a report's or a sweep's data). "
                             f"{FIX}")
        return data  # a plain {"knob": value} object: the catalog checks its knobs
    where = schema.Where(str(path), docs=DOCS)
    document: ExportedConfig | BaselineConfig = schema.read(BaselineConfig, data, where, UsageError) \
        if _kind(data) is BaselineConfig else schema.read(ExportedConfig, data, where, UsageError)
    if system is not None and document.system and document.system != system:
        raise UsageError(f"{path} is a config of {document.system}, not {system}. Fix: give a {system} config "
                         f"(`knobtune export --format json` of a {system} study)")
    return dict(document.config)


def _kind(data: Mapping[str, Any]) -> type:
    """The kind whose fields the file holds most of (a misspelt field leaves the others to tell it)."""
    return max(KINDS, key=lambda kind: len({f.name for f in dataclasses.fields(kind)} & set(data)))


def _parsed(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes().decode("utf-8-sig"), parse_constant=_no_constant)
    except OSError as exc:
        raise UsageError(f"cannot read config file {path} ({exc.strerror}). Fix: check the path") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}). {FIX}") from None
    except _NotFinite as exc:
        raise UsageError(f"{path} holds {exc}, which is no knob's value. {FIX}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}). {FIX}") from None


class _NotFinite(ValueError):
    """A JSON constant (NaN, Infinity) in a config file."""


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)
