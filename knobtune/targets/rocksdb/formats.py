"""RocksDB's own formats, whatever driver ran the study: the OPTIONS file RocksDB writes, and db_bench's flags."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import ConfigError
from knobtune.knobs import Catalog, Value, render_flags
from knobtune.targets._formats import ExportFormat
from knobtune.targets._process import run_logged
from knobtune.targets.rocksdb.build import find_db_bench

_ROCKSDB_ERROR = re.compile(r"error|Invalid argument|Not supported|should be", re.IGNORECASE)


def _rocksdb_options(catalog: Catalog, config: Mapping[str, Value]) -> str:
    """The OPTIONS file RocksDB itself writes when opened under ``config`` (through db_bench, one key).

    Raises:
        ConfigError: RocksDB refused the config.
        ToolMissingError: no db_bench is built or installed.
    """
    binary = find_db_bench()
    with tempfile.TemporaryDirectory(prefix="knobtune-options-") as tmp:
        db_dir, log = Path(tmp) / "db", Path(tmp) / "log"
        argv = [binary, f"--db={db_dir}", "--benchmarks=fillseq", "--num=1", "--progress_reports=false",
                *render_flags(catalog, config, "db_bench")]
        result = run_logged(argv, log_path=log, timeout_s=60)
        written = sorted(db_dir.glob("OPTIONS-*"))
        if result.returncode != 0 or not written:
            lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
            said = [line for line in lines if _ROCKSDB_ERROR.search(line)] or lines[-2:]
            raise ConfigError(f"cannot write an OPTIONS file for this config (RocksDB said: "
                              f"{' | '.join(said[-2:])[-300:]}). Fix: export a config that ran, e.g. the study's result")
        options = written[-1].read_text()
    return _options_header(catalog.changed(config)) + options


def _options_header(changed: Mapping[str, Value]) -> str:
    lines = ["# Written by RocksDB 7.8 itself for this configuration (knobtune export --format rocksdb-options).",
             "# Load it with rocksdb::LoadOptionsFromFile or db_bench --options_file=FILE."]
    if "cache_size" in changed:
        lines.append(f"# Not representable in an OPTIONS file: block cache of {changed['cache_size']} bytes; "
                     "set BlockBasedTableOptions::block_cache = NewLRUCache(...) in code.")
    if "row_cache_size" in changed:
        lines.append(f"# Not representable in an OPTIONS file: row cache of {changed['row_cache_size']} bytes; "
                     "set DBOptions::row_cache = NewLRUCache(...) in code.")
    return "\n".join(lines) + "\n"


ROCKSDB_OPTIONS = ExportFormat("rocksdb-options", "RocksDB's own OPTIONS file, written by RocksDB", "#",
                               _rocksdb_options)
DB_BENCH_FLAGS = ExportFormat("db_bench-flags", "db_bench command-line flags", None,
                              lambda catalog, config: " ".join(render_flags(catalog, config, "db_bench")) + "\n")
FORMATS = (ROCKSDB_OPTIONS, DB_BENCH_FLAGS)
