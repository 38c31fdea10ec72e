"""RocksDB through its own db_bench (the release build the set-up makes: ``build.py``).

Knobs become db_bench flags (never an OPTIONS file and flags together: db_bench
then ignores the flags without a word). Each run starts from an empty database
in the target's scratch directory, which is removed after the run. db_bench
closes the store without flushing its memtables (the WAL holds them), as a
crash would leave it; kvbench's settle mode then reopens and settles it
(``drivers/embedded.py``).

Every run also gives RocksDB's own counters over the workload
(``db_bench_counters.py``): the benchmark list ends with ``stats``, which
prints the store's stall counts, level-0 files and write bytes before db_bench
exits, and the store's LOG gives the flush and compaction bytes. RocksDB's
tickers (block cache, bloom filter and memtable counts) cost a run's time, so
db_bench keeps them only when asked (``ticker_counters=True``).
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value, render_flags
from knobtune.targets import FailureKind, KnownConfig, Measurement, Phase, RunFailure, WorkloadFacts, with_ratios
from knobtune.drivers.embedded import EmbeddedTarget
from knobtune.server.process import run_logged
from knobtune.systems.rocksdb.build import find_db_bench, rocksdb_build
from knobtune.systems.rocksdb.db_bench_counters import parse_counters
from knobtune.systems.rocksdb.db_bench_workload import WorkloadFlags, knob_flags, read_section
from knobtune.systems.rocksdb.known import guide_config
from knobtune.workloads import Rung, Workload


_RESULT = re.compile(
    r"^(?P<name>\w+)\s*:\s*(?P<micros>[\d.]+) micros/op (?P<ops_s>\d+) ops/sec\s+(?P<secs>[\d.]+) seconds\s+"
    r"(?P<ops>\d+) operations;(?P<rest>.*)$")
_FOUND = re.compile(r"\(\s*(\d+) of (\d+) found\)")
_PERCENTILES = re.compile(r"^Percentiles: P50: ([\d.]+) P75: [\d.]+ P99: ([\d.]+) P99\.9: ([\d.]+)")
_MAX = re.compile(r"^Min: \d+\s+Median: [\d.]+\s+Max: (\d+)")
_MACHINE_FAULTS = ("No space left on device", "Too many open files", "Cannot allocate memory")
_ERROR_LINE = re.compile(r"error|Invalid argument|Not supported|should be|Corruption", re.IGNORECASE)
_READS = {"readrandom", "readwhilewriting", "readseq"}
_SCAN_READS = frozenset({"readseq", "readreverse", "seekrandom"})  # benchmarks that scan and write nothing
_SCANS = _SCAN_READS | {"seekrandomwhilewriting", "seekrandomwhilemerging"}
_POINT_READS = frozenset({"readrandom", "readwhilewriting", "readrandomwriterandom", "multireadrandom", "readmissing",
                          "readhot"})  # benchmarks that read single keys
_NO_RESULT = {"flush", "waitforcompaction", "compact"}  # db_bench prints no result line for these
_POINT_WRITES = frozenset({"fillrandom", "filluniquerandom", "fillseq", "overwrite", "updaterandom", "deleterandom",
                           "deleteseq", *_NO_RESULT})  # that write single keys, or maintain the store
# RocksDB's tickers without its histograms and timers (stats level 1, kExceptHistogramOrTimers, half the cost of
# db_bench's default level 3): still about 2% of a fill's instructions and 6% of a point read's (docs/rocksdb.md,
# "Counters"), so only when asked.
TICKER_FLAGS = ("--statistics", "--stats_level=1")
STATS_BENCHMARK = "stats"  # prints the rocksdb.stats property: stall counts, files per level; no result line
_HELP_DEFAULT = re.compile(r"^\s+-(\w+) \(.*?\) type: \w+\s+default: (.*)$")


def db_bench_defaults() -> dict[str, str]:
    """Every flag's default as ``db_bench --help`` prints it (strings, quotes removed)."""
    text = subprocess.run([find_db_bench(), "--help"], capture_output=True, text=True, check=False).stdout
    joined = re.sub(r"\n\s{6}(?!-)", " ", text)  # help wraps long descriptions onto indented lines
    return {m.group(1): m.group(2).strip().strip('"') for m in map(_HELP_DEFAULT.match, joined.splitlines()) if m}


