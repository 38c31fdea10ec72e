"""RocksDB replaying a capture of an application's own work: its trace (``DB::StartTrace``) onto its checkpoint.

A capture (``workloads/capture.py``, docs/replay.md) holds the trace, the
checkpoint taken when tracing began (or none: the trace starts from an empty
store), the scan lengths recorded beside the trace (or none: each seek replays
alone; native/scanlog/scan_log.h) and a ``[drivers.replay]`` section: ``pace`` ("fast": as fast as it can;
"captured": at the trace's own pace, where the lag behind the schedule is
measured) and ``threads`` (records go to threads by their first key, so each
key's operations keep their order).

A run copies the checkpoint into a fresh store (table files hard-linked: RocksDB
never changes one), replays the rung's records through kvbench (the capture's
first ones, or ``slices`` slices spread over it; with ``rewrite``, after one
full compaction rewrote the checkpoint's tables under the config, unmeasured), which
uses RocksDB's own Replayer, and ends as a crash would; the settle is the
embedded stores' (``drivers/embedded.py``). Then, outside the measured time, kvbench
takes the digest of every key and value: it must equal the default config's at
that rung, or the run fails as data loss. The default's digest is taken by the
first default run at each rung; a rung reached first by another config runs
the default once before it, unmeasured. An operation that fails under a config
more often than under the default counts against the config.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from knobtune.errors import ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.targets import FailureKind, Measurement, Phase, RunFailure, WorkloadFacts, numbers, with_ratios
from knobtune.drivers.embedded import EmbeddedTarget, find_kvbench, read_result
from knobtune.drivers.kvbench import KILLED_AT_END, kvbench_options
from knobtune.server.process import run_logged
from knobtune.drivers.replay import run_reference
from knobtune.systems.rocksdb import trace
from knobtune.workloads import Rung, Workload
from knobtune import schema
from knobtune.schema import setting
from knobtune.workloads.capture import PACES, check_pace, spread_windows, verify_files, verify_folder

MAX_THREADS = 1024
MAX_SLICES = 64
DIGEST_LIMIT_S = 600.0  # a digest reads the whole store once; longer means the machine is in trouble


@dataclass(frozen=True)
class ReplaySection:
    """How a RocksDB capture replays (docs/replay.md): its files, its pace, its threads."""

    trace: str = setting("", example="trace")
    checkpoint: str = setting("", example="checkpoint")
    scans: str = setting("", example="scans")
    pace: str = setting("fast", choices=PACES, what="a replay pace")
    threads: int = setting(1, least=1, most=MAX_THREADS, example=4)
    # A smaller rung replays this many slices spread over the capture (1: its first records; docs/replay.md)
    slices: int = setting(1, least=1, most=MAX_SLICES, example=4, note="1: a rung is the capture's first records")
    # Rewrite the checkpoint's tables under each config (a full compaction, unmeasured) before its replay
    rewrite: bool = setting(False, note="false: the checkpoint's tables keep the format they were written in")


@dataclass(frozen=True)
class Reference:
    """What the default config left at one rung: the store's digest and how many operations failed."""

    digest: str
    keys: int
    errors: int


