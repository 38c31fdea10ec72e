"""Benchmark: what Cassandra's class archive saves a run (issue 31: where a Cassandra run's time goes).

Opens a Cassandra target on a small workload, then runs its first rung N times with the node's class archive
(``knobtune.systems.cassandra.node.class_archive``) and N times with it moved aside, interleaved, and prints per
run the node's start, its restart after the crash (the recovery, inside the measured time) and the run's wall
time, then the medians of each arm. The archive must exist (any Cassandra load on this machine records it).

    .venv/bin/python bench/cassandra_start.py --pairs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _cli import emit

from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.systems.cassandra.node import class_archive
from knobtune.workloads import load_workload


def run(args: argparse.Namespace) -> dict:
    catalog, workload = load_catalog("cassandra"), load_workload(args.workload).scaled(args.records)
    archive = class_archive()
    if not archive.is_file():
        sys.exit(f"no class archive at {archive}: run any Cassandra load first (e.g. the tests)")
    aside = archive.with_name(archive.name + ".aside")
    arms: dict[str, list[dict]] = {"archive": [], "none": []}
    with tempfile.TemporaryDirectory(prefix="knobtune-bench-cassandra-start-") as folder:
        with make_target(catalog, workload, Path(folder) / "scratch") as target:
            for index in range(args.pairs):
                for arm, rows in arms.items():
                    if arm == "none":
                        os.rename(archive, aside)
                    try:
                        began = time.monotonic()
                        m = target.run(catalog.defaults(), workload.rungs[0], timeout_s=300,
                                       log_path=Path(folder) / f"{arm}-{index}.log", seed=index + 1)
                        rows.append({"start_s": m.start_s, "recovery_s": m.recovery_s,
                                     "wall_s": round(time.monotonic() - began, 2)})
                    finally:
                        if arm == "none":
                            os.rename(aside, archive)
                    print(arm, rows[-1], flush=True)
    medians = {arm: {key: statistics.median(row[key] for row in rows) for key in rows[0]} for arm, rows in arms.items()}
    return {"workload": workload.name, "records": workload.records, "pairs": args.pairs, "runs": arms,
            "medians": medians}



def table(result: dict) -> str:
    """A result as a Markdown table: each arm's medians."""
    rows = [f"{result['workload']}, {result['records']:,} records, first rung, {result['pairs']} interleaved pairs "
            "(medians):", "", "| class archive | node's start | restart after the crash (measured) | run's wall time |",
            "|---|---|---|---|"]
    for arm, label in (("archive", "used"), ("none", "moved aside")):
        m = result["medians"][arm]
        rows.append(f"| {label} | {m['start_s']:.2f} s | {m['recovery_s']:.2f} s | {m['wall_s']:.2f} s |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="ycsb-a")
    parser.add_argument("--records", type=int, default=1000,
                        help="records loaded; the first rung runs a tenth of the operations")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
