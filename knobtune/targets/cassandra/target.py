"""Apache Cassandra 5.0 as a single scratch node, driven by YCSB's own CoreWorkload over our Java binding.

No Cassandra package is reachable here: ``scripts/cassandra-fetch`` puts the
server's jars (``cassandra-all`` from Maven Central) and our YCSB client
(native/cassandra/) in a cache folder once. The node is knobtune's own child:
``java ... CassandraDaemon`` on Java 17, in the foreground, in its own process
group, dying with knobtune, listening on 127.0.0.1 only (free ports), every
file of it in the target's scratch folder (native/cassandra/README.md has the
command line and what was measured).

Life: ``open`` starts a node under the default config, creates the keyspace,
loads the workload's records with YCSB, stops the node cleanly (SIGTERM: it
drains and flushes) and keeps its folder as the pristine copy. Every run
restores a copy of it (outside the measured time), starts the node under the
applied config (a cassandra.yaml or JVM option Cassandra refuses ends the
start at once: a ``refused`` run with Cassandra's own message; the start-up
time is recorded), runs YCSB for the rung's operations with
``dataintegrity=true`` (every read is checked against the value written: a
missing or wrong row fails the run as data loss), then settles: the node is
killed (SIGKILL) with its memtables dirty and restarted; the time until the
native port answers again, the commit-log replay and its flush included, is
the recovery time; then our client polls the node's flush and compaction
pools until they are idle (no JMX here). Both count in the run's time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import KnobtuneError, ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.knobs.units import human_bytes
from knobtune.targets._base import FailureKind, Measurement, Phase, RunFailure, Settle, Target, await_server
from knobtune.targets._process import last_lines, run_logged, spawn, stop_group
from knobtune.targets.cassandra.formats import cassandra_jvm_flags, cassandra_yaml_settings
from knobtune.workloads import Rung, Workload

CONF_DIR = Path(__file__).resolve().parents[3] / "native" / "cassandra" / "conf"  # yaml template, logback.xml
FETCH_HINT = "Fix: run `scripts/cassandra-fetch` (the README's set-up does this)"
READY_LIMIT_S = 180.0  # start-up (or commit-log replay) may take this long before the run fails
STOP_LIMIT_S = 120.0
_POLL_S = 0.1
_KEYSPACE, _TABLE = "ycsb", "usertable"
# Cassandra 5.0's own JVM options (conf/jvm-server.options, jvm17-server.options) that are not knobs; the
# heap and the garbage collector come from the catalog's JVM knobs. Read from native/cassandra/README.md.
_JVM_BASE = [
    "-Xss256k", "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1", "-ea", "-XX:+UseThreadPriorities",
    "-XX:+AlwaysPreTouch", "-XX:+UseTLAB", "-XX:+ResizeTLAB", "-XX:+UseNUMA", "-XX:+PerfDisableSharedMem",
    "-XX:+ExitOnOutOfMemoryError", "-Djava.net.preferIPv4Stack=true", "-Djdk.attach.allowAttachSelf=true",
    *[arg for module in ("java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
                         "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server", "java.sql/java.sql",
                         "java.base/java.lang.ref", "jdk.unsupported/sun.misc",
                         "jdk.compiler/com.sun.tools.javac.file", "jdk.attach/sun.tools.attach")
      for arg in ("--add-exports", f"{module}=ALL-UNNAMED")],
    *[arg for module in ("java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
                         "java.base/jdk.internal.reflect", "java.base/jdk.internal.math",
                         "java.base/jdk.internal.module", "java.base/jdk.internal.util.jar",
                         "jdk.management/com.sun.management.internal", "java.base/sun.nio.ch", "java.base/java.io",
                         "java.base/java.lang.reflect", "jdk.compiler/com.sun.tools.javac", "java.base/java.lang",
                         "java.base/java.util")
      for arg in ("--add-opens", f"{module}=ALL-UNNAMED")],
    "-Dio.netty.tryReflectionSetAccessible=true", "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11", "-Dcassandra-foreground=yes",
]
_G1_ONLY = ["-XX:G1HeapRegionSize=16m", "-XX:G1RSetUpdatingPauseTimePercent=5"]
_STARTUP_ERROR = re.compile(r"encountered during startup: ?(.*)")
_CAUSE = re.compile(r"(?:Caused by: |ConfigurationException: )(.*)")
_IDLE = re.compile(r"settle: idle after (\d+) ms")
_JVM_ERROR = re.compile(r"java\.lang\.\w*Error: .*")
_PROPERTY = re.compile(r"Cannot create property=(\w+)")
_YCSB_LINE = re.compile(r"^\[([A-Z-]+)\], ([^,]+), (.+)$")
_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?)(?:st|nd|rd|th)?PercentileLatency\(us\)$")


def cache_dir() -> Path:
    return Path(os.environ.get("KNOBTUNE_CACHE", Path.home() / ".cache" / "knobtune")) / "cassandra"


def java17() -> Path | None:
    """Debian's OpenJDK 17 ``java``: Cassandra 5.0 runs on Java 11 and 17 only, so never another JDK."""
    found = sorted(Path("/usr/lib/jvm").glob("java-17-openjdk-*/bin/java"))
    return found[0] if found else None