class RocksdbReplayTarget(EmbeddedTarget):
    driver = "replay"
    spelling = "kvbench"  # kvbench replays: the catalog's kvbench names
    key_format = "kvbench"  # the settle's probe reads: any keys answer "found" or "not found"

    @classmethod
    def installed(cls) -> str | None:
        try:
            return find_kvbench()
        except ToolMissingError:
            return None

    @classmethod
    def build(cls) -> str | None:
        if cls.installed() is None:
            return None
        with tempfile.TemporaryDirectory(prefix="knobtune-build-") as tmp:
            return trace.engine_version(Path(tmp))

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """The capture's replay section, read through the schema (``ReplaySection``), its files found.

        Raises:
            WorkloadError: one line per problem naming the file, the field and the fix.
        """
        raw = dict(workload.driver(cls.driver))
        where = str(workload.source) if workload.source else f"workload '{workload.name}'"
        read = schema.read(ReplaySection, raw, schema.Where(f"{where}: [drivers.replay]"), WorkloadError)
        check_pace(workload, read.pace)
        if not read.trace:
            raise WorkloadError(f"{where}: [drivers.replay] has no trace. Fix: name the trace file")
        for field_name in ("trace", "checkpoint", "scans"):
            path = _path(workload, raw, field_name)
            if path is not None and not path.exists():
                raise WorkloadError(f"{where}: [drivers.replay] {field_name}: {path} does not exist. Fix: make "
                                    "the capture again with `knobtune capture rocksdb`")
        return raw

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return True  # the store's digest after the replay against the default's

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 **options: object) -> None:
        super().__init__(catalog, workload, scratch_dir, **options)  # type: ignore[arg-type]
        if twin:
            raise WorkloadError(f"workload '{workload.name}' is a capture: it has no verifiable twin")
        self.system = catalog.system
        section = self.section(workload)
        _verify(workload, section)
        self.trace = _path(workload, section, "trace")
        self.checkpoint = _path(workload, section, "checkpoint")
        self.scans = _path(workload, section, "scans")
        self.pace = str(section.get("pace", "fast"))
        self.threads = int(section.get("threads", 1))
        self.slices = int(section.get("slices", 1))
        self.rewrite = bool(section.get("rewrite", False))
        self._references: dict[int, Reference] = {}

    def open(self) -> None:
        self._binary = find_kvbench()
        super().open()

    def version(self) -> str:
        return trace.engine_version(self.scratch_dir)

    def settle_config(self, config: Mapping[str, Value]) -> dict[str, str]:
        return kvbench_options(self.catalog, config, self.spelling, self.spelling)

    def workload_facts(self) -> WorkloadFacts:
        """From the capture's mix of operations; the data set is the checkpoint's files plus what the trace writes
        (keys and values of its puts and merges)."""
        mix = self.workload.capture.mix if self.workload.capture else {}
        checkpoint = sum(p.stat().st_size for p in self.checkpoint.rglob("*") if p.is_file()) if self.checkpoint else 0
        written = (mix.get("put", 0) + mix.get("merge", 0)) * (self.workload.key_size + self.workload.value_size)
        scans = bool(mix.get("seek") or mix.get("seek_for_prev"))
        return WorkloadFacts.of(self.workload, data_bytes=checkpoint + written, clients=self.threads,
                                reads=any(mix.get(kind) for kind in trace.READ_KINDS),
                                writes=any(mix.get(kind) for kind in trace.WRITE_KINDS), scans=scans,
                                point_reads_only=not scans and bool(mix.get("get") or mix.get("multiget")))

    # ------------------------------------------------------------ one run

    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        """The replay at ``rung``; first, when the config is not the default and this rung has no reference yet,
        the default's replay (unmeasured) for the digest the config's must equal."""
        if self.catalog.changed(config) and rung.records not in self._references:
            run_reference(rung, log_path, lambda log: super(RocksdbReplayTarget, self).run_at(
                self.catalog.defaults(), rung, timeout_s=None, log_path=log, seed=seed))
        return super().run_at(config, rung, timeout_s=timeout_s, log_path=log_path, seed=seed)

    def run_workload(self, config: Mapping[str, Value], rung: Rung, db_dir: Path, *, timeout_s: float | None,
                     log_path: Path, seed: int) -> Measurement:
        options = kvbench_options(self.catalog, config, self.spelling, self.spelling)  # a refusal: before the copy
        copy_store(self.checkpoint, db_dir)
        spec_path, result_path = log_path.with_suffix(".spec.json"), log_path.with_suffix(".result.json")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        windows = spread_windows(self.workload.records, rung.records, self.slices)
        spec_path.write_text(json.dumps({"trace": str(self.trace), "scans": str(self.scans or ""),
                                         "limit": rung.records, "threads": self.threads,
                                         **({"windows": windows} if len(windows) > 1 else {}),
                                         "rewrite": self.rewrite,
                                         "pace": self.pace, "statistics": self.ticker_counters,
                                         "config": options}, indent=2))
        result_path.unlink(missing_ok=True)
        argv = [self._binary, "--engine", "rocksdb", "--db", str(db_dir), "--replay", str(spec_path),
                "--result", str(result_path), "--interval-ms", "1000", "--crash-at-end", "1" if self.settle else "0"]
        outcome = run_logged(argv, log_path=log_path, timeout_s=timeout_s, memory_limit_bytes=self.memory_limit_bytes)
        self.check_process(outcome, rung, timeout_s, log_path, what="the replay")
        ended_as_asked = outcome.returncode == 0 or (self.settle and outcome.returncode == KILLED_AT_END)
        result = read_result(result_path) if ended_as_asked else None
        if result is None:
            raise RunFailure(*trace.classify_exit(outcome.returncode, log_path.read_text(errors="replace")), log_path)
        return _measurement(result, outcome.elapsed_s, log_path, outcome.peak_rss_bytes)

    def checked(self, measurement: Measurement, rung: Rung, db_dir: Path, log_path: Path) -> Measurement:
        """The data check after the run (and its settle): the store's digest against the default's at this rung."""
        digest = trace.digest(self._binary, db_dir, log_path.with_suffix(".digest.log"), DIGEST_LIMIT_S)
        errors = int(measurement.counters.get("replay_errors", 0))
        mine = Reference(digest["digest"], int(digest["keys"]), errors)
        reference = self._references.get(rung.records)
        if reference is None:  # only a default run gets here (run() measured the default first for any other)
            self._references[rung.records] = mine
            return replace(measurement, verified=True)  # the default's store is the reference: correct by definition
        if mine.errors > reference.errors:
            raise RunFailure(FailureKind.CRASH, f"{mine.errors:,} replayed operations failed under this config, "
                             f"{reference.errors:,} under the default ({trace.first_error(log_path)})", log_path)
        if mine.digest != reference.digest:
            raise RunFailure(FailureKind.DATA_LOSS, f"data changed: after the replay the store holds {mine.keys:,} "
                             f"keys (digest {mine.digest}), the default's {reference.keys:,} (digest "
                             f"{reference.digest})", log_path)
        return replace(measurement, verified=True)


