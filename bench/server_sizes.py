"""Benchmark: what a server workload's full-size run does under the default (issue 31).

Opens the workload's target (loading its data, or reusing a kept copy), runs
the default config at full size N times and prints, per run, its settled time,
throughput, recovery, peak memory and the server's own counters (for
PostgreSQL: checkpoints timed and requested, buffers written by checkpoints,
the background writer and the backends, cache hits, WAL bytes). It checks
that a shipped size does what its workload file says (data larger than the
default's cache, the default checkpointing at least twice inside a run).

    .venv/bin/python bench/server_sizes.py postgresql tpcc --runs 1
    .venv/bin/python bench/server_sizes.py postgresql pgbench-tpcb --runs 2 --out sizes-tpcb.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _cli import emit

from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.workloads import load_workload


def run(args: argparse.Namespace) -> dict:
    catalog, workload = load_catalog(args.system), load_workload(args.workload)
    runs = []
    with tempfile.TemporaryDirectory(prefix="knobtune-bench-sizes-") as folder:
        started = time.monotonic()
        with make_target(catalog, workload, Path(folder) / "scratch", args.driver) as target:
            opened_s = time.monotonic() - started
            for index in range(args.runs):
                began = time.monotonic()
                m = target.run(catalog.defaults(), workload.full, timeout_s=None,
                               log_path=Path(folder) / f"run-{index}.log", seed=index + 1)
                runs.append({"wall_s": round(time.monotonic() - began, 1), "elapsed_s": round(m.elapsed_s, 2),
                             "workload_s": round(m.workload_s, 2), "ops_per_s": round(m.ops_per_s, 1),
                             "recovery_s": m.recovery_s, "peak_rss_bytes": m.peak_rss_bytes,
                             "counters": dict(m.counters)})
                print(runs[-1], flush=True)
            note = target.open_note()
    return {"system": args.system, "workload": args.workload, "records": workload.records, "open_s": round(opened_s, 1),
            "open_note": note, "runs": runs}



SHOWN = ("checkpoints_timed", "checkpoints_requested", "buffers_written_by_backends", "cache_hit_ratio", "wal_bytes")


def table(result: dict) -> str:
    """A result as a Markdown table: one row per full-size run of the default, with the server's counters."""
    rows = [f"{result['system']} {result['workload']}, {result['records']:,} at full size; opened in "
            f"{result['open_s']} s ({result.get('open_note') or 'loaded'}):", "",
            "| run | measured (workload + settle) | ops/s | recovery | peak memory | " + " | ".join(SHOWN) + " |",
            "|---" * (5 + len(SHOWN)) + "|"]
    for index, run in enumerate(result["runs"], 1):
        counters = [run["counters"].get(name) for name in SHOWN]
        shown = ["-" if value is None else f"{value:,.3g}" if isinstance(value, float) else f"{value:,}"
                 for value in counters]
        recovery = "-" if run["recovery_s"] is None else f"{run['recovery_s']:.2f} s"
        rows.append(f"| {index} | {run['elapsed_s']} s | {run['ops_per_s']:,.0f} | {recovery} "
                    f"| {run['peak_rss_bytes'] / 2**20:,.0f} MiB | " + " | ".join(shown) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("system")
    parser.add_argument("workload")
    parser.add_argument("--driver")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
