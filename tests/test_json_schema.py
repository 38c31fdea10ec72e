"""Each document kind read through the schema has a JSON Schema (``schema_views.json_schema``, draft 2020-12) that says
what its reader says: the same fields (no other: ``additionalProperties: false``), the same required ones, choices,
ranges and defaults; and every shipped file of each kind reads through the reader.

The JSON Schemas are not run through a JSON Schema validator here: the ``jsonschema`` package is not among the
project's dependencies. What is checked is that each JSON Schema is the dataclasses' own schema, field by field."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from knobtune import schema, schema_views
from knobtune.datafile import read_toml
from knobtune.described.command import CommandSection
from knobtune.described.system_schema import SystemDocument
from knobtune.drivers.kvbench_phases import KvbenchSection
from knobtune.errors import KnobtuneError
from knobtune.file_kinds import source_tree_kinds
from knobtune.knobs.catalog_schema import CatalogDoc
from knobtune.report.config_file import BaselineConfig, ExportedConfig
from knobtune.systems.postgresql.pgbench import PgbenchSection
from knobtune.systems.postgresql.pgtune_rules import RULES_PATH as PGTUNE, Pgtune
from knobtune.systems.postgresql.section import ReplaySection as PostgresReplaySection
from knobtune.systems.rocksdb.db_bench_workload import DbBenchSection
from knobtune.systems.rocksdb.replay import ReplaySection as RocksdbReplaySection
from knobtune.analysis.diagnosis import RulesFile
from knobtune.targets import CountersFile, KnownConfigFile
from knobtune.tuning.document import ExperimentDoc
from knobtune.workloads.capture import CaptureSummary
from knobtune.workloads.spec import WorkloadDocument

from conftest import CORPUS
from schema_walk import broken, fields, wrong

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = sorted((ROOT / "knobtune" / "workloads" / "data").glob("*.toml"))
SECTIONS = {"pgbench": PgbenchSection, "sysbench": CommandSection, "kvbench": KvbenchSection,
            "db_bench": DbBenchSection}
sys.path.insert(0, str(ROOT / "bench"))
import suite  # noqa: E402  (bench/ holds scripts, not a package)

KINDS = [kind.document for kind in source_tree_kinds()]  # every kind the schema reads (knobtune.file_kinds)
KNOWN_CONFIGS = sorted(p for p in ROOT.glob("knobtune/systems/*/*.toml")
                       if p.stem not in ("catalog", "rules", "counters", "system", "pgtune"))


def _shipped() -> list[tuple[type, Path, dict[str, Any]]]:
    """Every shipped file (or workload section) of each kind read through the schema, with its data."""
    files: list[tuple[type, Path, dict[str, Any]]] = []
    for path in sorted(ROOT.glob("knobtune/systems/*/system.toml")):
        files.append((SystemDocument, path, read_toml(path, KnobtuneError, "system file")))
    for path in sorted(CORPUS.glob("experiments/good-*.toml")):
        files.append((ExperimentDoc, path, read_toml(path, KnobtuneError, "experiment")))
    for path in sorted(ROOT.glob("knobtune/systems/*/rules.toml")):
        files.append((RulesFile, path, read_toml(path, KnobtuneError, "rules")))
    for path in sorted(ROOT.glob("knobtune/systems/*/counters.toml")):
        files.append((CountersFile, path, read_toml(path, KnobtuneError, "counters")))
    for path in KNOWN_CONFIGS:
        files.append((KnownConfigFile, path, read_toml(path, KnobtuneError, "known config")))
    files.append((Pgtune, PGTUNE, read_toml(PGTUNE, KnobtuneError, "PGTune's rules")))
    for path in sorted(suite.QUESTIONS.glob("*.toml")):
        files.append((suite.QuestionDoc, path, read_toml(path, KnobtuneError, "question")))
    for path in WORKLOADS:
        workload = read_toml(path, KnobtuneError, "workload")
        drivers = workload.get("drivers", {})
        files += [(WorkloadDocument, path, workload)]
        files += [(kind, path, dict(drivers[name])) for name, kind in SECTIONS.items() if name in drivers]
    for path in sorted(ROOT.glob("knobtune/systems/*/catalog.toml")):
        files.append((CatalogDoc, path, read_toml(path, KnobtuneError, "catalog")))
    for path in sorted(CORPUS.glob("captures/*/capture.toml")):  # a capture holds a user's data: none is shipped
        capture = read_toml(path, KnobtuneError, "capture")
        files += [(WorkloadDocument, path, capture), (CaptureSummary, path, capture["capture"])]
    return files


SHIPPED = _shipped()


@pytest.mark.parametrize(("kind", "path", "data"), SHIPPED,
                         ids=[f"{kind.__name__}-{path.stem}" for kind, path, _ in SHIPPED])
def test_every_shipped_file_of_each_kind_reads_through_the_schema(kind: type, path: Path, data: dict) -> None:
    extra = getattr(kind, "json_extra", None)  # a sysbench section's own fields: placeholders, number or text
    own = {k: v for k, v in data.items() if extra and k not in {f.name for f in dataclasses.fields(kind)}}
    assert all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in own.values())
    document = schema.read(kind, {k: v for k, v in data.items() if k not in own}, schema.Where(str(path)),
                           KnobtuneError)
    assert isinstance(document, kind)


def test_each_kind_has_shipped_files() -> None:
    assert {kind for kind, _, _ in SHIPPED} == {ExperimentDoc, SystemDocument, *SECTIONS.values(), WorkloadDocument,
                                                CaptureSummary, CatalogDoc, RulesFile, CountersFile, KnownConfigFile,
                                                Pgtune, suite.QuestionDoc}
    assert {PostgresReplaySection, RocksdbReplaySection} <= set(KINDS)  # a capture's: none shipped


@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
def test_the_json_schema_is_the_documents_schema_field_by_field(kind: type) -> None:
    written = schema_views.json_schema(kind)
    assert written["$schema"] == "https://json-schema.org/draft/2020-12/schema" and written["title"] == kind.__name__
    assert json.loads(json.dumps(written)) == written  # plain JSON
    assert _compare(kind, written) > 0


def _compare(kind: Any, node: dict[str, Any]) -> int:
    """Check one dataclass's JSON Schema against it (and its sections, recursively); the fields checked."""
    fields = {f.name: f for f in dataclasses.fields(kind)}
    assert node["type"] in ("object", ["object", "null"])
    assert node["additionalProperties"] == getattr(kind, "json_extra", False)
    assert list(node["properties"]) == list(fields)
    assert node.get("required", []) == [
        n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    hints = typing.get_type_hints(kind)
    checked = 0
    for name, f in fields.items():
        prop, rule = node["properties"][name], f.metadata.get("rule", schema.Rule())
        hint = _inner(hints[name])
        if dataclasses.is_dataclass(hint):
            checked += _compare(hint, prop)
            continue
        args = typing.get_args(hint)
        if typing.get_origin(hint) is tuple and args and dataclasses.is_dataclass(args[0]):
            assert prop["type"] == "array"
            checked += _compare(args[0], prop["items"])
            continue
        if typing.get_origin(hint) in (dict, typing.get_origin(typing.Mapping[str, str])):
            assert prop["type"] == "object" and "properties" not in prop
            if dataclasses.is_dataclass(args[1]):
                checked += _compare(args[1], prop["additionalProperties"])
            prop = prop["additionalProperties"]
            hint = args[1]
        checked += 1
        kinds = [k for k in typing.get_args(hints[name]) if k is not type(None)]
        if typing.get_origin(hints[name]) in (typing.Union, types.UnionType) and len(kinds) > 1:  # number or text
            assert [p["type"] for p in prop["anyOf"]] == [{int: "integer", float: "number", bool: "boolean",
                                                           str: "string"}[k] for k in kinds]
            continue
        if typing.get_origin(hint) is tuple and args[0] is int:  # a list of whole numbers
            assert prop["type"] == "array" and prop["items"] == {"type": "integer"}
            continue
        value = next((p for p in prop.get("anyOf", []) if p.get("type") != "string"), prop) if rule.unit else prop
        if isinstance(value.get("type"), list):  # a JSON file's optional field may be null (json_null)
            assert getattr(kind, "json_null", False) and value["type"][1] == "null"
            value = {**value, "type": value["type"][0]}
        if hint in (int, float):
            assert value["type"] == {int: "integer", float: "number"}[hint]
            assert value.get("minimum") == rule.least and value.get("maximum") == rule.most
            assert ("exclusiveMinimum" in value) == rule.positive
        elif hint is bool:
            assert value["type"] == "boolean"
        elif hint is str:
            assert value["type"] == "string" and value.get("enum", []) == list(rule.choices)
            if "pattern" in value:
                re.compile(value["pattern"])  # an anchored regular expression Python reads too
        if f.default not in (dataclasses.MISSING, None) and not dataclasses.is_dataclass(f.default):
            assert node["properties"][name]["default"] == (list(f.default) if isinstance(f.default, tuple)
                                                           else f.default)
    return checked


def _inner(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(hint) else hint


def test_a_misspelt_field_is_what_the_json_schema_leaves_out_too() -> None:
    """The reader refuses ``[settle] wiat``; the JSON Schema closes [settle] to its own fields, so an editor does."""
    settle = schema_views.json_schema(SystemDocument)["properties"]["settle"]
    assert "wiat" not in settle["properties"] and settle["additionalProperties"] is False
    assert set(settle["properties"]) == {"sql", "wait", "dirty_sql"}
    wait = settle["properties"]["wait"]
    assert wait["properties"]["poll_s"] == {"type": "number", "maximum": 10.0, "exclusiveMinimum": 0, "default": 0.2}
    pgbench = schema_views.json_schema(PgbenchSection)["properties"]
    assert pgbench["clients"] == {"type": "integer", "minimum": 1, "default": 1}
    assert pgbench["check"]["enum"] == ["tpcb", "tpcc", "rows"]


def test_the_four_file_kinds_json_schemas_close_every_depth() -> None:
    """A workload's top level and its capture, a catalog's knobs, a config file's machine: each closed to its own
    fields, with the types and ranges the reader holds them to."""
    workload = schema_views.json_schema(WorkloadDocument)["properties"]
    assert workload["ladder"]["type"] == "array" and workload["ladder"]["items"] == {
        "type": "number", "maximum": 1.0, "exclusiveMinimum": 0}
    assert workload["drivers"] == {"type": "object", "additionalProperties": {"type": "object",
                                                                              "additionalProperties": {}}}
    fingerprint = workload["capture"]["properties"]["fingerprints"]["items"]
    assert fingerprint["additionalProperties"] is False and set(fingerprint["properties"]) == {"text", "count",
                                                                                               "total_s"}
    assert workload["capture"]["properties"]["format"] == {"type": "integer", "minimum": 1, "default": 1,
                                                           "description": "the layout of capture.toml (absent: 1)"}
    knob = schema_views.json_schema(CatalogDoc)["properties"]["knobs"]["additionalProperties"]
    assert knob["additionalProperties"] is False and knob["required"] == ["type", "default"]
    assert knob["properties"]["type"]["enum"] == ["int", "float", "bool", "enum", "bytes", "duration"]
    assert knob["properties"]["conditions"]["items"]["required"] == ["knob", "values"]
    machine = schema_views.json_schema(BaselineConfig)["properties"]["machine"]
    assert machine["properties"]["disk"]["enum"] == ["ssd", "hdd", "san"] and machine["additionalProperties"] is False
    assert machine["type"] == ["object", "null"] and machine["properties"]["connections"]["type"] == ["integer", "null"]
    assert schema_views.json_schema(ExportedConfig)["required"] == ["config"]


def _broken(kind: type, data: dict) -> list[tuple[str, tuple[Any, ...], str, Any]]:
    """Each field given in ``data``, at every depth, misspelt and then of a wrong type: (what, keys, label, value);
    a field of the same name at the same depth once (a catalog's hundred knobs share their fields)."""
    cases, seen = [], set()
    for keys, label, hint, f in fields(kind, data):
        if (f is None, str(keys[-1]) if f is not None else "", len(keys)) in seen:
            continue
        seen.add((f is None, str(keys[-1]) if f is not None else "", len(keys)))
        if f is not None:  # a field the schema names (not a key the file's author names)
            cases.append(("misspelt", keys, label, f"{keys[-1]}x"))
        if (value := wrong(hint)) is not None:
            cases.append(("wrong-type", keys, label, value))
    return cases


@pytest.mark.parametrize("kind", sorted({k for k, _, _ in SHIPPED}, key=lambda k: k.__name__),
                         ids=lambda k: k.__name__)
def test_each_kind_refuses_a_misspelt_field_and_a_wrong_type_at_every_depth_of_its_shipped_files_in_one_line(
        kind: type) -> None:
    """Every shipped file of the kind, each field it gives at every depth broken in turn: the schema's one line
    naming the field (its nearest name when misspelt) and the fix. No hand-written check stands in front of it."""
    tried = 0
    for _, path, data in [s for s in SHIPPED if s[0] is kind]:
        extra = {f.name for f in dataclasses.fields(kind)}
        data = {k: v for k, v in data.items() if not getattr(kind, "json_extra", None) or k in extra}
        for what, keys, label, value in _broken(kind, data):
            changed, words = broken(data, what, keys, label, value)
            with pytest.raises(KnobtuneError) as refused:
                schema.read(kind, changed, schema.Where(str(path)), KnobtuneError)
            line = str(refused.value)
            assert "\n" not in line and "Fix: " in line, line
            assert all(w in line for w in words), (words, line)
            tried += 1
    assert tried >= 3, f"{kind.__name__}: {tried} cases"
