"""RocksDB and LevelDB through knobtune's native driver, kvbench (``native/``): a driver both systems register.

One workload spec (JSON) per run: the workload's phases at the rung's size,
the seed, and the config as option name -> text (``names.kvbench`` in the
catalog). kvbench prints one JSON result with exact found / not-found counts
per phase, which is how a run proves it read back what it wrote.

The result's ``stats`` are the store's own counters over the workload (read
before the crash that ends it, so the settle is not in them), named as
``systems/SYSTEM/counters.toml`` describes; they become the measurement's
``counters`` with the ratios of ``targets/_counters.py``.

``threads = N`` in the workload's section runs every phase but ``readseq`` and
``flush`` on N threads against the one store; the rung's records and
operations stay totals, which kvbench shares out (native/README.md, "The spec").

``kvbench-tunable`` runs LevelDB through kvbench-leveldb-tunable: the same
kvbench linked with LevelDB patched by knobtune (native/leveldb/), whose
compile-time constants of db/dbformat.h are options; the catalog's
``drivers`` marks the knobs only it can set.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import ConfigError, ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value, check_driver, render_every
from knobtune.targets import (
    ExportFormat, FailureKind, Measurement, Phase, RunFailure, WorkloadFacts, numbers, with_ratios)
from knobtune.drivers.embedded import EmbeddedTarget, find_kvbench, read_result
from knobtune.server.process import run_logged
from knobtune.drivers.kvbench_phases import read_section
from knobtune.workloads import Rung, Workload

SCANS = ("scan", "scan_reverse")  # a mix's range reads: Seek then Next, SeekForPrev then Prev
_MACHINE_FAULTS = ("No space left on device", "Too many open files", "Cannot allocate memory")
_SPEC_FIX = ("correct the workload's kvbench section ({workload}; docs/workloads.md says what kvbench takes); if it is "
             "right, the spec knobtune wrote from it ({spec}) is knobtune's bug: report it with that file")
KILLED_AT_END = -9  # --crash-at-end: kvbench kills itself with SIGKILL once its result is written

# Every knob kvbench can set, defaults too: the store left alone runs its library's defaults, not the catalog's.
KVBENCH_CONFIG = ExportFormat(
    "kvbench-config", "the option map kvbench takes (JSON)", None,
    lambda catalog, config: json.dumps(render_every(catalog, config, "kvbench"), indent=2) + "\n")


class KvbenchTarget(EmbeddedTarget):
    driver = "kvbench"
    key_format = "kvbench"
    driver_formats: tuple[ExportFormat, ...] = (KVBENCH_CONFIG,)
    program = "kvbench"  # the binary in native/build (or on PATH) ...
    program_env = "KNOBTUNE_KVBENCH"  # ... or where this variable points
    spelling: str = "kvbench"  # the workload section and the catalog format it reads: kvbench's, whichever build

    @classmethod
    def installed(cls) -> str | None:
        try:
            return cls.find_program()
        except ToolMissingError:
            return None

    @classmethod
    def build(cls) -> str | None:
        binary = cls.installed()
        if binary is None:
            return None
        with tempfile.TemporaryDirectory(prefix="knobtune-build-") as tmp:
            return " ".join(f"{system} {engine_version(binary, system, Path(tmp))}"
                            for system in ("rocksdb", "leveldb"))

    @classmethod
    def find_program(cls) -> str:
        """This driver's kvbench binary.

        Raises:
            ToolMissingError: it is not built.
        """
        return find_kvbench(cls.program, cls.program_env)

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """The workload's kvbench section, read through the schema and checked whole (``kvbench_phases``).

        Raises:
            WorkloadError: no kvbench section, or one line naming the file, the field and the fix.
        """
        read_section(workload, cls.spelling)
        return workload.driver(cls.spelling)

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        phases = section.get("phases", [])
        return isinstance(phases, list) and any("expect" in phase for phase in phases)

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 **options: Any) -> None:
        """``twin=True`` runs the workload's verifiable twin instead of its own phases."""
        super().__init__(catalog, workload, scratch_dir, **options)
        self.system = catalog.system
        section = self.section(workload)
        self.threads: int = section.get("threads", 1)  # checked by section()
        if twin and "twin" not in section:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin. "
                                "Fix: add `twin` to its kvbench section")
        self.phases: list[dict[str, Any]] = [dict(p) for p in (section["twin"] if twin else section["phases"])]
        names: list[Any] = [p.get("name", p.get("kind")) for p in self.phases]  # section() checked the phases
        self.measure: tuple[str, ...] = tuple(names if twin else section.get("measure", names))

    def open(self) -> None:
        self._binary = self.find_program()
        super().open()

    def find_settler(self) -> str:
        return self.find_program()  # its stores reopen under the same build and config

    def options(self, config: Mapping[str, Value]) -> dict[str, str]:
        """The option map kvbench takes for ``config`` (``kvbench_options``).

        Raises:
            RunFailure: REFUSED when the config changes a knob this driver cannot set.
        """
        return kvbench_options(self.catalog, config, self.driver, self.spelling)

    def settle_config(self, config: Mapping[str, Value]) -> dict[str, str]:
        return self.options(config)

    def workload_facts(self) -> WorkloadFacts:
        """From the phases: it scans when some phase reads in order (``readseq``) or its mix scans; it reads points
        only when some phase reads single keys (``read``, or a mix with reads or read-modify-writes) and none scans."""
        kinds = {p.get("kind") for p in self.phases} | {op for p in self.phases for op, share in
                                                        (p.get("mix") or {}).items() if share}
        scans = any(phase.get("kind") == "readseq" or any((phase.get("mix") or {}).get(op) for op in SCANS)
                    for phase in self.phases)
        point_reads = any(phase.get("kind") == "read" or any((phase.get("mix") or {}).get(op) for op in ("read", "rmw"))
                          for phase in self.phases)
        reads = bool(kinds & {"read", "readseq", *SCANS, "rmw"})
        writes = bool(kinds & {"fill", "update", "insert", "delete", "rmw"})
        return WorkloadFacts.of(self.workload, clients=self.threads, reads=reads, writes=writes, scans=scans,
                                point_reads_only=not scans and point_reads)

    def version(self) -> str:
        return engine_version(self.find_program(), self.system, self.scratch_dir)

    def spec(self, config: Mapping[str, Value], rung: Rung, seed: int) -> dict[str, Any]:
        """The kvbench spec of one run at ``rung`` under ``config``.

        Raises:
            RunFailure: REFUSED when the config changes a knob this driver cannot set.
        """
        phases = []
        for phase in self.phases:
            phase = {k: v for k, v in phase.items() if k != "expect"}
            if phase.get("kind") == "mix":
                phase["count"] = rung.operations or rung.records
            phases.append(phase)
        return {"seed": seed, "key_size": self.workload.key_size, "value_size": self.workload.value_size,
                "record_count": rung.records, "threads": self.threads, "phases": phases, "config": self.options(config)}

    def run_workload(self, config: Mapping[str, Value], rung: Rung, db_dir: Path, *, timeout_s: float | None,
                     log_path: Path, seed: int) -> Measurement:
        spec = self.spec(config, rung, seed)  # a refusal before anything is written
        spec_path, result_path = log_path.with_suffix(".spec.json"), log_path.with_suffix(".result.json")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        spec_path.write_text(json.dumps(spec, indent=2))
        result_path.unlink(missing_ok=True)
        argv = [self._binary, "--engine", self.system, "--db", str(db_dir), "--spec", str(spec_path),
                "--result", str(result_path), "--interval-ms", "1000", "--crash-at-end", "1" if self.settle else "0"]
        outcome = run_logged(argv, log_path=log_path, timeout_s=timeout_s, memory_limit_bytes=self.memory_limit_bytes)
        self.check_process(outcome, rung, timeout_s, log_path)
        ended_as_asked = outcome.returncode == 0 or (self.settle and outcome.returncode == KILLED_AT_END)
        result = read_result(result_path) if ended_as_asked else None
        if result is None:
            kind, reason = classify_exit(outcome.returncode, log_path.read_text(errors="replace"))
            raise RunFailure(kind, reason, log_path, fix=_SPEC_FIX.format(spec=spec_path, workload=self.workload.source
                                                                         or self.workload.name)
                             if outcome.returncode == 2 else "")
        return self._measurement(result, outcome.elapsed_s, log_path, rung.records, outcome.peak_rss_bytes)

    def _measurement(self, result: dict[str, Any], elapsed_s: float, log_path: Path, records: int,
                     peak_rss_bytes: int) -> Measurement:
        phases = []
        for spec, measured in zip(self.phases, result["phases"]):
            _check(spec, measured, log_path, records)
            latency = _all_operations(measured["latency_us"], measured.get("latency_all_us"))
            read = measured["found"] + measured["not_found"]
            phases.append(Phase(name=measured["name"], ops=measured["ops"], seconds=measured["elapsed_s"],
                                ops_per_s=measured["ops_per_s"], found=measured["found"] if read else None,
                                expected=read or None, p50_us=latency.get("p50"), p99_us=latency.get("p99"),
                                p999_us=latency.get("p99.9"), max_us=latency.get("max"), mean_us=latency.get("mean")))
        counters = with_ratios(numbers(result.get("stats", {})), workload_s=sum(p.seconds for p in phases))
        return Measurement(elapsed_s=elapsed_s, phases=tuple(phases), measured=self.measure, log_path=log_path,
                           verified=any("expect" in p for p in self.phases), peak_rss_bytes=peak_rss_bytes,
                           counters=counters)


