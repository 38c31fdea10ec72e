"""Good and bad corpus of every file format: each bad file gives its one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.described.system_file import load_system_file
from knobtune.errors import CatalogError, WorkloadError
from knobtune.knobs import load_catalog
from knobtune.schema import to_dict, to_toml
from knobtune.systems import target_class, workload_section
from knobtune.tuning.document import ExperimentError, load_document
from knobtune.workloads import load_workload

from conftest import CORPUS


def _expected(path: Path) -> str:
    return path.read_bytes().decode(errors="replace").splitlines()[0].removeprefix("# expect: ")


@pytest.mark.parametrize("path", sorted((CORPUS / "catalogs").glob("bad-*.toml")), ids=lambda p: p.stem)
def test_bad_catalog(path: Path) -> None:
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    message = str(caught.value)
    assert _expected(path) in message
    assert str(path) in message and "Fix:" in message


@pytest.mark.parametrize("path", sorted((CORPUS / "catalogs").glob("good-*.toml")), ids=lambda p: p.stem)
def test_good_catalog(path: Path) -> None:
    catalog = load_catalog(path)
    assert catalog.knobs["size"].default == 4 * 1024**2
    assert catalog.knobs["limit"].special == {-1: "unlimited"}
    assert catalog.knobs["mode"].drivers == ("patched",) and catalog.knobs["size"].drivers == ()


def _read_whole(path: Path) -> None:
    """The workload file and each driver section a target of its systems reads (as ``tune`` asks for them)."""
    workload = load_workload(path)
    for driver in workload.drivers:
        for system in workload.systems:
            if target_class(system, driver) is not None:
                workload_section(system, driver, workload)


@pytest.mark.parametrize("path", sorted((CORPUS / "workloads").glob("bad-*.toml")), ids=lambda p: p.stem)
def test_bad_workload(path: Path) -> None:
    with pytest.raises(WorkloadError) as caught:
        _read_whole(path)
    assert _expected(path) in str(caught.value) and "Fix:" in str(caught.value)
    assert "\n" not in str(caught.value), "each bad file holds one problem: one line"


def test_good_workload() -> None:
    workload = load_workload(CORPUS / "workloads" / "good-small.toml")
    assert [r.records for r in workload.rungs] == [1000, 2000]


@pytest.mark.parametrize("path", sorted((CORPUS / "systems").glob("bad-*.toml")), ids=lambda p: p.stem)
def test_bad_system_file(path: Path) -> None:
    with pytest.raises(CatalogError) as caught:
        load_system_file(path)
    message = str(caught.value)
    assert _expected(path) in message and str(path.resolve()) in message and "Fix:" in message
    assert "\n" not in message, "each bad file holds one problem: one line"


def test_good_system_file() -> None:
    files = load_system_file(CORPUS / "systems" / "good-minimal.toml")
    assert files.name == "toy" and files.config_flag == "--{name}={value}"
    assert files.load_sql == ("CREATE TABLE t (n INT)",)
    assert files.settle.wait_sql == "SELECT 0" and files.settle.poll_s == 0.5 and files.counters is not None
    assert files.counters.levels == {"dirty_at_end"} and files.drivers == {"toybench": ("--socket={socket}",)}
    assert [f.name for f in files.formats] == ["toy-conf"] and files.known[0].values == {"size": "memory_bytes // 2"}


@pytest.mark.parametrize("path", sorted((CORPUS / "experiments").glob("bad-*.toml")), ids=lambda p: p.stem)
def test_bad_experiment(path: Path) -> None:
    with pytest.raises(ExperimentError) as caught:
        load_document(path)
    message = str(caught.value)
    assert _expected(path) in message and str(path) in message and "Fix:" in message
    assert "\n" not in message, "each bad document holds one problem: one line"


def test_good_experiments_read_with_their_units_and_write_back_as_they_read(tmp_path: Path) -> None:
    everything = load_document(CORPUS / "experiments" / "good-everything.toml")
    assert everything.budget.time_s == 600.0 and everything.limits.memory_limit_bytes == 2 << 30
    assert everything.search.knobs == ("write_buffer_size", "max_background_jobs")
    assert everything.limits.production_data_bytes == 500 << 30 and not everything.research.rules
    minimal = load_document(CORPUS / "experiments" / "good-minimal.toml")
    assert minimal.search.sampler == "tpe" and minimal.proof.repeats == 5 and minimal.research.rules
    for document in (everything, minimal):
        written = tmp_path / "written.toml"
        written.write_text(to_toml(document))
        assert load_document(written) == document and to_dict(load_document(written)) == to_dict(document)


def test_a_document_with_several_problems_names_each_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "many.toml"
    path.write_text('system = "rocksdb"\n[workload]\nname = "pgd"\n[search]\nseed = -1\nsampler = "x"\n'
                    '[budget]\ntrials = 0\n')
    with pytest.raises(ExperimentError) as caught:
        load_document(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{path}: ") and "Fix:" in line for line in lines)
    assert [next(p for p in ("search.sampler", "search.seed", "budget.trials") if p in line) for line in lines] == \
        ["search.sampler", "search.seed", "budget.trials"]


def test_missing_catalog_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read the catalog"):
        load_catalog(tmp_path / "absent.toml")


def test_unknown_system_and_workload() -> None:
    with pytest.raises(CatalogError, match="Fix: choose one of .*rocksdb"):
        load_catalog("mongodb")
    with pytest.raises(WorkloadError, match="choose one of"):
        load_workload("ycsb-z")


def test_cassandra_yaml_writes_units_and_the_special_values_as_cassandra_5_reads_them() -> None:
    from knobtune.systems.cassandra.formats import cassandra_jvm_flags, cassandra_yaml_settings

    catalog = load_catalog("cassandra")
    config = catalog.config({"key_cache_size": 0, "sstable_preemptive_open_interval": -1, "compaction_throughput": 0,
                             "commitlog_sync_period": "2s", "trickle_fsync": True, "concurrent_reads": 64,
                             "jvm_heap_size": "2GiB", "jvm_gc": "zgc"})
    assert cassandra_yaml_settings(catalog, config) == {
        "commitlog_sync_period": "2000ms", "compaction_throughput": "0MiB/s", "concurrent_reads": "64",
        "key_cache_size": "0MiB", "sstable_preemptive_open_interval": "null", "trickle_fsync": "true"}
    flags = cassandra_jvm_flags(catalog, config)
    assert flags == ["-Xmx2147483648", "-Xms2147483648", "-XX:+UseZGC"], "G1's own flags go with G1 only"


def test_a_rung_raised_to_the_smallest_data_set_is_said_in_one_line() -> None:
    note = load_workload("put-get-delete").scaled(4000).raised_note()
    assert note is not None and "\n" not in note
    assert note.startswith("rung(s) 0.05 (200) of 4,000 records run 500 records each") and "--records 10000" in note
    assert load_workload("put-get-delete").raised_note() is None
    assert load_workload("pgbench-tpcb").scaled(3).raised_note() is None  # transactions are not held to 500
