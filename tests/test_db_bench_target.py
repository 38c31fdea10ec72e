"""The db_bench target against the real db_bench at tiny sizes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from knobtune.errors import ToolMissingError
from knobtune.targets import FailureKind, RunFailure
from knobtune.systems import export_format, make_target
from knobtune.systems.rocksdb.build import rocksdb_build
from knobtune.systems.rocksdb.db_bench import parse_output

from conftest import tiny


def _run(rocksdb, workload, tmp_path: Path, changes: dict, rung: int = -1, timeout_s: float | None = 60):
    with make_target(rocksdb, workload, tmp_path / "scratch") as target:
        return target.run(rocksdb.config(changes), workload.rungs[rung], timeout_s=timeout_s,
                          log_path=tmp_path / "run.log", seed=7)


def test_default_run_measures_every_phase(rocksdb, tiny_pgd, tmp_path: Path) -> None:
    measurement = _run(rocksdb, tiny_pgd, tmp_path, {})
    assert [p.name for p in measurement.phases] == ["filluniquerandom", "readrandom", "deleterandom"]
    read = measurement.phases[1]
    assert read.found == read.expected == 4000
    assert measurement.verified and measurement.elapsed_s > 0 and measurement.ops_per_s > 0
    assert measurement.p99_us is not None and measurement.p99_us > 0
    assert measurement.log_path.exists()
    assert not (tmp_path / "scratch").exists(), "scratch data left behind"


def test_rocksdb_runs_on_the_release_build_without_assertions(rocksdb, tiny_pgd, tmp_path: Path) -> None:
    """Users deploy release builds: db_bench and kvbench run on the one the set-up made, never Debian's (whose
    every call checks assertions and whose db_bench says so before each run)."""
    build = rocksdb_build()
    assert build.release and "release" in build.description, build.description
    library = Path(build.db_bench).parents[1] / "lib" / "librocksdb.so"
    imported = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True).stdout
    assert "__assert_fail" not in imported, "the release build's library checks assertions"  # Debian's does
    measurement = _run(rocksdb, tiny_pgd, tmp_path, {})
    logs = [measurement.log_path] + ([measurement.settle.log_path] if measurement.settle else [])
    assert all("Assertions are enabled" not in log.read_text() for log in logs)
    with make_target(rocksdb, tiny_pgd, tmp_path / "kv", "kvbench") as target:
        assert "release" in target.version(), target.version()


def test_refused_config_is_a_refusal_with_the_reason(rocksdb, tiny_pgd, tmp_path: Path) -> None:
    with pytest.raises(RunFailure) as caught:
        _run(rocksdb, tiny_pgd, tmp_path, {"memtablerep": "prefix_hash", "allow_concurrent_memtable_write": False})
    assert caught.value.kind is FailureKind.REFUSED
    assert "prefix_size" in caught.value.reason


def test_fifo_trap_is_data_loss(rocksdb, tmp_path: Path) -> None:
    """FIFO compaction with db_bench's size limit of 0 drops the files it writes: the reads find it out."""
    workload = tiny("put-get-delete", 5000)
    with pytest.raises(RunFailure) as caught:
        _run(rocksdb, workload, tmp_path, {"compaction_style": "fifo", "write_buffer_size": "1MiB"})
    assert caught.value.kind is FailureKind.DATA_LOSS
    assert caught.value.reason.startswith("data loss: ") and "of 5,000 keys found" in caught.value.reason


def test_timeout_kills_the_run(rocksdb, tmp_path: Path) -> None:
    workload = tiny("put-get-delete", 20000)
    with pytest.raises(RunFailure) as caught:
        _run(rocksdb, workload, tmp_path, {}, timeout_s=0.3)
    assert caught.value.kind is FailureKind.TIMEOUT
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout
    assert leftover == "", "db_bench left running after its timeout"


def test_missing_db_bench_is_a_clear_error(rocksdb, tiny_pgd, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("KNOBTUNE_ROCKSDB_RELEASE", str(tmp_path / "no-build"))
    with pytest.raises(ToolMissingError, match="scripts/setup"):
        with make_target(rocksdb, tiny_pgd, tmp_path / "scratch"):
            pass


def test_options_file_export_loads_in_rocksdb(rocksdb, tiny_pgd, tmp_path: Path) -> None:
    changes = {"write_buffer_size": "32MiB", "compression_type": "lz4", "bloom_bits": 10,
               "level_compaction_dynamic_level_bytes": True, "max_background_jobs": 4}
    text = export_format("rocksdb", "db_bench", "rocksdb-options").render(rocksdb, rocksdb.config(changes))
    options = tmp_path / "OPTIONS.ini"
    options.write_text(text)
    db = tmp_path / "db"
    result = subprocess.run(["db_bench", f"--db={db}", f"--options_file={options}", "--benchmarks=fillseq,readrandom",
                             "--num=1000"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(1000 of 1000 found)" in result.stdout
    written = next(db.glob("OPTIONS-*")).read_text()  # what RocksDB opened with: our values, not its defaults
    assert "write_buffer_size=33554432" in written
    assert "compression=kLZ4Compression" in written
    assert "filter_policy=bloomfilter:10" in written
    assert "max_background_jobs=4" in written


def test_flags_export_is_the_changed_knobs(rocksdb, tiny_pgd, tmp_path: Path) -> None:
    flags = export_format("rocksdb", "kvbench", "db_bench-flags").render(
        rocksdb, rocksdb.config({"compaction_style": "universal", "cache_size": "1GiB"}))
    assert flags.split() == ["--cache_size=1073741824", "--compaction_style=1"]


def test_parse_output_reads_results_and_histograms() -> None:
    text = """filluniquerandom :      32.361 micros/op 30898 ops/sec 1.618 seconds 50000 operations;  302.2 MB/s
Microseconds per write:
Count: 2000 Average: 6.3870  StdDev: 84.60
Min: 3  Median: 3.7038  Max: 3787
Percentiles: P50: 3.70 P75: 4.45 P99: 9.53 P99.9: 76.00 P99.99: 3787.00
readrandom   :      19.200 micros/op 52079 ops/sec 0.960 seconds 50000 operations;  509.4 MB/s (1545 of 50000 found)
"""
    fill, read = parse_output(text)
    assert (fill.name, fill.ops, fill.seconds, fill.p99_us, fill.max_us) == ("filluniquerandom", 50000, 1.618, 9.53,
                                                                             3787)
    assert (read.found, read.expected, read.p99_us) == (1545, 50000, None)


def test_options_export_of_a_refused_config_is_a_clear_error(rocksdb, tiny_pgd, tmp_path: Path) -> None:
    from knobtune.errors import ConfigError

    refused = rocksdb.config({"memtablerep": "prefix_hash", "allow_concurrent_memtable_write": False})
    with pytest.raises(ConfigError, match="cannot write an OPTIONS file.*prefix_size"):
        export_format("rocksdb", "db_bench", "rocksdb-options").render(rocksdb, refused)
