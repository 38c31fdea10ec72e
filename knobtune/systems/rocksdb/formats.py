"""RocksDB's own formats, whatever driver ran the study: the OPTIONS file RocksDB writes, and db_bench's flags.

The OPTIONS file is the one RocksDB writes when the study's driver opens a
database under the config (db_bench, or kvbench for a kvbench study: the two
leave different values at their defaults), with what RocksDB writes but cannot
be deployed as measured mended:
- the block cache: RocksDB never writes it, though ``LoadOptionsFromFile``
  reads a ``block_cache={capacity=...}`` line of the table's section (RocksDB
  7.8, table/block_based/block_based_table_factory.cc: parsed, not
  serialized). The export adds that line with the cache db_bench built, as
  RocksDB logged it (capacity, shards, pool ratios).
- ``info_log_level``: its default is DEBUG_LEVEL in a build without NDEBUG
  (include/rocksdb/options.h) and no knob of ours; left out, the loading
  build's own default holds. ``listeners``: db_bench's own error listener.
  ``create_if_missing``, ``error_if_exists``, ...: how to open is the
  application's.
- the row cache (``DBOptions::row_cache``) and ``disable_wal`` (a
  ``WriteOptions`` field) have no place in the file: the export writes C++
  that sets them beside it (``Beside``), and says so.
db_bench's ``--options_file`` replaces the file's block cache with its own
``--cache_size`` (8 MiB unless given) and takes the row cache only from
``--row_cache_size``: the file's header gives the flags that run it as measured.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from knobtune.errors import ConfigError
from knobtune.knobs import Catalog, Value, render_every, render_flags
from knobtune.drivers.embedded import find_kvbench
from knobtune.targets import Beside, ExportFormat
from knobtune.server.process import run_logged
from knobtune.systems.rocksdb.build import find_db_bench

_ROCKSDB_ERROR = re.compile(r"error|Invalid argument|Not supported|should be", re.IGNORECASE)
_TABLE_SECTION = re.compile(r'^\[TableOptions/BlockBasedTable "[^"]*"\]$')
# see the module's note; and how to open (create it, fail if it exists) is the application's, not a knob's
_NOT_DEPLOYED = ("info_log_level", "listeners", "create_if_missing", "create_missing_column_families",
                 "error_if_exists")
_CACHE_FIELDS = ("capacity", "num_shard_bits", "strict_capacity_limit", "high_pri_pool_ratio", "low_pri_pool_ratio")
_CACHE_FIELD = re.compile(r"^\s+(" + "|".join(_CACHE_FIELDS) + r")\s*:\s*(\S+)\s*$")


def _opened_by_db_bench(catalog: Catalog, config: Mapping[str, Value], tmp: Path) -> tuple[Path, Path, bool]:
    """db_bench opens a database under ``config`` and writes one key: the database folder, db_bench's output, and
    whether it succeeded."""
    binary = find_db_bench()
    db_dir, log = tmp / "db", tmp / "log"
    result = run_logged([binary, f"--db={db_dir}", "--benchmarks=fillseq", "--num=1", "--progress_reports=false",
                         *render_flags(catalog, config, "db_bench")], log_path=log, timeout_s=60)
    return db_dir, log, result.returncode == 0


def _opened_by_kvbench(catalog: Catalog, config: Mapping[str, Value], tmp: Path) -> tuple[Path, Path, bool]:
    """kvbench opens a database under ``config`` (its own option map) and writes one key: as a kvbench study ran."""
    spec = {"seed": 1, "key_size": 16, "value_size": 100, "record_count": 1, "write_sync": False,
            "statistics": False, "phases": [{"name": "load", "kind": "fill", "order": "sequential"}],
            "config": render_every(catalog, config, "kvbench")}
    (tmp / "spec.json").write_text(json.dumps(spec))
    db_dir, log = tmp / "db", tmp / "log"
    result = run_logged([find_kvbench(), "--engine", "rocksdb", "--db", str(db_dir), "--spec", str(tmp / "spec.json")],
                        log_path=log, timeout_s=60)
    return db_dir, log, result.returncode == 0


def _options_written(opened: Callable[[Catalog, Mapping[str, Value], Path], tuple[Path, Path, bool]]
                     ) -> Callable[[Catalog, Mapping[str, Value]], str]:
    """The OPTIONS file RocksDB itself writes when ``opened`` (a driver) opens it under a config, with the block
    cache that driver built and without the build's logging defaults (the module's note).

    The function returned raises ConfigError (RocksDB refused the config) or ToolMissingError (no driver).
    """
    def render(catalog: Catalog, config: Mapping[str, Value]) -> str:
        with tempfile.TemporaryDirectory(prefix="knobtune-options-") as tmp:
            db_dir, log, ran = opened(catalog, config, Path(tmp))
            written = sorted(db_dir.glob("OPTIONS-*"))
            if not ran or not written:
                lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
                said = [line for line in lines if _ROCKSDB_ERROR.search(line)] or lines[-2:]
                raise ConfigError(f"cannot write an OPTIONS file for this config (RocksDB said: "
                                  f"{' | '.join(said[-2:])[-300:]}). Fix: export a config that ran, e.g. the "
                                  "study's result")
            options = written[-1].read_text()
            cache = block_cache_logged((db_dir / "LOG").read_text(errors="replace"))
        return _options_header(catalog, config, cache) + deployable_options(options, cache)
    return render


def block_cache_logged(log: str) -> dict[str, str] | None:
    """The block cache as RocksDB logged it at open (its table options in LOG), or None when there is none."""
    fields: dict[str, str] = {}
    inside = False
    for line in log.splitlines():
        if "no_block_cache: 1" in line:
            return None
        if line.strip() == "block_cache_options:":
            inside = True
        elif inside and not line.startswith("    "):  # the block's end: its fields are indented by four
            break
        elif inside and (match := _CACHE_FIELD.match(line)):
            fields[match.group(1)] = match.group(2)
    return fields or None


def deployable_options(options: str, cache: Mapping[str, str] | None) -> str:
    """``options`` (an OPTIONS file RocksDB wrote) with the block cache's line added to each table section and the
    lines that are no knob's left out (the module's note)."""
    lines = []
    for line in options.splitlines():
        if line.strip().split("=", 1)[0] in _NOT_DEPLOYED:
            continue
        lines.append(line)
        if cache and _TABLE_SECTION.match(line.strip()):
            spelled = {k: ("true" if v == "1" else "false") if k == "strict_capacity_limit" else v
                       for k, v in cache.items()}
            lines.append("  block_cache={" + ";".join(f"{k}={spelled[k]}" for k in _CACHE_FIELDS if k in spelled)
                         + "}")
    return "\n".join(lines) + "\n"


def _options_header(catalog: Catalog, config: Mapping[str, Value], cache: Mapping[str, str] | None) -> str:
    changed = catalog.changed(config)
    flags = ["--options_file=FILE", f"--cache_size={cache['capacity'] if cache else 0}"]
    if cache:  # db_bench builds its cache from these flags, not from the file's line
        flags += [f"--cache_numshardbits={cache.get('num_shard_bits', -1)}",
                  f"--cache_high_pri_pool_ratio={cache.get('high_pri_pool_ratio', 0)}",
                  f"--cache_low_pri_pool_ratio={cache.get('low_pri_pool_ratio', 0)}"]
    flags += [f"--{name}={'1' if value is True else value}" for name, value in sorted(changed.items())
              if name in _CODE_BESIDE]
    lines = ["# Written by RocksDB itself for this configuration (knobtune export --format rocksdb-options), with the",
             "# block cache it ran with (block_cache=..., read by LoadOptionsFromFile; RocksDB does not write it).",
             "# Load it with rocksdb::LoadOptionsFromFile. db_bench replaces the file's block cache with its own",
             f"# --cache_size: run it as measured with db_bench {' '.join(flags)}"]
    return "\n".join(lines) + "\n"


# What an OPTIONS file cannot hold: knob -> the C++ line that sets it (``{value}``) and what it is.
_CODE_BESIDE = {
    "row_cache_size": ("  db_options.row_cache = rocksdb::NewLRUCache({value});",
                       "the row cache (DBOptions::row_cache)"),
    "disable_wal": ("  write_options.disableWAL = {value};", "disable_wal (WriteOptions::disableWAL, for every write)"),
}


def _beside_options(catalog: Catalog, config: Mapping[str, Value]) -> tuple[Beside, ...]:
    """C++ that sets what the OPTIONS file cannot hold (``_CODE_BESIDE``), when ``config`` changes any of it."""
    changed = {name: value for name, value in sorted(catalog.changed(config).items()) if name in _CODE_BESIDE}
    if not changed:
        return ()
    code = [_CODE_BESIDE[name][0].replace("{value}", "true" if value is True else "false" if value is False
                                          else str(value)) for name, value in changed.items()]
    text = "\n".join([
        "// Written by knobtune beside an OPTIONS file: what the file cannot hold. Call this after",
        "// rocksdb::LoadOptionsFromFile(config_options, OPTIONS_FILE, &db_options, &cf_descs) and before DB::Open;",
        "// pass write_options to every write.",
        "#include <rocksdb/cache.h>",
        "#include <rocksdb/options.h>",
        "",
        "void knobtune_beside_options(rocksdb::DBOptions& db_options, rocksdb::WriteOptions& write_options) {",
        *code,
        "  (void)db_options;",
        "  (void)write_options;",
        "}",
    ]) + "\n"
    what = ", ".join(f"{_CODE_BESIDE[name][1]} = {value}" for name, value in changed.items())
    return (Beside(f"{what}: an OPTIONS file cannot hold it; the C++ beside it (FILE.cc) sets it", ".cc", text, "//"),)


ROCKSDB_OPTIONS = ExportFormat("rocksdb-options", "RocksDB's own OPTIONS file, written by RocksDB", "#",
                               _options_written(_opened_by_db_bench), _beside_options)
# A kvbench study's: kvbench is given every knob of the catalog it can set, but leaves RocksDB's own defaults where
# db_bench sets values no knob holds (index_shortening, pin_top_level_index_and_filter, dump_malloc_stats, FIFO's
# options), so its file is written as kvbench opens the store.
ROCKSDB_OPTIONS_KVBENCH = ExportFormat("rocksdb-options", "RocksDB's own OPTIONS file, written by RocksDB as kvbench "
                                       "opened it", "#", _options_written(_opened_by_kvbench), _beside_options)


def _db_bench_flags(catalog: Catalog, config: Mapping[str, Value]) -> str:
    return " ".join(render_flags(catalog, config, "db_bench")) + "\n"


def _kvbench_options_beside(catalog: Catalog, config: Mapping[str, Value]) -> tuple[Beside, ...]:
    """For a kvbench study's flags: the OPTIONS file of what kvbench ran, which db_bench's own defaults are not."""
    return (Beside("db_bench sets its own defaults where kvbench ran RocksDB's for options no knob holds "
                   "(index_shortening, pin_top_level_index_and_filter, dump_malloc_stats, FIFO's options), so these "
                   "flags alone do not run what was measured; FILE.options beside it is what kvbench ran (db_bench "
                   "--options_file, as its header says)", ".options",
                   ROCKSDB_OPTIONS_KVBENCH.render(catalog, config)),)


DB_BENCH_FLAGS = ExportFormat("db_bench-flags", "db_bench command-line flags", None, _db_bench_flags)
# A kvbench study's flags: the changed knobs, and beside them the OPTIONS file of what kvbench ran.
DB_BENCH_FLAGS_KVBENCH = ExportFormat("db_bench-flags", "db_bench command-line flags (with the OPTIONS file of what "
                                      "kvbench ran beside them)", None, _db_bench_flags, _kvbench_options_beside)
FORMATS = (ROCKSDB_OPTIONS, DB_BENCH_FLAGS)