def _all_operations(by_kind: Mapping[str, Mapping[str, float]],
                    merged: Mapping[str, float] | None = None) -> Mapping[str, float | None]:
    """A phase's latency over all its operations: kvbench's histogram of every kind merged (``latency_all_us``)
    when it printed one; else (an older kvbench) the percentiles of the kind with the worst p99, with the mean and
    max over every kind."""
    if merged:
        return merged
    if not by_kind:
        return {}
    worst = max(by_kind.values(), key=lambda h: h["p99"])
    count = sum(h.get("count", 0) for h in by_kind.values())
    mean = sum(h.get("count", 0) * h.get("mean", 0.0) for h in by_kind.values()) / count if count else None
    return {**worst, "mean": mean, "max": max(h.get("max", 0.0) for h in by_kind.values())}


class KvbenchTunableTarget(KvbenchTarget):
    """LevelDB through kvbench-leveldb-tunable: LevelDB 1.23 patched so that db/dbformat.h's constants are options.

    Built by ``scripts/setup leveldb`` (scripts/leveldb-tunable, then native/); see docs/leveldb.md.
    """

    driver = "kvbench-tunable"
    program = "kvbench-leveldb-tunable"
    program_env = "KNOBTUNE_KVBENCH_TUNABLE"


def _check(spec: Mapping[str, Any], measured: Mapping[str, Any], log_path: Path, records: int) -> None:
    """Raise DATA_LOSS when a phase read back less than was written, or found keys it deleted."""
    expect = spec.get("expect")
    if expect is None:
        return
    name, found, missing = measured["name"], measured["found"], measured["not_found"]
    if spec.get("kind") == "readseq":  # a full scan after fills of every key must see every key
        if expect == "all" and measured["keys_seen"] < records:
            raise RunFailure(FailureKind.DATA_LOSS, f"data loss: {measured['keys_seen']:,} of {records:,} keys "
                             f"seen by {name}", log_path)
        return
    if expect == "all" and missing:
        raise RunFailure(FailureKind.DATA_LOSS, f"data loss: {found:,} of {found + missing:,} keys found by {name}",
                         log_path)
    if expect == "none" and found:
        raise RunFailure(FailureKind.DATA_LOSS, f"deleted keys came back: {found:,} of {found + missing:,} "
                         f"deleted keys found by {name}", log_path)


