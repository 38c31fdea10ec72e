"""YCSB's CoreWorkload against the node, through knobtune's Java binding: its command line and what it printed.

Every run checks each read against the value written (``dataintegrity``): a
missing or wrong row is data loss.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from knobtune.targets import FailureKind, Phase, RunFailure
from knobtune.server.life import Benchmarked
from knobtune.systems.cassandra.node import cache_dir, java17
from knobtune.workloads import Workload

KEYSPACE, TABLE = "ycsb", "usertable"
_YCSB_LINE = re.compile(r"^\[([A-Z-]+)\], ([^,]+), (.+)$")
_STATUS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d):(\d{3}) \d+ sec: (\d+) operations")  # -s, each interval
_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?)(?:st|nd|rd|th)?PercentileLatency\(us\)$")


def client_argv(main: str, args: list[str], properties: Mapping[str, str]) -> list[str]:
    """``java`` running ``main`` of our client's classpath with ``args`` and YCSB ``properties``."""
    return [str(java17()), "-cp", str(cache_dir() / "client" / "*"), main, *args,
            *[arg for key, value in properties.items() for arg in ("-p", f"{key}={value}")]]


def ycsb_properties(workload: Workload, port: int, operations: int, own: Mapping[str, str]) -> dict[str, str]:
    """YCSB's properties (the workload's ``own`` last). knobtune's seed is not passed to YCSB: each run draws its
    own keys."""
    fields = 10
    records = str(workload.records)
    return {"workload": "site.ycsb.workloads.CoreWorkload", "recordcount": records,
            "operationcount": str(operations), "insertcount": records, "fieldcount": str(fields),
            "fieldlength": str(max(1, workload.value_size // fields)), "readallfields": "true",
            "dataintegrity": "true", "measurementtype": "hdrhistogram",
            "hdrhistogram.percentiles": "50,99,99.9", "status.interval": "1", "cassandra.port": str(port),
            "cassandra.keyspace": KEYSPACE, "table": TABLE, **own}


def benchmarked(result: YcsbResult, warm_up_operations: int = 0) -> Benchmarked:
    """The run (what the objective counts: after its first ``warm_up_operations``, when YCSB's status lines place
    them), then each operation by itself over the whole run (YCSB's own counts and histograms)."""
    ops, seconds = result.after(warm_up_operations) if warm_up_operations else (result.total, result.seconds)
    run_phase = Phase("run", ops, seconds, ops / seconds if seconds else 0.0,
                      found=result.verified, expected=result.verified + result.verify_errors,
                      p50_us=_worst(result, "50"), p99_us=_worst(result, "99"), p999_us=_worst(result, "99.9"),
                      max_us=_worst(result, "max"))
    per_operation = tuple(Phase(op.lower(), count, result.seconds, count / result.seconds if result.seconds else 0.0,
                                p50_us=result.latency.get(op, {}).get("50"),
                                p99_us=result.latency.get(op, {}).get("99"),
                                p999_us=result.latency.get(op, {}).get("99.9"),
                                max_us=result.latency.get(op, {}).get("max"))
                          for op, count in sorted(result.operations.items()))
    return Benchmarked(phases=(run_phase, *per_operation), measured=("run",), elapsed_s=seconds, verified=True)


class YcsbResult:
    """What YCSB printed: ``[SECTION], Metric, value`` lines."""

    def __init__(self, text: str) -> None:
        self.seconds, self.total, self.failed_operations = 0.0, 0, 0  # failed ones: YCSB's [OP-FAILED] sections
        self.progress: list[tuple[float, int]] = []  # each status line's (Unix time, operations done so far)
        self.operations: dict[str, int] = {}
        self.latency: dict[str, dict[str, float]] = {}
        returns: dict[str, dict[str, int]] = {}
        for line in text.splitlines():
            if status := _STATUS.match(line.strip()):
                at = datetime.strptime(status.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(status.group(2)) / 1000
                self.progress.append((at, int(status.group(3))))
                continue
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
        # YCSB's check says ERROR for a read that gave no row, and a read that failed (a node that died) gives none:
        # those are failed operations, not lost data. Lost: rows missing beyond the failed reads, and wrong values.
        failed_reads = returns.get("READ", {}).get("ERROR", 0)
        self.verify_errors = (max(0, verify.get("ERROR", 0) - failed_reads)
                              + sum(n for status, n in verify.items() if status not in ("OK", "ERROR")))
        errors = {f"{section} {status}": n for section, statuses in returns.items() for status, n in statuses.items()
                  if status != "OK" and section != "CLEANUP"}
        self.lost = self.verify_errors > 0 or any("NOT_FOUND" in key for key in errors)
        problems = [f"{n:,} {key}" for key, n in sorted(errors.items())]
        if self.verify_errors:
            problems.insert(0, f"data loss: {self.verify_errors:,} reads did not return what was written "
                               f"(YCSB's check: {', '.join(f'{s} {n:,}' for s, n in verify.items() if s != 'OK')}; "
                               f"{failed_reads:,} reads failed)")
        self.failed = "; ".join(problems)

    def after(self, warm_up_operations: int) -> tuple[int, float]:
        """The operations and seconds of the run after its first ``warm_up_operations``: the moment they were done is
        read between the two status lines around it (YCSB prints one each ``status.interval``, 1 s here), linearly.

        Raises:
            RunFailure: (TOOL) the status lines do not reach that many operations (YCSB printed none).
        """
        points = [(at - self.progress[0][0], done) for at, done in self.progress] if self.progress else []
        for (t0, n0), (t1, n1) in zip(points, points[1:]):
            if n1 >= warm_up_operations:  # the first interval that reaches it
                warm_s = t0 if n0 >= warm_up_operations else t0 + (t1 - t0) * (warm_up_operations - n0) / (n1 - n0)
                return self.total - warm_up_operations, max(self.seconds - warm_s, 1e-3)
        raise RunFailure(FailureKind.TOOL, f"YCSB's status lines never reached the warm-up's "
                         f"{warm_up_operations:,} operations (of {self.total:,}): the measured window is unknown")


def _worst(result: YcsbResult, percentile: str) -> float | None:
    values = [v[percentile] for v in result.latency.values() if percentile in v]
    return max(values) if values else None
