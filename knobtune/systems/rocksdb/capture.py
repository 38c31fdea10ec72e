"""``knobtune capture rocksdb``: an application's trace, its scan lengths and checkpoint as a capture, or a kvbench
run recorded as one (docs/replay.md). Everything is checked before the capture folder is made."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from knobtune.errors import WorkloadError
from knobtune.knobs import load_catalog
from knobtune.drivers.kvbench import SCANS
from knobtune.server.process import run_logged
from knobtune.targets import Capturing
from knobtune.systems.rocksdb import trace
from knobtune.systems.rocksdb.kvbench import RocksdbKvbenchTarget
from knobtune.workloads import Workload
from knobtune.workloads.capture import (
    CaptureSummary, make_private_dir, private_copy, sha256_of, write_capture,
)

LADDER = (0.1, 0.3, 1.0)  # the smaller rungs replay 10% and 30% of the records
# ... as 4 slices spread over the capture: on an inbox whose first part differs from the rest they ranked configs as
# the full replay did with rho 0.57 and 0.76 where its first records gave -0.02 and 0.36 (bench rung-slices), and
# as well as its first records on one that does not (bench scan-lengths); docs/replay.md
SLICES = 4
TRACE_FILE, CHECKPOINT_DIR, SCANS_FILE = "trace", "checkpoint", "scans"
RECORD_LIMIT_S = 3600.0


def from_files(source: Path, state: Path | None, out: Path, name: str, scans: Path | None = None) -> CaptureSummary:
    """Import an application's trace (``source``), the checkpoint taken when tracing began (``state``; None:
    the trace starts from an empty store) and the scan lengths recorded beside the trace (``scans``, written by
    native/scanlog/scan_log.h; None: its seeks replay alone) into the new capture folder ``out``.

    Raises:
        WorkloadError: the trace, the scan lengths or the checkpoint is not what it should be, or ``out`` is not
            new (one line).
    """
    if scans is not None and not scans.is_file():
        raise WorkloadError(f"{scans} is not a file. Fix: {trace.SCANS_FIX}")
    if not source.is_file():
        raise WorkloadError(f"{source} is not a file. Fix: give the trace file DB::StartTrace wrote with --from")
    if state is not None and not (state / "CURRENT").is_file():
        raise WorkloadError(f"{state} is not a RocksDB checkpoint (no CURRENT file in it). Fix: give the folder "
                            "Checkpoint::CreateCheckpoint made when tracing began, "
                            "or no --state if the store was empty")
    inspected = trace.inspect(source, scans)
    make_private_dir(out)
    private_copy(source, out / TRACE_FILE)
    if scans is not None:
        private_copy(scans, out / SCANS_FILE)
    if state is not None:
        private_copy(state, out / CHECKPOINT_DIR)
    return _write(out, name, inspected, state is not None,
                  f"an application's RocksDB trace ({source.name}"
                  + (f", its scan lengths {scans.name}" if scans is not None else "") + ") from "
                  + ("its checkpoint" if state is not None else "an empty store"))


def from_workload(workload: Workload, out: Path, name: str, records: int | None) -> CaptureSummary:
    """Run ``workload`` through kvbench under RocksDB's default config and capture it as an application would: from
    its first measured phase on (a checkpoint of the store before it), or from the start when it measures every
    phase; the length of every scan beside the trace when the workload scans (as native/scanlog/scan_log.h does).

    Raises:
        WorkloadError: the workload has no kvbench section, its run failed, or ``out`` is not new.
    """
    if records is not None:
        workload = workload.scaled(records)
    catalog = load_catalog("rocksdb")
    with tempfile.TemporaryDirectory(prefix="knobtune-capture-") as tmp:
        scratch = Path(tmp)
        target = RocksdbKvbenchTarget(catalog, workload, scratch, settle=False)
        spec = target.spec(catalog.defaults(), workload.full, seed=1)
        names = [p.get("name", p.get("kind")) for p in target.phases]
        start = target.measure[0] if list(target.measure) != names else ""
        scans = any((phase.get("mix") or {}).get(op) for phase in target.phases for op in SCANS)  # readseq: untraced
        spec.update(trace=str(scratch / TRACE_FILE), trace_from=start,
                    trace_checkpoint=str(scratch / CHECKPOINT_DIR) if start else "",
                    trace_scans=str(scratch / SCANS_FILE) if scans else "")
        spec_path, log = scratch / "spec.json", scratch / "run.log"
        spec_path.write_text(json.dumps(spec))
        outcome = run_logged([target.find_program(), "--engine", "rocksdb", "--db", str(scratch / "db"), "--spec",
                              str(spec_path)], log_path=log, timeout_s=RECORD_LIMIT_S)
        if outcome.returncode != 0:
            raise WorkloadError(f"the run of '{workload.name}' to capture failed (status {outcome.returncode}): "
                                f"{_last_line(log)}. Fix: try it with `knobtune compare rocksdb --driver kvbench`")
        inspected = trace.inspect(scratch / TRACE_FILE, scratch / SCANS_FILE if scans else None)
        make_private_dir(out)
        private_copy(scratch / TRACE_FILE, out / TRACE_FILE)
        if scans:
            private_copy(scratch / SCANS_FILE, out / SCANS_FILE)
        if start:
            private_copy(scratch / CHECKPOINT_DIR, out / CHECKPOINT_DIR)
        shutil.rmtree(scratch / "db", ignore_errors=True)
    return _write(out, name, inspected, bool(start), f"kvbench's run of the workload '{workload.name}' "
                  f"({workload.records:,} records), traced from " + (f"its phase '{start}'" if start else "the start"))


def _write(out: Path, name: str, inspected: dict, has_checkpoint: bool, origin: str) -> CaptureSummary:
    kept = trace.summary_of(inspected)
    scans = trace.scans_of(inspected)
    files = {TRACE_FILE: sha256_of(out / TRACE_FILE)}
    if scans:
        files[SCANS_FILE] = sha256_of(out / SCANS_FILE)
    if has_checkpoint:
        files.update({f"{CHECKPOINT_DIR}/{p.name}": sha256_of(p) for p in sorted((out / CHECKPOINT_DIR).iterdir())})
    summary = CaptureSummary(system="rocksdb", operations=kept["operations"], span_s=kept["span_s"], sessions=1,
                             mix=kept["mix"], files=files, notes=trace.notes_of(scans), scans=scans)
    section = {"trace": TRACE_FILE, "pace": "fast", "threads": 1, "slices": SLICES}
    if scans:
        section["scans"] = SCANS_FILE
    if has_checkpoint:
        section["checkpoint"] = CHECKPOINT_DIR
    write_capture(out, name=name, description=f"A capture: {origin}", system="rocksdb", objective="elapsed_s",
                  ladder=LADDER, counts="operations", section=section, summary=summary,
                  fields={"key_size": kept["key_size"], "value_size": kept["value_size"]})
    return summary


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"


CAPTURING = Capturing(source="a RocksDB trace file (DB::StartTrace)",
                      state="the checkpoint folder taken when tracing began", from_files=from_files,
                      from_workload=from_workload,
                      scans="the scan lengths native/scanlog/scan_log.h wrote beside the trace",
                      from_files_with_scans=from_files)

__all__ = ["CAPTURING"]
