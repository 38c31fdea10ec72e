"""Benchmark: a Cassandra run's warm-up before its measured window (issue 31: what the small rungs measure).

Every run starts a cold node and a cold YCSB client (the data is restored, so the node restarts): their first
seconds run at a fraction of the steady rate, and a small rung measured from the first operation measures mostly
that. This opens the workload's target twice, with its ``warm_up_operations`` and with none, and runs the default
at the first rung and at full size interleaved, printing per run the measured throughput; then per arm the
medians, the first rung's spread and its ratio to the full size.

    .venv/bin/python bench/cassandra_warm_up.py --workload ycsb-a-1m --small 3 --full 2
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path

from _cli import emit

from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.workloads import load_workload


def run(args: argparse.Namespace) -> dict:
    catalog, workload = load_catalog("cassandra"), load_workload(args.workload)
    section = workload.drivers["ycsb"]
    cold = dataclasses.replace(workload, drivers={"ycsb": {**section, "warm_up_operations": 0}})
    arms = {f"warm-up {section.get('warm_up_operations', 0):,}": workload, "none": cold}
    rows: dict[str, dict[str, list[float]]] = {arm: {"small": [], "full": []} for arm in arms}
    plan = ["small"] * args.small + ["full"] * args.full
    with tempfile.TemporaryDirectory(prefix="knobtune-bench-warm-up-") as folder:
        targets = {arm: make_target(catalog, spec, Path(folder) / arm.split()[0]) for arm, spec in arms.items()}
        try:
            for target in targets.values():
                target.open()
            for index, size in enumerate(plan):
                for arm, target in targets.items():
                    rung = workload.rungs[0] if size == "small" else workload.full
                    m = target.run(catalog.defaults(), rung, timeout_s=None,
                                   log_path=Path(folder) / f"{arm[:4]}-{index}.log", seed=index)
                    rows[arm][size].append(round(m.phases[0].ops_per_s, 1))
                    print(arm, size, rows[arm][size][-1], flush=True)
        finally:
            for target in targets.values():
                target.close()
    summary = {arm: {"small_median": statistics.median(r["small"]), "full_median": statistics.median(r["full"]),
                     "small_spread": (max(r["small"]) - min(r["small"])) / statistics.median(r["small"]),
                     "small_to_full": statistics.median(r["small"]) / statistics.median(r["full"])}
               for arm, r in rows.items()}
    return {"workload": workload.name, "runs": rows, "summary": summary}



def table(result: dict) -> str:
    """A result as a Markdown table: per arm the medians of the first rung and the full size."""
    rows = [f"{result['workload']}, the default's measured throughput (medians):", "",
            "| warm-up | first rung | full size | first rung / full size | first rung's spread |",
            "|---|---|---|---|---|"]
    for arm, s in result["summary"].items():
        rows.append(f"| {arm} | {s['small_median']:,.0f} ops/s | {s['full_median']:,.0f} ops/s "
                    f"| {s['small_to_full']:.0%} | {s['small_spread']:.0%} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="ycsb-a-1m")
    parser.add_argument("--small", type=int, default=3, help="runs at the first rung per arm")
    parser.add_argument("--full", type=int, default=2, help="runs at full size per arm")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
