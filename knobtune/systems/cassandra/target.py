"""Apache Cassandra 5.0 as a single scratch node, driven by YCSB's own CoreWorkload over our Java binding.

The node's life is ``ServerTarget``'s (``server/life.py``): the pristine
copy, a restore before every run, the start as knobtune's child, the settle
and the stop. What is Cassandra's own is here and in ``node.py`` and
``ycsb.py``: ``open`` creates the keyspace and loads the workload's records
with YCSB under the default config (a clean stop is SIGTERM: the node drains
and flushes); a cassandra.yaml setting or JVM option Cassandra refuses ends
the start at once (a ``refused`` run with Cassandra's own message); YCSB runs
the workload's warm-up (outside the measured window) and then the rung's
operations with ``dataintegrity=true`` (a missing or wrong row fails the run
as data loss); the loaded node is kept for later studies of the same records;
the settle, after the commit-log replay timed as
the recovery, is our client polling the node's flush and compaction pools
until they are idle (no JMX here). The node's memory is its own peak resident
set (VmHWM) at the end of the run. Its own counters over the run (flushes,
compactions, GC pauses, dropped messages, cache hits: ``counters.toml``) are
read before and after the benchmark from its tables (with the DataStax Python
driver) and its logs.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from knobtune.errors import KnobtuneError, ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.server import loaded
from knobtune.targets import FailureKind, RunFailure, WorkloadFacts
from knobtune.server.process import last_lines, run_logged
from knobtune.server.memory import HighWaterMemoryWatch, MemoryWatch
from knobtune.server.life import Benchmarked, ServerTarget, SettleWork
from knobtune.systems.cassandra import counters
from knobtune.systems.cassandra.formats import cassandra_jvm_flags, cassandra_yaml_settings
from knobtune.systems.cassandra.node import (
    FETCH_HINT, answers, cache_dir, class_archive, death, free_ports, gc_log, java17, node_argv, startup_message,
    system_log, yaml_text,
)
from knobtune.systems.cassandra.ycsb import YcsbResult, benchmarked, client_argv, ycsb_properties
from knobtune.workloads import Rung, Workload

_IDLE = re.compile(r"settle: idle after (\d+) ms")
_FOLDERS = ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs", "triggers", "tmp")
# What YCSB's load and our schema read (CoreWorkload's insert side, ClientSettings): a later study whose
# properties agree on these reuses the loaded node; the run's mix and distribution do not matter to it.
_LOAD_READS = ("recordcount", "insertcount", "insertstart", "insertorder", "fieldcount", "fieldlength",
               "fieldlengthdistribution", "fieldnameprefix", "zeropadding", "dataintegrity", "cassandra.keyspace",
               "cassandra.table", "table")
# The loaded node's size per record of 10 fields of 100 bytes: 1,000,000 records took 666 MiB after the load's
# clean stop (Cassandra 5.0.9, LZ4-compressed SSTables, measured here 2026-11-26); the check before loading counts
# this much per 1,000 bytes of value.
_LOADED_BYTES_PER_KB_VALUE = 700


class CassandraTarget(ServerTarget):
    system = "cassandra"
    driver = "ycsb"
    label = "Cassandra"
    noun = "node"
    ready_limit_s = 180.0  # start-up (or commit-log replay) may take this long before the run fails
    poll_s = 0.1
    stop_limit_s = 120.0  # a clean stop (SIGTERM) drains and flushes

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for YCSB")
        section = workload.driver(self.driver)
        self.properties: dict[str, str] = {str(k): str(v) for k, v in section.get("properties", {}).items()}
        self.threads = int(section.get("threads", 4))
        self.warm_up_operations = section.get("warm_up_operations", 0)
        if not isinstance(self.warm_up_operations, int) or isinstance(self.warm_up_operations, bool) \
                or self.warm_up_operations < 0:
            raise WorkloadError(f"{workload.source or workload.name}: [drivers.ycsb] warm_up_operations = "
                                f"{self.warm_up_operations!r} is not a whole number of operations. "
                                "Fix: e.g. warm_up_operations = 60000, or 0 for none")
        self._ports: tuple[int, int, int] = (0, 0, 0)
        self._node: Path | None = None  # the folder of the node started last (its logs hold some counters)
        self._record_classes: Path | None = None  # where the loading node writes its classes (no archive yet)

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return True  # dataintegrity: every read is checked against what was written

    @classmethod
    def installed(cls) -> str | None:
        jars = sorted((cache_dir() / "lib").glob("cassandra-all-*.jar"))
        client = cache_dir() / "client" / "knobtune-cassandra-client.jar"
        return str(jars[-1]) if jars and client.exists() and java17() is not None else None

    def workload_facts(self) -> WorkloadFacts:
        """The workload file's facts with YCSB's threads as clients and the loaded node's size."""
        return replace(super().workload_facts(), clients=self.threads)

    @classmethod
    def build(cls) -> str | None:
        """Cassandra's version, from its released jar in the cache; None when none is there."""
        jars = sorted((cache_dir() / "lib").glob("cassandra-all-*.jar"))
        return jars[-1].stem.removeprefix("cassandra-all-") if jars else None

    def version(self) -> str:
        return self.build() or "unknown"

    # ------------------------------------------------------------ what ServerTarget asks

    def check_tools(self) -> None:
        if java17() is None:
            raise ToolMissingError(f"Cassandra 5.0 needs Java 17, which is not installed. {FETCH_HINT}")
        if self.installed() is None:
            raise ToolMissingError(f"Cassandra's jars or knobtune's YCSB client are not in {cache_dir()}. {FETCH_HINT}")

    def init_pristine(self, pristine: Path, logs: Path) -> None:
        self._ports = free_ports(3)  # type: ignore[assignment]
        archive = class_archive()
        if not archive.is_file():  # the loading node records its classes as it stops cleanly (keep_pristine)
            archive.parent.mkdir(parents=True, exist_ok=True)
            self._record_classes = archive.with_name(f".{archive.name}.{os.getpid()}")

    def loaded_inputs(self) -> Mapping[str, object]:
        """Cassandra's version, our client's jar and what the load reads: a later study with the same (any mix of
        operations over the same records) reuses the loaded node."""
        load = {key: value for key, value in self._props(0).items() if key in _LOAD_READS}
        return {"system": self.system, "workload": "ycsb", "version": self.version(),
                "client": loaded.file_digest(cache_dir() / "client" / "knobtune-cassandra-client.jar"), **load}

    def restore_loaded_state(self, state: Mapping[str, object]) -> None:
        self._ports = free_ports(3)  # type: ignore[assignment]  # the reused node listens where this study says

    def data_bytes(self) -> int:
        return self.workload.records * max(1, self.workload.value_size * _LOADED_BYTES_PER_KB_VALUE // 1000)

    def start_argv(self, data: Path, config: Mapping[str, Value]) -> list[str]:
        """The node's command line; its folders and cassandra.yaml (the config's settings) are written first."""
        self._node = data
        for folder in _FOLDERS:
            (data / folder).mkdir(parents=True, exist_ok=True)
        (data / "cassandra.yaml").write_text(yaml_text(data, self._ports,
                                                       cassandra_yaml_settings(self.catalog, config)))
        return node_argv(data, cassandra_jvm_flags(self.catalog, config), record_classes=self._record_classes)

    def start_env(self) -> dict[str, str] | None:
        return {**os.environ, "MALLOC_ARENA_MAX": "4"}

    def answers(self) -> bool:
        return answers(self._ports[0])

    def why_exited(self, log: Path, mark: int) -> str:
        return startup_message(log, mark)

    def why_died(self, log: Path) -> str:
        return death(log)

    def is_default(self, config: Mapping[str, Value]) -> bool:
        defaults = self.catalog.defaults()
        return (not cassandra_yaml_settings(self.catalog, config)
                and cassandra_jvm_flags(self.catalog, config) == cassandra_jvm_flags(self.catalog, defaults))

    def load(self, logs: Path) -> None:
        self._client("dev.knobtune.ycsb.Schema", ["--wait-s", "60"], logs / "schema.log", "creating the table",
                     timeout_s=300)
        loaded = self._ycsb("-load", self.workload.records, logs / "load.log", timeout_s=3600)
        if loaded.operations.get("INSERT", 0) != self.workload.records or loaded.failed:
            raise KnobtuneError(f"loading {self.workload.records:,} records into Cassandra stored "
                                f"{loaded.operations.get('INSERT', 0):,} ({loaded.failed or 'no errors'}). "
                                f"Fix: see {logs / 'load.log'}")

    def keep_pristine(self, pristine: Path) -> None:
        shutil.rmtree(pristine / "logs", ignore_errors=True)
        recorded, self._record_classes = self._record_classes, None
        if recorded is not None and recorded.is_file():  # whole once the node has exited; a rename is atomic
            os.replace(recorded, class_archive())

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        warm_up, measured = self.warm_up_operations, rung.operations or rung.records
        # the limit is the measured window's; YCSB's process also runs the warm-up, given as long per operation
        client_limit_s = None if timeout_s is None else timeout_s * (warm_up + measured) / measured
        result = self._ycsb("-t", warm_up + measured, log_path, timeout_s=client_limit_s)
        if result.failed:  # a node that died under the client: ServerTarget._died says so
            raise RunFailure(FailureKind.DATA_LOSS if result.lost else FailureKind.CRASH, result.failed, log_path)
        ran = benchmarked(result, warm_up)
        if timeout_s is not None and ran.elapsed_s > timeout_s:
            raise RunFailure(FailureKind.TIMEOUT, f"the run's {measured:,} operations after its warm-up took "
                             f"{ran.elapsed_s:.1f} s, over the limit of {timeout_s:.1f} s", log_path)
        return ran

    def read_counters(self, log: Path) -> dict[str, float]:
        """Flushes, compactions, GC pauses, dropped messages and cache hits so far (``counters.py``).

        Raises:
            RunFailure: (TOOL) the node did not answer the query or its logs could not be read.
        """
        if self._node is None:
            raise RunFailure(FailureKind.TOOL, "Cassandra's counters were read before the node started")
        try:
            return counters.read(self._ports[0], gc_log(self._node), system_log(self._node))
        except (counters.CountersUnanswered, OSError) as exc:
            raise RunFailure(FailureKind.TOOL, f"reading Cassandra's counters failed: {exc}") from None

    def counters_over_run(self, before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
        return counters.over_run(before, after)

    def watch_memory(self) -> MemoryWatch:
        return HighWaterMemoryWatch(self._server, self.memory_limit_bytes)  # type: ignore[arg-type]

    def dirty_bytes(self, data: Path) -> int:
        return sum(f.stat().st_size for f in (data / "commitlog").glob("*") if f.is_file())

    def settle_work(self, limit_s: float | None, log_path: Path) -> SettleWork:
        """Wait until no flush or compaction runs or waits.

        Raises:
            RunFailure: (TIMEOUT) compaction still pending at the run's limit; CRASH when the client failed.
        """
        log = log_path.with_suffix(".settle.log")
        argv = client_argv("dev.knobtune.ycsb.Settle", ["--wait-s", f"{limit_s or 0:.1f}"], self._props(0))
        result = run_logged(argv, log_path=log, timeout_s=None if limit_s is None else limit_s + 60)
        text = log.read_text(errors="replace")
        idle = _IDLE.search(text)
        if idle is None:
            busy = next((line for line in text.splitlines() if line.startswith("settle:")), last_lines(text))
            kind = FailureKind.TIMEOUT if result.returncode == 5 or result.timed_out else FailureKind.CRASH
            raise RunFailure(kind, f"the node did not settle: {busy}", log)
        return SettleWork(flush_s=0.0, compaction_s=int(idle.group(1)) / 1000)

    # ------------------------------------------------------------ the client

    def _props(self, operations: int) -> dict[str, str]:
        return ycsb_properties(self.workload, self._ports[0], operations, self.properties)

    def _client(self, main: str, args: list[str], log: Path, what: str, timeout_s: float) -> None:
        result = run_logged(client_argv(main, args, self._props(0)), log_path=log, timeout_s=timeout_s)
        if result.timed_out or result.returncode != 0:
            raise KnobtuneError(f"{what} failed: {last_lines(log.read_text(errors='replace'), 3)}. Fix: see {log}")

    def _ycsb(self, phase: str, count: int, log: Path, timeout_s: float | None) -> YcsbResult:
        """YCSB's Client for the load (-load, ``count`` records) or a run (-t, ``count`` operations)."""
        argv = client_argv("site.ycsb.Client", ["-db", "dev.knobtune.ycsb.CassandraDb", phase, "-threads",
                                                str(self.threads), "-s"], self._props(count if phase == "-t" else 0))
        result = run_logged(argv, log_path=log, timeout_s=timeout_s)
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT, f"YCSB was stopped after {timeout_s:.1f} s", log)
        text = log.read_text(errors="replace")
        parsed = YcsbResult(text)
        if parsed.seconds <= 0 or parsed.total + parsed.failed_operations < count:  # YCSB exits 0 when none ran
            raise RunFailure(FailureKind.CRASH, f"YCSB ran {parsed.total:,} of {count:,} operations "
                             f"(status {result.returncode}): {parsed.failed or last_lines(text)}", log)
        return parsed