def kvbench_options(catalog: Catalog, config: Mapping[str, Value], driver: str, spelling: str) -> dict[str, str]:
    """The option map kvbench takes for ``config``: every knob ``spelling`` can express, defaults too (kvbench's
    RocksDB would otherwise use its library's defaults, not the catalog's).

    Raises:
        RunFailure: REFUSED when the config changes a knob ``driver`` cannot set.
    """
    try:
        check_driver(catalog, config, driver)
        return render_every(catalog, config, spelling)
    except ConfigError as exc:
        raise RunFailure(FailureKind.REFUSED, str(exc)) from None


def engine_version(binary: str, system: str, scratch_dir: Path) -> str:
    """The store's version and build as ``binary`` (a kvbench) reports them, from one tiny run in ``scratch_dir``."""
    probe = scratch_dir / "version-probe"
    spec = probe.with_suffix(".json")
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"record_count": 1, "phases": [{"kind": "fill", "count": 1}]}))
    out = subprocess.run([binary, "--engine", system, "--db", str(probe), "--spec", str(spec)],
                         capture_output=True, text=True, check=False).stdout
    shutil.rmtree(probe, ignore_errors=True)
    try:
        return str(json.loads(out)["engine_version"])
    except (ValueError, KeyError):
        return "unknown"


def classify_exit(returncode: int, text: str) -> tuple[FailureKind, str]:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith('{"interval_s"')]
    errors = [line for line in lines if line.startswith("kvbench: error:")]
    message = (errors[-1] if errors else lines[-1] if lines else f"exit status {returncode}")[-400:]
    if any(fault in text for fault in _MACHINE_FAULTS):
        return FailureKind.TOOL, f"the machine failed: {message}"
    if returncode < 0:
        return FailureKind.CRASH, f"kvbench died of signal {-returncode}: {message}"
    if returncode == 3:
        return FailureKind.REFUSED, f"the store refused the config: {message}"
    if returncode == 2:  # kvbench refused the spec written from the workload: not the config, not the machine
        return FailureKind.TOOL, f"kvbench rejected the spec written from the workload: {message}"
    return FailureKind.CRASH, f"kvbench failed (status {returncode}): {message}"
