"""Every server export, applied to the server itself and read back from it: PostgreSQL's SHOW (pg_settings), MariaDB's
SHOW VARIABLES, and the settings a Cassandra node logs as it starts. A value the server does not hold fails the test.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import time
from pathlib import Path

import pytest

from knobtune.knobs import Catalog, KnobType, load_catalog
from knobtune.systems import export_format, make_target
from knobtune.server.process import spawn, stop_group
from knobtune.workloads import load_workload

from conftest import tiny
from readback import jvm_arguments, mariadb_shown, node_configuration, pg_held

# PostgreSQL: sizes in bytes, 8 kB pages and MB (shared_buffers, work_mem, effective_cache_size, wal_buffers,
# backend_flush_after, max_wal_size), times in ms, s and min, a boolean, a float and an enum.
PG_CONFIG = {"shared_buffers": "256MiB", "work_mem": "8MiB", "effective_cache_size": "2GiB", "wal_buffers": "8MiB",
             "backend_flush_after": "256KiB", "max_wal_size": "2GiB", "checkpoint_timeout": "600s",
             "wal_writer_delay": "50ms", "jit": False, "random_page_cost": 1.1, "wal_compression": "lz4",
             "autovacuum_naptime": "30s"}


def _pg_held(target, catalog: Catalog, log: Path) -> dict[str, object]:  # noqa: ANN001
    return pg_held(target, catalog, list(PG_CONFIG), log)


def _pg_expected(catalog: Catalog) -> dict[str, object]:
    config = catalog.config(PG_CONFIG)
    return {name: float(config[name]) if catalog.knobs[name].type in (KnobType.INT, KnobType.FLOAT, KnobType.DURATION)
            else config[name] for name in PG_CONFIG}


def test_postgresql_conf_and_alter_system_are_what_the_server_shows(tmp_path: Path) -> None:
    catalog = load_catalog("postgresql")
    config = catalog.config(PG_CONFIG)
    conf = export_format("postgresql", "pgbench", "postgresql-conf").render(catalog, config)
    alter = export_format("postgresql", "pgbench", "alter-system").render(catalog, config)
    with make_target(catalog, tiny("pgbench-select", 1000), tmp_path / "scratch") as target:
        data = target._restore()  # a fresh cluster under the include file, as its comment says to use it
        (data / "knobtune.conf").write_text(conf)
        with open(data / "postgresql.conf", "a") as main:
            main.write("include 'knobtune.conf'\n")
        target._start(data, {}, tmp_path / "conf.log")
        try:
            from_conf = _pg_held(target, catalog, tmp_path / "conf-show.log")
        finally:
            target._stop_server(clean=False)

        data = target._restore()  # another, under the statements run with psql, then restarted
        target._start(data, {}, tmp_path / "alter.log")
        try:
            (tmp_path / "alter.sql").write_text(alter)
            psql = ["/usr/lib/postgresql/15/bin/psql", *target._connection(), "-v", "ON_ERROR_STOP=1", "-q",
                    "-f", str(tmp_path / "alter.sql")]
            subprocess.run(psql, check=True, capture_output=True)
            target._stop_server(clean=True)
            target._start(data, {}, tmp_path / "alter.log")
            from_alter = _pg_held(target, catalog, tmp_path / "alter-show.log")
        finally:
            target._stop_server(clean=False)
    assert from_conf == _pg_expected(catalog)
    assert from_alter == _pg_expected(catalog)


# MariaDB: the buffer pool (a multiple of its chunk, so not rounded), other sizes, a boolean, an enum, numbers.
MARIADB_CONFIG = {"innodb_buffer_pool_size": "256MiB", "innodb_log_file_size": "64MiB", "sort_buffer_size": "4MiB",
                  "tmp_table_size": "32MiB", "innodb_io_capacity": 400, "innodb_adaptive_hash_index": True,
                  "innodb_flush_method": "fsync", "innodb_old_blocks_pct": 40, "table_open_cache": 4000}


def _mariadb_expected(catalog: Catalog) -> dict[str, str]:
    """How SHOW VARIABLES spells MARIADB_CONFIG: bytes as integers, booleans ON/OFF, enums as given."""
    config = catalog.config(MARIADB_CONFIG)
    return {name: ("ON" if config[name] else "OFF") if catalog.knobs[name].type is KnobType.BOOL else str(config[name])
            for name in MARIADB_CONFIG}


@pytest.mark.slow
def test_the_my_cnf_export_is_what_show_variables_shows(tmp_path: Path) -> None:
    catalog = load_catalog("mariadb")
    exported = export_format("mariadb", None, "my-cnf").render(catalog, catalog.config(MARIADB_CONFIG))
    workload = load_workload("oltp_point_select").scaled(100)
    workload = dataclasses.replace(workload, drivers={"sysbench": {**workload.drivers["sysbench"], "table_size": 100}})
    with make_target(catalog, workload, tmp_path / "scratch") as target:
        data = target._restore()
        argv = target.start_argv(data, catalog.defaults())  # the server as a study starts it ...
        config_file = Path(next(a for a in argv if a.startswith("--defaults-file=")).split("=", 1)[1])
        config_file.write_text(exported)  # ... with the exported file as its my.cnf
        target.start_argv = lambda data, config: argv
        target._start(data, {}, tmp_path / "server.log")
        try:
            shown = mariadb_shown(target, list(MARIADB_CONFIG), tmp_path / "show.log")
        finally:
            target._stop_server(clean=False)
    assert shown == _mariadb_expected(catalog)


# Cassandra: settings renamed in 5.0 (memtable_heap_space, compaction_throughput, key_cache_size,
# commitlog_segment_size, row_cache_size: the old *_in_mb forms), unchanged ones, and the JVM's heap and collector.
CASSANDRA_CONFIG = {"memtable_heap_space": "256MiB", "compaction_throughput": "32MiB", "key_cache_size": "64MiB",
                    "commitlog_segment_size": "16MiB", "row_cache_size": "32MiB", "concurrent_reads": 16,
                    "memtable_allocation_type": "offheap_objects", "memtable_cleanup_threshold": 0.2,
                    "jvm_heap_size": "768MiB", "jvm_max_gc_pause_ms": 250}


def _node_logged(node: Path, yaml: str, jvm: str, limit_s: float = 180) -> str:
    """Start one node over ``node`` under the exported files, until its log holds its settings; its log."""
    from knobtune.systems.cassandra.node import free_ports, node_argv, system_log, yaml_text

    for folder in ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs", "triggers", "tmp"):
        (node / folder).mkdir(parents=True, exist_ok=True)
    settings = dict(line.split(": ", 1) for line in yaml.splitlines() if line and not line.startswith("#"))
    (node / "cassandra.yaml").write_text(yaml_text(node, free_ports(3), settings))
    options = [line for line in jvm.splitlines() if line and not line.startswith("#")]
    process = spawn(node_argv(node, options), log_path=node / "out.log")
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and process.poll() is None:
            text = system_log(node).read_text(errors="replace") if system_log(node).exists() else ""
            if "Node configuration:[" in text and "JVM Arguments:" in text:
                return text
            time.sleep(0.2)
        raise AssertionError(f"the node logged no settings: {(node / 'out.log').read_text()[-500:]}")
    finally:
        stop_group(process, signal.SIGKILL)


@pytest.mark.slow
def test_cassandra_yaml_and_its_jvm_options_beside_are_what_the_node_logs(tmp_path: Path) -> None:
    from knobtune.systems.cassandra.node import java17
    from knobtune.systems.cassandra.target import CassandraTarget

    if CassandraTarget.installed() is None or java17() is None:
        pytest.skip("Cassandra's jars are not fetched (scripts/cassandra-fetch)")
    catalog = load_catalog("cassandra")
    config = catalog.config(CASSANDRA_CONFIG)
    spec = export_format("cassandra", None, "cassandra-yaml")
    yaml = spec.render(catalog, config)
    beside = spec.beside(catalog, config)  # the heap and the collector are no cassandra.yaml settings
    assert len(beside) == 1 and beside[0].suffix == ".jvm-options" and "jvm_heap_size" in beside[0].note
    assert beside[0].text == export_format("cassandra", None, "jvm-options").render(catalog, config)
    logged = _node_logged(tmp_path / "node", yaml, beside[0].text)

    settings = node_configuration(logged)
    exported = dict(line.split(": ", 1) for line in yaml.splitlines() if line and not line.startswith("#"))
    assert {name: settings.get(name) for name in exported} == exported
    assert {"memtable_heap_space": "256MiB", "compaction_throughput": "32MiB/s", "key_cache_size": "64MiB",
            "commitlog_segment_size": "16MiB", "row_cache_size": "32MiB", "concurrent_reads": "16",
            "memtable_allocation_type": "offheap_objects",
            "memtable_cleanup_threshold": "0.2"}.items() <= settings.items()
    arguments = jvm_arguments(logged)
    assert {"-Xmx805306368", "-Xms805306368", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=250"} <= set(arguments)
    assert "Heap size: 768.000MiB/768.000MiB" in logged
