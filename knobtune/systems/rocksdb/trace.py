"""RocksDB traces through kvbench: read one without running it, take a store's digest, and tell kvbench's replay
exits apart (native/kvbench/replay.h)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import WorkloadError
from knobtune.targets import FailureKind, RunFailure
from knobtune.drivers.embedded import find_kvbench, read_result
from knobtune.drivers.kvbench import classify_exit, engine_version as kvbench_engine_version
from knobtune.server.process import run_logged

READ_KINDS = ("get", "multiget", "seek", "seek_for_prev")
WRITE_KINDS = ("put", "delete", "single_delete", "delete_range", "merge")
INSPECT_LIMIT_S = 600.0
# What a RocksDB 7.8 trace cannot carry (db/trace_replay/trace_replay.cc of RocksDB 7.8.3: TraceIteratorSeek and
# TraceIteratorSeekForPrev are traced; Next, Prev and the values read are not). The scan lengths recorded beside
# the trace (native/scanlog/scan_log.h) give back the first.
NO_SCANS = ("an iterator's Seek and SeekForPrev are traced, not its Next and Prev calls, and no scan lengths were "
            "recorded beside the trace: a scan replays as its seek alone")
NOTES = ("the values a Get returned are not traced: the data check compares the store after the replay instead",
         "column families created during the trace are not traced: the checkpoint must hold every one it uses")
SCANS_FIX = ("give --scans the file native/scanlog/scan_log.h wrote beside this trace, after ScanLog::End() "
             "(docs/replay.md, 'Scan lengths')")

__all__ = ["NOTES", "NO_SCANS", "READ_KINDS", "WRITE_KINDS", "classify_exit", "digest", "engine_version",
           "first_error", "inspect", "notes_of", "scans_of", "summary_of"]


def engine_version(scratch_dir: Path) -> str:
    """RocksDB's version and build as kvbench (which replays) reports them."""
    return kvbench_engine_version(find_kvbench(), "rocksdb", scratch_dir)


def inspect(trace_file: Path, scans: Path | None = None) -> dict[str, Any]:
    """What a trace holds (records, the operation mix, key and value sizes, its span), read without running it;
    with ``scans``, the scan lengths recorded beside it, matched to its seeks as a replay matches them.

    Raises:
        WorkloadError: it is no RocksDB trace, or it is cut short or damaged; the scan-length file is not one, or
            none of its scans matches a traced seek (one line with the fix).
        ToolMissingError: kvbench is not built.
    """
    binary = find_kvbench()
    with tempfile.TemporaryDirectory(prefix="knobtune-trace-") as tmp:
        log, result = Path(tmp) / "inspect.log", Path(tmp) / "inspect.json"
        outcome = run_logged([binary, "--engine", "rocksdb", "--db", str(Path(tmp) / "db"), "--inspect-trace",
                              str(trace_file), *(["--scans", str(scans)] if scans else []), "--result", str(result)],
                             log_path=log, timeout_s=INSPECT_LIMIT_S)
        found = read_result(result) if outcome.returncode == 0 else None
        if found is None:
            said = _error_line(log.read_text(errors="replace")) or f"kvbench exited with status {outcome.returncode}"
            if said.startswith("kvbench: error: scans: "):
                raise WorkloadError(f"the scan lengths {said.removeprefix('kvbench: error: scans: ')}. "
                                    f"Fix: {SCANS_FIX}")
            raise WorkloadError(f"{trace_file}: {said.removeprefix('kvbench: error: trace: ')}. Fix: give the file "
                                "the application's DB::StartTrace wrote, after its EndTrace returned")
    if not found["records"]:
        raise WorkloadError(f"{trace_file}: the trace holds no operations. Fix: trace while the application works")
    matched = scans_of(found)
    if scans is not None and matched.get("scans") and not matched.get("matched"):
        raise WorkloadError(f"{scans}: none of its {matched['scans']:,} scans matches a seek of the trace {trace_file} "
                            f"(by column family, kind, key and time). Fix: {SCANS_FIX}")
    return found


def digest(binary: str, db_dir: Path, log_path: Path, limit_s: float) -> Mapping[str, Any]:
    """The digest of every key and value in the store at ``db_dir`` (kvbench --digest, read-only).

    Raises:
        RunFailure: DATA_LOSS when the store cannot be read back; TOOL when the digest could not be taken.
    """
    result_path = log_path.with_suffix(".json")
    outcome = run_logged([binary, "--engine", "rocksdb", "--db", str(db_dir), "--digest", "1", "--result",
                          str(result_path)], log_path=log_path, timeout_s=limit_s)
    found = read_result(result_path) if outcome.returncode == 0 else None
    if found is None:
        text = log_path.read_text(errors="replace")
        kind = FailureKind.DATA_LOSS if "Corruption" in text else FailureKind.TOOL
        raise RunFailure(kind, f"the store's digest after the replay could not be taken: "
                         f"{_error_line(text) or f'status {outcome.returncode}'}", log_path)
    return found


def first_error(log_path: Path) -> str:
    """The first failed operation a replay's result names (its kind and RocksDB's status), or a pointer to the log."""
    result = read_result(log_path.with_suffix(".result.json")) or {}
    return str((result.get("replay") or {}).get("first_error") or f"see {log_path}")[:300]


def _error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("kvbench: error:")]
    return lines[-1] if lines else ""


def scans_of(inspected: Mapping[str, Any]) -> dict[str, int]:
    """The scan lengths' counts an inspection found (empty: none were given): scans, matched to a traced seek,
    their Next and Prev calls, those that ran to the end of their range. Never a key."""
    found = inspected.get("scans") or {}
    return {name: int(found[name]) for name in ("scans", "matched", "next", "prev", "at_end") if name in found}


def notes_of(scans: Mapping[str, int]) -> tuple[str, ...]:
    """What the capture cannot carry, given the scan lengths it holds (empty: none)."""
    if not scans:
        return (NO_SCANS, *NOTES)
    return (f"scan lengths were recorded beside the trace: {scans.get('matched', 0):,} of its seeks replay the "
            "application's Next and Prev calls (each stops where its iterator becomes invalid)", *NOTES)


def summary_of(inspected: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of an inspection a capture's summary keeps (no key, no value)."""
    return {"operations": int(inspected["records"]), "span_s": float(inspected["span_s"]),
            "mix": {str(k): int(v) for k, v in inspected["mix"].items()},
            "key_size": max(1, round(inspected["mean_key_bytes"])),
            "value_size": max(1, round(inspected["mean_value_bytes"] or 1))}