def parse_output(text: str) -> list[Phase]:
    """The phases of a db_bench run: one per benchmark result line, with its histogram if printed.

    The histograms of the ``stats`` benchmark's sections (``** ... **``: file read latency by level) are not a phase's.
    """
    phases: list[Phase] = []
    pending: dict[str, float] = {}
    in_section = False  # inside the stats benchmark's sections, until the next result line
    for line in text.splitlines():
        in_section = in_section or line.startswith("** ")
        if match := _RESULT.match(line.strip()):
            in_section = False
            if phases and pending:
                phases[-1] = _with_latency(phases[-1], pending)
            pending = {}
            found = _FOUND.search(match.group("rest"))
            phases.append(Phase(
                name=match.group("name"), ops=int(match.group("ops")), seconds=float(match.group("secs")),
                ops_per_s=float(match.group("ops_s")), mean_us=float(match.group("micros")),
                found=int(found.group(1)) if found else None, expected=int(found.group(2)) if found else None))
        elif in_section:
            continue
        elif match := _PERCENTILES.match(line.strip()):
            pending.update(p50=float(match.group(1)), p99=float(match.group(2)), p999=float(match.group(3)))
        elif match := _MAX.match(line.strip()):
            pending["max"] = float(match.group(1))
    if phases and pending:
        phases[-1] = _with_latency(phases[-1], pending)
    return phases


def _with_latency(phase: Phase, latency: dict[str, float]) -> Phase:
    return dataclasses.replace(phase, p50_us=latency.get("p50"), p99_us=latency.get("p99"),
                               p999_us=latency.get("p999"), max_us=latency.get("max"))