def _verify(workload: Workload, section: Mapping[str, Any]) -> None:
    """The trace, the scans and every checkpoint file are the capture's own: plain names in its folder, regular
    files, their SHA-256 as ``capture`` recorded (``workloads.capture.verify_files``).

    Raises:
        WorkloadError: the first that is not, naming it and the fix.
    """
    folder = workload.source.parent if workload.source else Path(".")
    digests = workload.capture.files if workload.capture else {}
    verify_files(folder, {name: str(section[name]) for name in ("trace", "scans") if section.get(name)}, digests)
    if not section.get("checkpoint"):
        return
    checkpoint = verify_folder(folder, "checkpoint", str(section["checkpoint"]))
    prefix = f"{checkpoint.name}/"
    recorded = {name[len(prefix):]: digest for name, digest in digests.items() if name.startswith(prefix)}
    present = sorted(p.name for p in checkpoint.iterdir())
    if recorded and sorted(recorded) != present:
        raise WorkloadError(f"{checkpoint} does not hold the files the capture recorded ({len(present)} files, "
                            f"{len(recorded)} recorded): it changed since. Fix: make the capture again with "
                            "`knobtune capture rocksdb`")
    verify_files(checkpoint, {name: name for name in present}, recorded)


def _path(workload: Workload, section: Mapping[str, Any], field_name: str) -> Path | None:
    """A file the section names, relative to the capture's folder."""
    value = section.get(field_name)
    if not value:
        return None
    path = Path(str(value))
    return path if path.is_absolute() or workload.source is None else workload.source.parent / path


def copy_store(checkpoint: Path | None, db_dir: Path) -> None:
    """A fresh store in ``db_dir`` holding the checkpoint (table and blob files hard-linked where the file system
    allows, the rest copied); an empty folder when there is none."""
    db_dir.mkdir(parents=True)
    if checkpoint is None:
        return
    for source in sorted(checkpoint.iterdir()):
        target = db_dir / source.name
        if source.suffix in (".sst", ".blob"):
            try:
                os.link(source, target)
                continue
            except OSError:
                pass
        shutil.copyfile(source, target)
        target.chmod(0o600)


def _measurement(result: Mapping[str, Any], elapsed_s: float, log_path: Path, peak_rss_bytes: int) -> Measurement:
    measured = result["phases"][0]
    latency = measured.get("latency_all_us") or {}
    phase = Phase(name="replay", ops=measured["ops"], seconds=measured["elapsed_s"], ops_per_s=measured["ops_per_s"],
                  p50_us=latency.get("p50"), p99_us=latency.get("p99"), p999_us=latency.get("p99.9"),
                  max_us=latency.get("max"), mean_us=latency.get("mean"))
    replayed = result.get("replay") or {}
    lag = replayed.get("lag_us") or {}
    counters = {**numbers(result.get("stats", {})), "replay_errors": float(replayed.get("errors", 0))}
    if lag:
        counters.update(replay_lag_p99_s=lag["p99"] / 1e6, replay_lag_max_s=lag["max"] / 1e6)
    scans = replayed.get("scans") or {}
    if scans:
        counters.update(replay_scan_steps=float(scans["next_replayed"] + scans["prev_replayed"]),
                        replay_scans_matched=float(scans["matched"]), replay_scans_cut_short=float(scans["cut_short"]))
    elapsed_s -= float(replayed.get("rewrite_s") or 0.0)  # the tables' rewrite before the replay is not measured
    return Measurement(elapsed_s=elapsed_s, phases=(phase,), measured=("replay",), log_path=log_path, verified=False,
                       peak_rss_bytes=peak_rss_bytes, counters=with_ratios(counters, workload_s=phase.seconds))
