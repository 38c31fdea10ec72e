"""Four file kinds read through the one schema (workloads, captures, catalogs, config JSON): a misspelt field and a
wrong type at every depth of each kind, made from one full file of the kind field by field, is refused in exactly
one line naming the field and the fix; odd but valid files (a UTF-8 BOM, spaces in the path, very long values) and
every file knobtune writes of each kind are read."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from knobtune.errors import KnobtuneError
from knobtune.knobs import load_catalog
from knobtune.knobs.catalog_schema import CatalogDoc
from knobtune.report.config_file import BaselineConfig, ExportedConfig, load_config_file
from knobtune.workloads import load_workload
from knobtune.workloads.capture import CAPTURE_FORMAT, CaptureSummary, _toml
from knobtune.workloads.spec import WorkloadDocument

from conftest import CORPUS
from schema_walk import broken, fields as _fields, wrong as _wrong

SHA = "0123456789abcdef" * 4
CAPTURE = {"format": 2, "system": "rocksdb", "operations": 3, "span_s": 0.5, "sessions": 1,
           "mix": {"get": 2, "put": 1}, "fingerprints": [{"text": "get", "count": 2, "total_s": 0.1}],
           "files": {"trace": SHA}, "notes": ["a trace holds no iterator Next calls"], "scans": {"scans": 1}}
WORKLOAD = {"name": "mine", "description": "every field once", "systems": ["rocksdb"], "objective": "elapsed_s",
            "ladder": [0.5, 1.0], "records": 2000, "key_size": 16, "value_size": 100, "operations": 2000,
            "counts": "operations", "drivers": {"replay": {"trace": "trace", "pace": "fast"}}, "capture": CAPTURE}
KNOB = {"type": "bytes", "default": "4MiB", "min": "1MiB", "max": "1GiB", "log": True, "special": {"0": "off"},
        "unit": "bytes", "restart": True, "safety": "safe", "safety_note": "none", "group": "memory",
        "description": "a size", "names": {"flags": "size"}, "spell": {"flags": {"a": "0"}}, "tunable": True,
        "search_special": True, "drivers": ["patched"], "data_sized": True, "data_sized_min": "64KiB",
        "conditions": [{"knob": "mode", "values": ["b"]}]}
CATALOG = {"system": "toy", "version": "1", "description": "every field once", "formats": ["flags"],
           "memory": {"planned": [["size", 2]], "write_buffers": [["size"]]},
           "knobs": {"size": KNOB, "other": {"type": "int", "default": 1, "min": 0, "max": 10},
                     "mode": {"type": "enum", "choices": ["a", "b"], "default": "a", "unsafe_values": ["b"]}},
           "relations": [{"left": "size", "op": ">=", "right": "other", "factor": 2.0, "when": {"mode": ["a"]}}],
           "implications": [{"when": {"mode": ["b"]}, "then": {"other": 2}}]}
EXPORTED = {"written_by": "knobtune 0.4.0", "system": "rocksdb", "study": "s", "workload": "put-get-delete",
            "config": {"block_size": 16384}, "verified": True, "verdict": "1.2x", "allow_unsafe": False,
            "allow_operational": False, "unsafe_knobs": {"disable_wal": "durability"},
            "left_out_unsafe": {"disable_wal": "durability"}, "warnings": ["w"], "settled": True,
            "costs": {"default": {"workload_s": 1.0}}}
BASELINE = {"written_by": "knobtune 0.4.0", "system": "rocksdb", "baseline": "rocksdb-guide", "profile": "",
            "machine": {"memory_bytes": 2**30, "cpus": 2, "disk": "ssd", "connections": 10}, "max_connections": 0,
            "config": {"block_size": 16384}, "notes": ["n"], "source": {"page": "https://example.org"}}


def _write_toml(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(_toml(data))
    return path


def _capture_folder(path: Path, data: Mapping[str, Any]) -> Path:
    folder = path.with_suffix(".capture")
    folder.mkdir(mode=0o700)
    _write_toml(folder / "capture.toml", data).chmod(0o600)
    return folder


def _write_json(path: Path, data: Mapping[str, Any]) -> Path:
    path.with_suffix(".json").write_text(json.dumps(data))
    return path.with_suffix(".json")


# kind -> (its document, a full file of it, how it is written, how knobtune reads it)
KINDS: dict[str, tuple[type, dict[str, Any], Callable[[Path, Mapping[str, Any]], Path], Callable[[Path], Any]]] = {
    "workload": (WorkloadDocument, WORKLOAD, _write_toml, load_workload),
    "capture": (WorkloadDocument, WORKLOAD, _capture_folder, load_workload),
    "catalog": (CatalogDoc, CATALOG, _write_toml, load_catalog),
    "exported-config": (ExportedConfig, EXPORTED, _write_json, lambda p: load_config_file(p, "rocksdb")),
    "baseline-config": (BaselineConfig, BASELINE, _write_json, lambda p: load_config_file(p, "rocksdb")),
}


def _cases() -> list[tuple[str, str, tuple[Any, ...], str, Any]]:
    """(kind, what, the keys of the field, its label, the value or new key) for every field of every kind."""
    cases = []
    for name, (kind, full, _, _) in KINDS.items():
        for keys, label, hint, f in _fields(kind, full):
            if name == "capture" and keys[0] != "capture":
                continue  # a capture's top level is a workload's
            if f is not None:  # a field the schema names (not a key the file's author names)
                cases.append((name, "misspelt", keys, label, f"{keys[-1]}x"))
            if (wrong := _wrong(hint)) is not None:
                cases.append((name, "wrong-type", keys, label, wrong))
    return cases


CASES = _cases()


def test_every_kind_has_cases_at_every_depth() -> None:
    depths = {name: {label.count(".") + label.count("#") for n, _, _, label, _ in CASES if n == name}
              for name in KINDS}
    assert all(len(found) >= 2 for found in depths.values()), depths
    assert max(depths["catalog"]) >= 3 and max(depths["capture"]) >= 2 and len(CASES) > 150


@pytest.mark.parametrize(("name", "what", "keys", "label", "value"), CASES,
                         ids=[f"{n}-{w}-{label}" for n, w, _, label, _ in CASES])
def test_a_misspelt_or_wrongly_typed_field_at_any_depth_is_one_line(name: str, what: str, keys: tuple[Any, ...],
                                                                   label: str, value: Any, tmp_path: Path) -> None:
    _, full, write, read = KINDS[name]
    data, words = broken(full, what, keys, label, value)
    path = write(tmp_path / "file.toml", data)
    with pytest.raises(KnobtuneError) as refused:
        read(path)
    line = str(refused.value)
    assert "\n" not in line and "Fix: " in line and str(path) in line, line
    assert all(w in line for w in words), (words, line)


def test_the_full_file_of_each_kind_reads(tmp_path: Path) -> None:
    for name, (_, full, write, read) in KINDS.items():
        assert read(write(tmp_path / f"{name}.toml", full)), name


def _bom(text: str) -> str:
    return "\ufeff" + text


def test_odd_but_valid_files_are_read(tmp_path: Path) -> None:
    """A UTF-8 BOM, spaces and non-ASCII letters in the path, very long values."""
    folder = tmp_path / "my files é"
    folder.mkdir()
    long_text = "ü" + "x" * 20000
    workload = folder / "a workload.toml"
    workload.write_text(_bom(_toml({**WORKLOAD, "description": long_text, "ladder": [i / 100 for i in range(1, 101)],
                                    "records": 2**62, "capture": {**CAPTURE, "notes": [long_text] * 50}})))
    assert load_workload(workload).description == long_text and len(load_workload(workload).ladder) == 100
    capture = _capture_folder(folder / "my capture", {**WORKLOAD, "capture": {**CAPTURE, "fingerprints": [
        {"text": long_text, "count": 2**40, "total_s": 1e9}] * 200}})
    (capture / "capture.toml").write_text(_bom((capture / "capture.toml").read_text()))
    assert len(load_workload(capture).capture.fingerprints) == 200  # type: ignore[union-attr]
    catalog = folder / "a catalog.toml"
    knobs = {f"knob_{i}": {"type": "int", "default": 1, "min": 0, "max": 2**62, "description": long_text}
             for i in range(300)}
    catalog.write_text(_bom(_toml({**CATALOG, "knobs": {**CATALOG["knobs"], **knobs}})))
    assert len(load_catalog(catalog).knobs) == 303
    for full in (EXPORTED, BASELINE):
        config = folder / "a config.json"
        config.write_text(_bom(json.dumps({**full, "config": {"block_size": 16384, "db_log_dir": long_text}})))
        assert load_config_file(config, "rocksdb")["db_log_dir"] == long_text


def test_a_capture_written_before_formats_were_numbered_reads_as_format_1(tmp_path: Path) -> None:
    """tests/corpus/captures/rocksdb-format-1 is capture.toml as knobtune wrote it before ``[capture] format``."""
    folder = tmp_path / "old.capture"
    shutil.copytree(CORPUS / "captures" / "rocksdb-format-1", folder)
    for path in (folder, *folder.iterdir()):
        path.chmod(0o700 if path.is_dir() else 0o600)
    assert "format" not in (folder / "capture.toml").read_text()
    workload = load_workload(folder)
    assert workload.capture is not None and workload.capture.format == 1 and workload.capture.mix["get"] == 1500
    assert workload.capture.record()["format"] == CAPTURE_FORMAT  # what knobtune writes now says its format


def test_a_newer_capture_format_is_refused_with_its_fix(tmp_path: Path) -> None:
    folder = _capture_folder(tmp_path / "new", {**WORKLOAD, "capture": {**CAPTURE, "format": CAPTURE_FORMAT + 1}})
    with pytest.raises(KnobtuneError, match=rf"capture.format {CAPTURE_FORMAT + 1} is newer than this knobtune reads "
                                            r"\(1 to \d\). Fix: tune it with the knobtune that made it"):
        load_workload(folder)


def test_what_knobtune_writes_of_each_kind_reads_back(tmp_path: Path) -> None:
    """``export --format json`` of a study and ``baseline -o`` of every baseline, read as ``compare --config``
    reads them; a capture's summary written by ``write_capture`` (the RocksDB capture tests make real ones)."""
    from knobtune.cli import run
    from knobtune.storage import open_store

    studies = tmp_path / "studies"
    studies.mkdir()
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", studies / "studies.db")
    open_store(studies).storage()
    exported = tmp_path / "exported.json"
    assert run(["export", "old-release", "--format", "json", "-o", str(exported), "--dir", str(studies)]) == 0
    assert load_config_file(exported, "rocksdb") == json.loads(exported.read_text())["config"]
    for system, *options in (("rocksdb",), ("rocksdb", "--name", "db-bench-universal"),
                             ("postgresql", "--profile", "oltp", "--connections", "50")):
        path = tmp_path / f"{system}-{len(options)}.json"
        assert run(["baseline", system, *options, "-o", str(path)]) == 0
        assert load_config_file(path, system) == json.loads(path.read_text())["config"]
    assert CaptureSummary.from_record(CAPTURE).format == 2

