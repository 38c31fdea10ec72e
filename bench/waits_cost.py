"""What sampling PostgreSQL's wait events costs a run (issue 32): the same runs with and without the sampler.

One target (the shipped workload's data and clients, ``--records`` transactions a run) runs the default config
``--repeats`` times with the sampler and as often without it, interleaved (on, off, on, off, ...). The figure is
pgbench's own time (the settle is the same either way), as a ratio of medians with a 95% bootstrap interval
(``analysis/stats.py``): above 1, the runs without the sampler were faster.

    .venv/bin/python bench/waits_cost.py --workload pgbench-tpcb --records 20000 --repeats 5 \\
        --out bench/results/waits-cost/
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from knobtune.analysis.stats import speedup
from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.systems.postgresql import waits
from knobtune.workloads import load_workload

from _cli import emit



def table(result: dict) -> str:
    """A result as a Markdown table: pgbench's median time with and without the sampler, and their ratio."""
    low, high = result["ci"]
    runs = len(result["workload_s"]["sampled"])
    return "\n".join([
        f"{result['workload']}, {result['records']:,} transactions a run, {runs} runs each, interleaved:", "",
        "| sampled (median) | unsampled (median) | sampled / unsampled (95% CI) | p | wait samples a sampled run |",
        "|---|---|---|---|---|",
        f"| {result['median_s']['sampled']:.1f} s | {result['median_s']['unsampled']:.1f} s "
        f"| {result['sampled_over_unsampled']:.2f}x ({low:.2f}-{high:.2f}) | {result['p_value']:.2f} "
        f"| {min(result['wait_samples']):.0f}-{max(result['wait_samples']):.0f} |"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="pgbench-tpcb")
    parser.add_argument("--records", type=int, default=20_000, help="transactions a run (all clients together)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    catalog = load_catalog("postgresql")
    workload = load_workload(args.workload).scaled(args.records)
    times: dict[str, list[float]] = {"sampled": [], "unsampled": []}
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="knobtune-waits-cost-") as scratch, \
            make_target(catalog, workload, Path(scratch) / "target") as target:
        for index in range(2 * args.repeats):
            sampled = index % 2 == 0
            target.start_sampling = target.start_sampling if sampled else (lambda log: None)  # type: ignore[method-assign]
            measured = target.run(catalog.defaults(), workload.full, timeout_s=1800,
                                  log_path=Path(scratch) / f"run-{index}.log", seed=1)
            del target.start_sampling  # the class's own again
            times["sampled" if sampled else "unsampled"].append(measured.workload_s)
            if sampled:
                samples.append(measured.counters["wait_samples"])
            print(f"run {index}: {'sampled  ' if sampled else 'unsampled'} {measured.workload_s:7.2f} s "
                  f"{measured.ops_per_s:7.1f} ops/s (settled)", flush=True)
    cost = speedup(times["sampled"], times["unsampled"], maximize=False)
    emit({"workload": args.workload, "records": args.records, "interval_s": waits.INTERVAL_S,
          "workload_s": times, "median_s": {k: statistics.median(v) for k, v in times.items()},
          "wait_samples": samples, "sampled_over_unsampled": cost.ratio, "ci": [cost.ci_low, cost.ci_high],
          "p_value": cost.p_value}, args.out)


if __name__ == "__main__":
    main()