class CassandraTarget(Target):
    system = "cassandra"
    driver = "ycsb"

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None) -> None:
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes)
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for YCSB")
        section = workload.driver(self.driver)
        self.properties: dict[str, str] = {str(k): str(v) for k, v in section.get("properties", {}).items()}
        self.threads = int(section.get("threads", 4))
        self._yaml: dict[str, str] = {}
        self._jvm: list[str] = cassandra_jvm_flags(catalog, catalog.defaults())
        self._home: Path | None = None
        self._node: subprocess.Popen[bytes] | None = None
        self._ports: tuple[int, int, int] = (0, 0, 0)

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return True  # dataintegrity: every read is checked against what was written

    @classmethod
    def installed(cls) -> str | None:
        jars = sorted((cache_dir() / "lib").glob("cassandra-all-*.jar"))
        client = cache_dir() / "client" / "knobtune-cassandra-client.jar"
        return str(jars[-1]) if jars and client.exists() and java17() is not None else None

    def version(self) -> str:
        jars = sorted((cache_dir() / "lib").glob("cassandra-all-*.jar"))
        return jars[-1].stem.removeprefix("cassandra-all-") if jars else "unknown"

    # ------------------------------------------------------------ life

    def open(self) -> None:
        if self._home is not None:
            return
        if java17() is None:
            raise ToolMissingError("Cassandra 5.0 needs Java 17, which is not installed. "
                                   "Fix: apt-get install openjdk-17-jdk-headless (the README's set-up does this)")
        if self.installed() is None:
            raise ToolMissingError(f"Cassandra's jars or knobtune's YCSB client are not in {cache_dir()}. {FETCH_HINT}")
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self._home = self.scratch_dir / "node"
        self._ports = _free_ports(3)
        pristine = self._home / "pristine"
        logs = self.scratch_dir / "server"
        self._start(pristine, {}, self._jvm, logs / "load-node.log", refusal=False)
        self._client("dev.knobtune.ycsb.Schema", ["--wait-s", "60"], logs / "schema.log", "creating the table",
                     timeout_s=300)
        loaded = self._ycsb("-load", self.workload.records, logs / "load.log", timeout_s=3600)
        if loaded.operations.get("INSERT", 0) != self.workload.records or loaded.failed:
            raise KnobtuneError(f"loading {self.workload.records:,} records into Cassandra stored "
                                f"{loaded.operations.get('INSERT', 0):,} ({loaded.failed or 'no errors'}). "
                                f"Fix: see {logs / 'load.log'}")
        self._stop_node(clean=True)
        shutil.rmtree(pristine / "logs", ignore_errors=True)

    def close(self) -> None:
        self._stop_node(clean=False)
        self._home = None
        shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def apply(self, config: Mapping[str, Value]) -> None:
        """Keep the yaml settings and JVM options; Cassandra checks them itself when the node starts."""
        self._yaml = cassandra_yaml_settings(self.catalog, config)
        self._jvm = cassandra_jvm_flags(self.catalog, config)

    # ------------------------------------------------------------ a run

    def run(self, rung: Rung, *, timeout_s: float | None, log_path: Path, seed: int) -> Measurement:
        if self._home is None:
            raise RunFailure(FailureKind.TOOL, "the target was not opened")
        node = self._restore()
        node_log = log_path.with_suffix(".node.log")
        try:
            started = time.monotonic()
            self._start(node, self._yaml, self._jvm, node_log, refusal=True)
            start_s = time.monotonic() - started
            try:
                result = self._ycsb("-t", rung.operations or rung.records, log_path, timeout_s=timeout_s)
            except RunFailure:
                if self._node is not None and self._node.poll() is not None:  # the node died under the client
                    raise RunFailure(FailureKind.CRASH, f"Cassandra died during the run: {_death(node_log)}",
                                     node_log) from None
                raise
            peak = _peak_rss(self._node)
            if result.failed:
                raise RunFailure(FailureKind.DATA_LOSS if result.lost else FailureKind.CRASH, result.failed, log_path)
            if self.memory_limit_bytes is not None and peak is not None and peak > self.memory_limit_bytes:
                raise RunFailure(FailureKind.MEMORY, f"the node held {human_bytes(peak)}, over the memory limit of "
                                 f"{human_bytes(self.memory_limit_bytes)}", node_log)
            settle = self._settle(node, node_log, log_path, timeout_s, result.seconds) if self.settle else None
        finally:
            self._stop_node(clean=False)
        run_phase = Phase("run", result.total, result.seconds, result.total / result.seconds if result.seconds else 0.0,
                          found=result.verified, expected=result.verified + result.verify_errors,
                          p50_us=_worst(result, "50"), p99_us=_worst(result, "99"), p999_us=_worst(result, "99.9"),
                          max_us=_worst(result, "max"))
        per_operation = tuple(Phase(op.lower(), count, result.seconds, count / result.seconds if result.seconds else 0.0,
                                    p50_us=result.latency.get(op, {}).get("50"),
                                    p99_us=result.latency.get(op, {}).get("99"),
                                    p999_us=result.latency.get(op, {}).get("99.9"),
                                    max_us=result.latency.get(op, {}).get("max"))
                              for op, count in sorted(result.operations.items()))
        elapsed = result.seconds + (settle.settle_s if settle else 0.0)
        return Measurement(elapsed_s=elapsed, phases=(run_phase, *per_operation), measured=("run",),
                           log_path=log_path, verified=True, settle=settle, peak_rss_bytes=peak, start_s=start_s)

    def _restore(self) -> Path:
        """A fresh copy of the pristine node folder, outside the measured time."""
        node = self._home / "run"  # type: ignore[operator]
        shutil.rmtree(node, ignore_errors=True)
        shutil.copytree(self._home / "pristine", node, symlinks=True)  # type: ignore[operator]
        return node

    def _settle(self, node: Path, node_log: Path, log_path: Path, timeout_s: float | None,
                workload_s: float) -> Settle:
        """Kill the node with its memtables dirty, time its restart (commit-log replay and its flush until it
        answers), then wait until no flush or compaction runs or waits: the bill the run left.

        Raises:
            RunFailure: (TIMEOUT) compaction still pending at the run's limit.
        """
        wal_bytes = sum(f.stat().st_size for f in (node / "commitlog").glob("*") if f.is_file())
        self._stop_node(clean=False)
        started = time.monotonic()
        self._start(node, self._yaml, self._jvm, node_log, refusal=False)
        recovery_s = time.monotonic() - started
        limit = None if timeout_s is None else max(timeout_s - workload_s - recovery_s, 1.0)
        log = log_path.with_suffix(".settle.log")
        argv = self._client_argv("dev.knobtune.ycsb.Settle", ["--wait-s", f"{limit or 0:.1f}"])
        result = run_logged(argv, log_path=log, timeout_s=None if limit is None else limit + 60)
        text = log.read_text(errors="replace")
        idle = _IDLE.search(text)
        if idle is None:
            busy = next((line for line in text.splitlines() if line.startswith("settle:")), last_lines(text))
            kind = FailureKind.TIMEOUT if result.returncode == 5 or result.timed_out else FailureKind.CRASH
            raise RunFailure(kind, f"the node did not settle: {busy}", log)
        compaction_s = int(idle.group(1)) / 1000
        return Settle(recovery_s=recovery_s, settle_s=recovery_s + compaction_s, flush_s=0.0,
                      compaction_s=compaction_s, files_by_level=(), sst_bytes=0, wal_bytes_at_open=wal_bytes,
                      reshaped=False, log_path=node_log)

    # ------------------------------------------------------------ the node

    def _start(self, node: Path, yaml: Mapping[str, str], jvm: list[str], log: Path, refusal: bool) -> None:
        """Start the node in the foreground and wait until its native port answers.

        Raises:
            RunFailure: REFUSED when it exits at start-up under a changed config (``refusal``), else CRASH;
                TIMEOUT when it does not answer within READY_LIMIT_S.
            KnobtuneError: under the default config (the machine or the set-up is at fault).
        """
        for folder in ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs", "triggers"):
            (node / folder).mkdir(parents=True, exist_ok=True)
        (node / "cassandra.yaml").write_text(self._yaml_text(node, yaml))
        gc_flags = _G1_ONLY if "-XX:+UseG1GC" in jvm else []
        argv = [str(java17()), *jvm, *gc_flags, *_JVM_BASE,
                f"-javaagent:{_jamm_jar()}", f"-Dcassandra.config=file://{node / 'cassandra.yaml'}",
                f"-Dcassandra.storagedir={node}", f"-Dcassandra.logdir={node / 'logs'}",
                f"-Dcassandra.triggers_dir={node / 'triggers'}",
                f"-Dlogback.configurationFile=file://{CONF_DIR / 'logback.xml'}",
                "-cp", str(cache_dir() / "lib" / "*"), "org.apache.cassandra.service.CassandraDaemon"]
        log.parent.mkdir(parents=True, exist_ok=True)
        mark = log.stat().st_size if log.exists() else 0
        self._node = spawn(argv, log_path=log, env={**os.environ, "MALLOC_ARENA_MAX": "4"})
        await_server(self._node, lambda: _answers(self._ports[0]), system="Cassandra",
                     why_exited=lambda: _startup_message(log, mark), log=log,
                     default_config=not yaml and jvm == cassandra_jvm_flags(self.catalog, self.catalog.defaults()),
                     refusal=refusal, limit_s=READY_LIMIT_S, poll_s=_POLL_S)

    def _yaml_text(self, node: Path, settings: Mapping[str, str]) -> str:
        """The template with this node's folder and ports, its keys that the config sets left out, then the config."""
        native, storage, ssl = self._ports
        text = ((CONF_DIR / "cassandra.yaml.in").read_text().replace("@SCRATCH@", str(node))
                .replace("@NATIVE_PORT@", str(native)).replace("@STORAGE_PORT@", str(storage))
                .replace("@SSL_STORAGE_PORT@", str(ssl)))
        kept = [line for line in text.splitlines() if line.split(":", 1)[0].strip() not in settings]
        if settings.get("commitlog_sync", "periodic") != "periodic":  # Cassandra refuses the period under batch/group
            kept = [line for line in kept if not line.startswith("commitlog_sync_period")]
        return "\n".join(kept + [f"{name}: {value}" for name, value in settings.items()]) + "\n"

    def _stop_node(self, clean: bool) -> None:
        """Stop the node: cleanly (SIGTERM: it drains and flushes) or as a crash would (SIGKILL)."""
        if self._node is None:
            return
        stop_group(self._node, signal.SIGTERM if clean else signal.SIGKILL, wait_s=STOP_LIMIT_S)
        self._node = None

    # ------------------------------------------------------------ the client

    def _client_argv(self, main: str, args: list[str], operations: int = 0) -> list[str]:
        """``java`` running ``main`` of our client's classpath with ``args`` and the workload's YCSB properties."""
        props = self._props(operations)
        return [str(java17()), "-cp", str(cache_dir() / "client" / "*"), main, *args,
                *[arg for key, value in props.items() for arg in ("-p", f"{key}={value}")]]

    def _props(self, operations: int) -> dict[str, str]:
        """YCSB's properties. knobtune's seed is not passed to YCSB: each run draws its own keys."""
        fields = 10
        records = str(self.workload.records)
        return {"workload": "site.ycsb.workloads.CoreWorkload", "recordcount": records,
                "operationcount": str(operations), "insertcount": records, "fieldcount": str(fields),
                "fieldlength": str(max(1, self.workload.value_size // fields)), "readallfields": "true",
                "dataintegrity": "true", "measurementtype": "hdrhistogram",
                "hdrhistogram.percentiles": "50,99,99.9", "cassandra.port": str(self._ports[0]),
                "cassandra.keyspace": _KEYSPACE, "table": _TABLE, **self.properties}

    def _client(self, main: str, args: list[str], log: Path, what: str, timeout_s: float) -> None:
        result = run_logged(self._client_argv(main, args), log_path=log, timeout_s=timeout_s)
        if result.timed_out or result.returncode != 0:
            raise KnobtuneError(f"{what} failed: {last_lines(log.read_text(errors='replace'), 3)}. Fix: see {log}")

    def _ycsb(self, phase: str, count: int, log: Path, timeout_s: float | None) -> _Ycsb:
        """YCSB's Client for the load (-load, ``count`` records) or a run (-t, ``count`` operations)."""
        argv = self._client_argv("site.ycsb.Client", ["-db", "dev.knobtune.ycsb.CassandraDb", phase, "-threads",
                                                      str(self.threads), "-s"], count if phase == "-t" else 0)
        result = run_logged(argv, log_path=log, timeout_s=timeout_s)
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT, f"YCSB was stopped after {timeout_s:.1f} s", log)
        text = log.read_text(errors="replace")
        parsed = _Ycsb(text)
        if parsed.seconds <= 0 or parsed.total + parsed.failed_operations < count:  # YCSB exits 0 when none ran
            raise RunFailure(FailureKind.CRASH, f"YCSB ran {parsed.total:,} of {count:,} operations "
                             f"(status {result.returncode}): {parsed.failed or last_lines(text)}", log)
        return parsed


class _Ycsb:
    """What YCSB printed: ``[SECTION], Metric, value`` lines."""

    def __init__(self, text: str) -> None:
        self.seconds, self.total, self.failed_operations = 0.0, 0, 0  # failed ones: YCSB's [OP-FAILED] sections
        self.operations: dict[str, int] = {}
        self.latency: dict[str, dict[str, float]] = {}
        returns: dict[str, dict[str, int]] = {}
        for line in text.splitlines():
            match = _YCSB_LINE.match(line.strip())
            if not match:
                continue
            section, metric, value = match.groups()
            if section == "OVERALL" and metric == "RunTime(ms)":
                self.seconds = float(value) / 1000
            elif metric.startswith("Return="):
                returns.setdefault(section, {})[metric.removeprefix("Return=")] = int(float(value))
            elif metric == "Operations" and section.endswith("-FAILED"):
                self.failed_operations += int(float(value))
            elif metric == "Operations" and section not in ("CLEANUP", "VERIFY"):
                self.operations[section] = int(float(value))
            elif (percentile := _PERCENTILE.match(metric)) and not section.endswith("-FAILED"):
                self.latency.setdefault(section, {})[percentile.group(1)] = float(value)
            elif metric == "MaxLatency(us)" and not section.endswith("-FAILED"):
                self.latency.setdefault(section, {})["max"] = float(value)
        self.total = sum(self.operations.values())
        verify = returns.pop("VERIFY", {})
        self.verified = verify.get("OK", 0)
        self.verify_errors = sum(n for status, n in verify.items() if status != "OK")
        errors = {f"{section} {status}": n for section, statuses in returns.items() for status, n in statuses.items()
                  if status != "OK" and section != "CLEANUP"}
        self.lost = self.verify_errors > 0 or any("NOT_FOUND" in key for key in errors)
        problems = [f"{n:,} {key}" for key, n in sorted(errors.items())]
        if self.verify_errors:
            problems.insert(0, f"data loss: {self.verify_errors:,} reads did not return what was written "
                               f"({', '.join(f'{s} {n:,}' for s, n in verify.items() if s != 'OK')})")
        self.failed = "; ".join(problems)


def _worst(result: _Ycsb, percentile: str) -> float | None:
    values = [v[percentile] for v in result.latency.values() if percentile in v]
    return max(values) if values else None


def _answers(port: int) -> bool:
    """Whether the node's native port answers a protocol request (OPTIONS, protocol v4) with SUPPORTED."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(struct.pack(">BBhBi", 0x04, 0, 0, 0x05, 0))
            header = sock.recv(9)
    except OSError:
        return False
    return len(header) == 9 and header[0] == 0x84 and header[4] == 0x06


def _free_ports(count: int) -> tuple[int, ...]:
    """Ports free on 127.0.0.1 now (the kernel's choice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return tuple(sock.getsockname()[1] for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def _jamm_jar() -> Path:
    found = sorted((cache_dir() / "lib").glob("jamm-*.jar"))
    if not found:
        raise ToolMissingError(f"the jamm agent jar is not in {cache_dir() / 'lib'}. {FETCH_HINT}")
    return found[-1]


def _peak_rss(process: subprocess.Popen[bytes] | None) -> int | None:
    """The node's peak resident memory (VmHWM) while it still runs."""
    if process is None:
        return None
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _startup_message(log: Path, mark: int) -> str:
    """Why the node stopped at start-up, from its output since ``mark``: Cassandra's reason, or its last lines.

    "Invalid yaml" says only which file: the setting (``Cannot create property=NAME``) and the deepest cause
    that says something (``Invalid data storage: 0B Accepted units: ...``) are added from the stack trace.
    """
    with open(log, "rb") as handle:
        handle.seek(mark)
        text = handle.read().decode(errors="replace")
    lines = text.splitlines()
    reasons = [m.group(1).strip() for m in map(_STARTUP_ERROR.search, lines) if m and m.group(1).strip()]
    causes = [m.group(1).strip() for m in map(_CAUSE.search, lines) if m and m.group(1).strip()]
    telling = [c for c in causes if not re.search(r"InvocationTargetException|Invalid yaml|: null$|exception=null", c)]
    setting = next((m.group(1) for m in map(_PROPERTY.search, lines) if m), None)
    if reasons and "Invalid yaml" in reasons[0]:
        return "; ".join(part for part in (f"invalid value of {setting}" if setting else reasons[0],
                                           telling[-1] if telling else "") if part)[:400]
    if reasons:
        return reasons[0][:400]
    if telling:
        return telling[-1][:400]
    return last_lines(text)


def _death(log: Path) -> str:
    """Why a running node died, from its log: the first JVM error (an OutOfMemoryError, say), or its last lines."""
    text = log.read_text(errors="replace")
    errors = [m.group(0) for m in map(_JVM_ERROR.search, text.splitlines()) if m]
    return errors[0][:400] if errors else last_lines(text)
