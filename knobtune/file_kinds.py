"""Every kind of file knobtune reads through its schema (``knobtune.schema``), in one list (``FILE_KINDS``): what
the JSON Schemas, the corpus tests and the page of fields (docs/files.md) are made from.

``python -m knobtune.file_kinds > docs/files.md`` writes that page: per kind, each field's path, type, default,
range or choices and meaning, read from the kinds' dataclasses (a test holds the committed page to it). Run from
the source tree, it adds the bench suite's question files (``FILE_KIND`` of bench/suite.py).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from knobtune import schema_views
from knobtune.analysis.diagnosis import RulesFile
from knobtune.described.command import CommandSection
from knobtune.described.system_schema import SystemDocument
from knobtune.drivers.kvbench_phases import KvbenchSection
from knobtune.knobs.catalog_schema import CatalogDoc
from knobtune.report.config_file import BaselineConfig, ExportedConfig
from knobtune.systems.postgresql.pgbench import PgbenchSection
from knobtune.systems.postgresql.pgtune_rules import Pgtune
from knobtune.systems.postgresql.section import ReplaySection as PostgresReplaySection
from knobtune.systems.rocksdb.db_bench_workload import DbBenchSection
from knobtune.systems.rocksdb.replay import ReplaySection as RocksdbReplaySection
from knobtune.targets import CountersFile, KnownConfigFile
from knobtune.tuning.document import ExperimentDoc
from knobtune.workloads.capture import CaptureSummary
from knobtune.workloads.spec import WorkloadDocument

SOURCE_TREE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FileKind:
    """One kind of file: its top document (a dataclass of the schema), where such files are, and its page."""

    name: str
    document: type
    files: str  # where the files of this kind are, or the section of a file it is
    docs: str  # the page that explains it


FILE_KINDS: tuple[FileKind, ...] = (
    FileKind("experiment", ExperimentDoc, "a file given to `--experiment`; stored on every study",
             "docs/experiment.md"),
    FileKind("system file", SystemDocument, "a server described as data: `knobtune/systems/SYSTEM/system.toml` or "
             "a user's .toml", "docs/system-file.md"),
    FileKind("pgbench section", PgbenchSection, "`[drivers.pgbench]` of a workload", "docs/workloads.md"),
    FileKind("sysbench section", CommandSection, "`[drivers.sysbench]` of a workload (and any driver a system file "
             "runs)", "docs/system-file.md"),
    FileKind("kvbench section", KvbenchSection, "`[drivers.kvbench]` of a workload", "docs/workloads.md"),
    FileKind("db_bench section", DbBenchSection, "`[drivers.db_bench]` of a workload", "docs/workloads.md"),
    FileKind("PostgreSQL replay section", PostgresReplaySection, "`[drivers.replay]` of a PostgreSQL capture",
             "docs/replay.md"),
    FileKind("RocksDB replay section", RocksdbReplaySection, "`[drivers.replay]` of a RocksDB capture",
             "docs/replay.md"),
    FileKind("diagnosis rules", RulesFile, "`knobtune/systems/SYSTEM/rules.toml`", "docs/diagnosis.md"),
    FileKind("counter descriptions", CountersFile, "`knobtune/systems/SYSTEM/counters.toml`", "docs/diagnosis.md"),
    FileKind("known config", KnownConfigFile, "`knobtune/systems/rocksdb/rocksdb-guide.toml`, `db-bench-*.toml`",
             "docs/rocksdb.md"),
    FileKind("PGTune rules", Pgtune, "`knobtune/systems/postgresql/pgtune.toml`", "docs/postgresql.md"),
    FileKind("workload", WorkloadDocument, "`knobtune/workloads/data/*.toml`, a user's workload file, a capture's "
             "`capture.toml` (its driver sections are the kinds above)", "docs/workloads.md"),
    FileKind("capture summary", CaptureSummary, "`[capture]` of a capture's `capture.toml`", "docs/replay.md"),
    FileKind("catalog", CatalogDoc, "`knobtune/systems/SYSTEM/catalog.toml`, a system file's catalog",
             "docs/catalog-format.md"),
    FileKind("exported config", ExportedConfig, "what `knobtune export --format json` writes; `compare --config` "
             "reads it", "docs/experiment.md"),
    FileKind("baseline config", BaselineConfig, "what `knobtune baseline -o` writes; `compare --config` reads it",
             "docs/experiment.md"),
)


def source_tree_kinds(root: Path = SOURCE_TREE) -> tuple[FileKind, ...]:
    """``FILE_KINDS``, and the bench suite's question files when ``root`` holds bench/suite.py."""
    suite = root / "bench" / "suite.py"
    if not suite.is_file():
        return FILE_KINDS
    module = sys.modules.get("suite")  # bench/ holds scripts, not a package: they import it as "suite"
    if module is None:
        spec = importlib.util.spec_from_file_location("suite", suite)
        if spec is None or spec.loader is None:
            return FILE_KINDS
        module = sys.modules["suite"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return (*FILE_KINDS, module.FILE_KIND)


def page(kinds: tuple[FileKind, ...]) -> str:
    """The Markdown page of every field of ``kinds``."""
    lines = ["# The files knobtune reads", "",
             "Every file below is read through one schema (`knobtune/schema.py`): a field it does not know is refused "
             "with the nearest name, at any depth, and a value of the wrong type, range or choice in one line naming "
             "the field and the fix. The same dataclasses give each kind's JSON Schema (`schema_views`) and "
             "this page.", "",
             "Generated by `.venv/bin/python -m knobtune.file_kinds > docs/files.md`; a test holds the page to it. "
             "In a path, `NAME` is a key the file's author chooses and `#n` the n-th table of a list of tables."]
    for kind in kinds:
        lines += ["", f"## {kind.name}", "", f"{kind.files}. {_first(kind.document)} "
                  f"Explained in `{kind.docs}`.", "",
                  "| field | type | default | range or choices | meaning |", "|---|---|---|---|---|"]
        lines += [f"| `{row.path}` | {row.type} | {_code(row.default)} | {_cell(row.limits)} | {_cell(row.meaning)} |"
                  for row in schema_views.field_rows(kind.document)]
    return "\n".join(lines) + "\n"


def _first(document: type) -> str:
    """The first line of a document's docstring."""
    return (document.__doc__ or "").split("\n")[0]


def _code(text: str) -> str:
    return f"`{_cell(text)}`" if text and text != "required" else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    print(page(source_tree_kinds()), end="")