class DbBenchTarget(EmbeddedTarget):
    system = "rocksdb"
    driver = "db_bench"
    key_format = "db_bench"

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return bool(section.get("verify"))

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """The workload's db_bench section, its ``threads`` and ``flags`` checked (``db_bench_workload.py``).

        Raises:
            WorkloadError: no db_bench section, or one line naming the file, the field and the fix.
        """
        section = workload.driver(cls.driver)
        read_section(workload, section, knob_flags(cls.system))
        return section

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 ticker_counters: bool = False, **options: object) -> None:
        """``twin=True`` runs the workload's verifiable twin (each key written once, every read checked);
        ``ticker_counters=True`` has db_bench keep RocksDB's tickers (at a cost) for the counters only they give."""
        super().__init__(catalog, workload, scratch_dir, **options)  # type: ignore[arg-type]
        self.ticker_counters = ticker_counters
        section = workload.driver(self.driver)
        self.workload_flags: WorkloadFlags = read_section(workload, section, knob_flags(catalog.system))
        if twin and "twin" not in section:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin. Fix: add `twin` to its db_bench "
                                "section")
        self.benchmarks: list[str] = list(section["twin"] if twin else section["benchmarks"])
        checked = set(self.benchmarks) & _READS if twin else set(section.get("verify", ()))
        self.verify: set[str] = checked & set(self.benchmarks)
        self.measure: tuple[str, ...] = tuple(self.benchmarks if twin else section.get("measure", self.benchmarks))

    @classmethod
    def installed(cls) -> str | None:
        try:
            return find_db_bench()
        except ToolMissingError:
            return None

    @classmethod
    def build(cls) -> str | None:
        try:
            return rocksdb_build().description
        except ToolMissingError:
            return None

    def open(self) -> None:
        self._binary = find_db_bench()
        super().open()

    def settle_config(self, config: Mapping[str, Value]) -> dict[str, str]:
        cache_bytes = int(config.get("cache_size", self.catalog.knobs["cache_size"].default))
        return {"block_cache_size": str(cache_bytes)}  # the rest is in the OPTIONS file db_bench wrote

    def known_configs(self) -> tuple[KnownConfig, ...]:
        """The RocksDB wiki's starting point ("Setup Options and Basic Tuning"), the same on every machine.

        Not the configs published for db_bench (``knobtune baseline rocksdb --name db-bench-leveled``): on
        put-get-delete here they were slower than the default (docs/findings.md), so a study does not start there."""
        return (guide_config(self.catalog),)

    def workload_facts(self) -> WorkloadFacts:
        """From the benchmarks: it reads points only when every benchmark reads or writes single keys and one of
        them reads (any other benchmark, a scan or seek say, may not)."""
        benchmarks = set(self.benchmarks)
        reads, only_reads = _POINT_READS | _READS | _SCANS, _POINT_READS | _READS | _SCAN_READS
        return WorkloadFacts.of(self.workload, clients=self.workload_flags.threads, reads=bool(benchmarks & reads),
                                writes=bool(benchmarks - only_reads), scans=bool(benchmarks & _SCANS),
                                point_reads_only=benchmarks <= _POINT_READS | _POINT_WRITES
                                and bool(benchmarks & _POINT_READS))

    def version(self) -> str:
        return rocksdb_build().description

    def argv(self, config: Mapping[str, Value], rung: Rung, db_dir: Path, seed: int,
             report_file: Path | None = None) -> list[str]:
        """The full db_bench command line for one run under ``config``: workload flags (the workload's own
        ``threads`` and ``flags`` among them), then the config's knob flags (those that differ from the default).
        Every element is one argument: nothing passes through a shell."""
        benchmarks = ",".join([*self.benchmarks, STATS_BENCHMARK])
        argv = [self._binary, f"--db={db_dir}", f"--benchmarks={benchmarks}",
                f"--num={rung.records}", f"--key_size={self.workload.key_size}",
                f"--value_size={self.workload.value_size}", f"--seed={seed}",
                *self.workload_flags.argv(self.benchmarks, rung.records),
                "--histogram=1", "--progress_reports=false", "--use_existing_db=false",
                *(TICKER_FLAGS if self.ticker_counters else ())]
        if report_file is not None:
            argv += ["--report_interval_seconds=1", f"--report_file={report_file}"]
        return argv + render_flags(self.catalog, config, self.driver)

    def run_workload(self, config: Mapping[str, Value], rung: Rung, db_dir: Path, *, timeout_s: float | None,
                     log_path: Path, seed: int) -> Measurement:
        argv = self.argv(config, rung, db_dir, seed, report_file=log_path.with_suffix(".csv"))
        result = run_logged(argv, log_path=log_path, timeout_s=timeout_s, memory_limit_bytes=self.memory_limit_bytes)
        self.check_process(result, rung, timeout_s, log_path)
        text = log_path.read_text(errors="replace")
        if result.returncode != 0:
            raise RunFailure(*_classify_exit(result.returncode, text), log_path)
        store_log = db_dir / "LOG"  # read before the settle reopens the store and starts a LOG of its own
        event_log = store_log.read_text(errors="replace") if store_log.is_file() else ""
        return self._measurement(text, result.elapsed_s, log_path, result.peak_rss_bytes, event_log)

    def _measurement(self, text: str, elapsed_s: float, log_path: Path, peak_rss_bytes: int,
                     event_log: str = "") -> Measurement:
        phases = parse_output(text)
        missing = [b for b in self.benchmarks if b not in {p.name for p in phases} and b not in _NO_RESULT]
        if missing:
            raise RunFailure(FailureKind.CRASH, f"db_bench printed no result for {', '.join(missing)}", log_path)
        for phase in phases:
            if phase.name in self.verify:
                if phase.found is None or phase.expected is None:
                    raise RunFailure(FailureKind.TOOL, f"{phase.name} printed no '(X of Y found)'", log_path)
                if phase.found < phase.expected:
                    raise RunFailure(FailureKind.DATA_LOSS, f"data loss: {phase.found:,} of {phase.expected:,} "
                                     f"keys found by {phase.name}", log_path)
        counters = with_ratios(parse_counters(text, event_log), workload_s=sum(p.seconds for p in phases))
        return Measurement(elapsed_s=elapsed_s, phases=tuple(phases), measured=self.measure,
                           log_path=log_path, verified=bool(self.verify), peak_rss_bytes=peak_rss_bytes,
                           counters=counters)


def _classify_exit(returncode: int, text: str) -> tuple[FailureKind, str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    message = " | ".join(errors[-2:] or lines[-3:])[-400:] or f"exit status {returncode}"
    if any(fault in text for fault in _MACHINE_FAULTS):
        return FailureKind.TOOL, f"the machine failed: {message}"
    if returncode < 0:
        return FailureKind.CRASH, f"db_bench died of signal {-returncode}: {message}"
    if "Invalid argument" in text or "Not supported" in text or "should be" in text or "ERROR:" in text:
        return FailureKind.REFUSED, f"RocksDB refused the config: {message}"
    return FailureKind.CRASH, f"db_bench exited with status {returncode}: {message}"
