"""Every RocksDB export, applied to RocksDB itself and read back from it: what the library then holds is the config.

The OPTIONS file goes through native/readback (``LoadOptionsFromFile``, ``DB::Open``, then the OPTIONS file RocksDB
writes and the block cache's capacity as the library reports it); db_bench's flags and kvbench's option map are run
by their driver, and read back from the OPTIONS file and the LOG RocksDB writes in the database.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import optuna
import pytest

from knobtune.knobs import load_catalog
from knobtune.systems import export_format
from knobtune.drivers.kvbench import find_kvbench
from knobtune.systems.rocksdb.formats import block_cache_logged

from readback import options_settings

READBACK = Path(__file__).resolve().parents[1] / "native" / "build" / "rocksdb-options-readback"
pytestmark = pytest.mark.skipif(not READBACK.is_file(), reason="native/ is not built (scripts/setup builds it)")

# Easy to drop: the block cache (no OPTIONS field), its shards, the bloom filter (a table option), a memtable
# factory with its prefix extractor (two objects), compression; and the row cache, which no OPTIONS file holds.
CONFIG = {"cache_size": "1GiB", "cache_numshardbits": 4, "bloom_bits": 14, "memtablerep": "hash_linkedlist",
          "prefix_size": 8, "hash_bucket_count": 4096, "allow_concurrent_memtable_write": False,
          "compression_type": "zstd", "write_buffer_size": "32MiB", "max_background_jobs": 4,
          "row_cache_size": "16MiB"}
# What RocksDB must hold after opening under CONFIG, as its own OPTIONS file spells it.
HELD = ("filter_policy=bloomfilter:14:false", "prefix_extractor=rocksdb.FixedPrefix.8", "compression=kZSTD",
        "write_buffer_size=33554432", "max_background_jobs=4", "allow_concurrent_memtable_write=false")
FACTORY = re.compile(r"^memtable_factory=\{id=HashLinkListRepFactory;.*bucket_count=4096;", re.MULTILINE)


@pytest.fixture(scope="module")
def rocksdb_catalog():
    return load_catalog("rocksdb")


def _measured(catalog, tmp_path: Path, flags: list[str] | None = None
              ) -> tuple[dict[tuple[str, str], str], dict[str, str] | None, str]:
    """What RocksDB held when db_bench ran CONFIG as a study measures it (its flags; or ``flags``): options, block
    cache, LOG."""
    if flags is None:
        flags = export_format("rocksdb", "db_bench", "db_bench-flags").render(catalog, catalog.config(CONFIG)).split()
    db = tmp_path / "measured"
    subprocess.run(["db_bench", f"--db={db}", "--benchmarks=fillseq", "--num=1", *flags], check=True,
                   capture_output=True)
    log = (db / "LOG").read_text()
    return options_settings(sorted(db.glob("OPTIONS-*"))[-1].read_text()), block_cache_logged(log), log


def test_the_options_file_loads_into_what_was_measured_and_says_what_it_cannot_hold(rocksdb_catalog,
                                                                                     tmp_path: Path) -> None:
    spec = export_format("rocksdb", "db_bench", "rocksdb-options")
    exported = spec.render(rocksdb_catalog, rocksdb_catalog.config(CONFIG))
    assert "info_log_level" not in exported and "listeners=" not in exported, "no build's or db_bench's own defaults"
    options = tmp_path / "OPTIONS.ini"
    options.write_text(exported)
    ran = subprocess.run([str(READBACK), str(options), str(tmp_path / "db")], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    held = json.loads(ran.stdout)
    written = Path(held["options_file"]).read_text()

    assert held["block_cache_capacity"] == 2**30, "the block cache as the library reports it"
    for line in HELD:
        assert re.search(rf"^\s*{re.escape(line)}$", written, re.MULTILINE), line
    assert FACTORY.search(written.replace("  ", "")), "the memtable factory with its bucket count"
    loaded = options_settings(written)
    for key, value in options_settings(exported).items():  # every line of the export is what RocksDB holds
        if key[1] != "block_cache":  # RocksDB never writes the cache; it is checked through the library
            assert loaded.get(key) == value, key

    measured, measured_cache, _ = _measured(rocksdb_catalog, tmp_path)
    differs = {key for key in measured.keys() | loaded.keys() if measured.get(key) != loaded.get(key)}
    assert differs <= {("[DBOptions]", "info_log_level"), ("[DBOptions]", "listeners")}, \
        "the export is what db_bench ran"
    assert not {"info_log_level", "listeners", "error_if_exists"} & {key for _, key in options_settings(exported)}
    assert block_cache_logged((tmp_path / "db" / "LOG").read_text()) == measured_cache, "the same cache: shards, pools"
    assert measured_cache is not None and set(measured_cache) == {"capacity", "num_shard_bits", "strict_capacity_limit",
                                                                  "high_pri_pool_ratio", "low_pri_pool_ratio"}
    assert measured_cache["num_shard_bits"] == "4" and measured_cache["high_pri_pool_ratio"] == "0.000"

    assert held["row_cache_capacity"] is None, "an OPTIONS file cannot hold the row cache ..."
    beside = spec.beside(rocksdb_catalog, rocksdb_catalog.config(CONFIG))
    assert len(beside) == 1 and beside[0].suffix == ".cc" and "row cache" in beside[0].note
    assert "db_options.row_cache = rocksdb::NewLRUCache(16777216);" in beside[0].text, "... the code beside it does"
    command = re.search(r"run it as measured with (db_bench .*)", exported).group(1).split()
    assert "--row_cache_size=16777216" in command, "db_bench's flags that run it as measured ..."
    db = tmp_path / "db_bench"
    subprocess.run([*command[:1], f"--db={db}", *(c.replace("FILE", str(options)) for c in command[1:]),
                    "--benchmarks=fillseq", "--num=1"], check=True, capture_output=True)
    assert block_cache_logged((db / "LOG").read_text()) == measured_cache, "... its cache too"
    rerun = options_settings(sorted(db.glob("OPTIONS-*"))[-1].read_text())
    rerun_differs = {k for k in rerun.keys() | measured.keys() if rerun.get(k) != measured.get(k)}
    assert rerun_differs <= {("[DBOptions]", "listeners")}


def test_db_bench_flags_run_rocksdb_with_every_value(rocksdb_catalog, tmp_path: Path) -> None:
    measured, cache, log = _measured(rocksdb_catalog, tmp_path)
    written = "\n".join(f"{key}={value}" for (_, key), value in measured.items())
    for line in HELD:
        assert line in written.splitlines(), line
    assert FACTORY.search(written)
    assert cache is not None and (cache["capacity"], cache["num_shard_bits"]) == ("1073741824", "4")
    assert re.search(r"Options\.row_cache: 16777216$", log, re.MULTILINE), "the row cache as RocksDB logged it"


def test_a_kvbench_studys_exports_are_what_kvbench_ran(rocksdb_catalog, tmp_path: Path) -> None:
    """kvbench-config, run by kvbench, holds every value; the study's OPTIONS file (written as kvbench opens the
    store, whose defaults are not db_bench's) loads into exactly what kvbench ran."""
    kvbench_config = {k: v for k, v in CONFIG.items() if rocksdb_catalog.knobs[k].supports("kvbench")}
    assert set(CONFIG) - set(kvbench_config) == {"cache_numshardbits", "row_cache_size"}  # kvbench cannot set them
    config = rocksdb_catalog.config(kvbench_config)
    exported = export_format("rocksdb", "kvbench", "kvbench-config").render(rocksdb_catalog, config)
    spec = {"seed": 1, "key_size": 16, "value_size": 100, "record_count": 10, "write_sync": False,
            "statistics": False, "phases": [{"name": "load", "kind": "fill", "order": "sequential"},
                                            {"name": "flush", "kind": "flush"}],
            "config": json.loads(exported)}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    db = tmp_path / "kvbench"
    subprocess.run([find_kvbench(), "--engine", "rocksdb", "--db", str(db), "--spec", str(tmp_path / "spec.json"),
                    "--result", str(tmp_path / "result.json")], check=True, capture_output=True)
    ran = sorted(db.glob("OPTIONS-*"))[-1].read_text()
    for line in HELD:
        assert re.search(rf"^\s*{re.escape(line)}$", ran, re.MULTILINE), line
    assert FACTORY.search(ran.replace("  ", ""))
    cache = block_cache_logged((db / "LOG").read_text())
    assert cache is not None and cache["capacity"] == "1073741824"

    options = tmp_path / "OPTIONS.ini"
    options.write_text(export_format("rocksdb", "kvbench", "rocksdb-options").render(rocksdb_catalog, config))
    read = subprocess.run([str(READBACK), str(options), str(tmp_path / "db")], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    loaded = options_settings(Path(json.loads(read.stdout)["options_file"]).read_text())
    ran_settings = options_settings(ran)
    differs = {key for key in ran_settings.keys() | loaded.keys() if ran_settings.get(key) != loaded.get(key)}
    opening = {("[DBOptions]", key)
               for key in ("error_if_exists", "create_if_missing", "create_missing_column_families")}
    assert differs <= opening, "the export is what kvbench ran"  # but how kvbench and the read-back open it
    assert block_cache_logged((tmp_path / "db" / "LOG").read_text()) == cache, "the same cache: shards, pools"

    flags = export_format("rocksdb", "kvbench", "db_bench-flags")
    measured, _, _ = _measured(rocksdb_catalog, tmp_path, flags.render(rocksdb_catalog, config).split())
    table = next(section for section, _ in measured if section.startswith("[TableOptions/BlockBasedTable"))
    assert measured[(table, "index_shortening")] != ran_settings[(table, "index_shortening")], "no knob holds it"
    pipelined = ("[DBOptions]", "enable_pipelined_write")
    assert measured[pipelined] == ran_settings[pipelined] == "true", "a knob: kvbench is given the catalog's default"
    beside = flags.beside(rocksdb_catalog, config)  # so a kvbench study's flags come with the file of what it ran
    assert len(beside) == 1 and beside[0].suffix == ".options" and "index_shortening" in beside[0].note
    assert options_settings(beside[0].text) == options_settings(options.read_text())


@pytest.mark.slow
def test_export_writes_what_the_file_cannot_hold_beside_it_and_never_drops_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from knobtune.cli import app

    runner, home = CliRunner(), str(tmp_path / "studies")
    tuned = runner.invoke(app, ["tune", "rocksdb", "--workload", "put-get-delete", "--records", "1000", "--trials", "2",
                                "--knobs", "row_cache_size,cache_size", "--sampler", "random", "--seed", "3",
                                "--study", "rc", "--dir", home, "--verify-top", "0", "--json"])
    assert tuned.exit_code == 0, tuned.output
    # a slow first run of the default calls for a control, which can take trial number 1: pick a trial with a row cache
    trials = optuna.load_study(study_name="rc", storage=f"sqlite:///{home}/studies.db").get_trials(deepcopy=False)
    cached = [t.number for t in trials if t.params.get("row_cache_size")]
    assert cached, [(t.number, t.state.name, t.params) for t in trials]
    export = ["export", "rc", "--dir", home, "--format", "rocksdb-options", "--trial", str(cached[0])]
    refused = runner.invoke(app, export)  # to stdout there is no beside: it says what the file cannot hold
    assert refused.exit_code != 0 and "an OPTIONS file cannot hold it" in str(refused.exception)
    options = tmp_path / "OPTIONS.ini"
    written = runner.invoke(app, [*export, "-o", str(options)])
    assert written.exit_code == 0, written.output
    assert f"wrote {options}.cc: the row cache" in written.output.replace("\n", " ")
    assert "# NOT IN THIS FILE: the row cache" in options.read_text()
    code = Path(f"{options}.cc")
    assert re.search(r"db_options\.row_cache = rocksdb::NewLRUCache\(\d+\);", code.read_text())
    compiled = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", str(code)], capture_output=True,
                              text=True)
    assert compiled.returncode == 0, compiled.stderr
