"""Benchmark: a Cassandra verdict within two hours, ranking included, beside tuning every knob (issue 58, item 3).

For each workload (YCSB-A and YCSB-B by default, at ``--records``), two arms (``--arms``), each given the whole
budget B:

- top-k: ``knobtune rank`` (Latin-hypercube samples at ``--rank-rung``) for R, then
  ``knobtune tune --ranking --top-k K`` for B - R;
- all: ``knobtune tune`` over every safe knob for B.

Each study verifies its own candidates against the default inside its budget (interleaved runs, the rounds its
sequential test asks). The arms are bench/topk.py's (``topk.arm``), each workload in a studies folder of its own.
Recorded per arm: the verdict, the verified speedup with its interval, the trial counts, the best full-size value
over time and, for top-k, the ranking's top 10 beside the top five the knob-importance study names for Cassandra
(Kanellis et al., HotStorage 2020, taken from a secondary summary of it).

    .venv/bin/python bench/cassandra_ycsb.py --workloads ycsb-a ycsb-b --records 100000 --budget 2h \
        --rank-time 2400 --rank-rung 2 --k 5 --out bench/results/cassandra-ycsb/
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import topk
from _cli import interval, save_so_far, studies_main
from cassandra_ranking import PUBLISHED_TOP5

from knobtune.units import parse_duration_s

RESUMES = True  # its figures are its steps' outputs and the studies' records (bench/_steps.py)


def run(args: argparse.Namespace) -> dict:
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-cassandra-ycsb-"))
    budget_s = parse_duration_s(args.budget)
    runs = []
    for workload in args.workloads:
        arm_args = argparse.Namespace(system="cassandra", workload=workload, records=args.records,
                                      rank_time=args.rank_time, rank_rung=args.rank_rung)
        for name in [f"top{args.k}" if arm == "top-k" else arm for arm in args.arms]:
            run_ = {"workload": workload, **topk.arm(arm_args, home / workload, name, args.seed, budget_s)}
            if run_["top_knobs"]:
                run_["published_top5"] = {k: (run_["top_knobs"].index(k) + 1 if k in run_["top_knobs"] else None)
                                          for k in PUBLISHED_TOP5}
            runs.append(run_)
            save_so_far({"runs": runs}, args.out)
    return {"budget": args.budget, "records": args.records, "arms": args.arms, "rank_time_s": args.rank_time,
            "rank_rung": args.rank_rung, "k": args.k, "seed": args.seed, "runs": runs}


def table(result: dict) -> str:
    """Per workload and arm: the verdict, the verified speedup, the trials, and the ranking's top 5."""
    lines = [f"{result['records']:,} records, {result['budget']} per arm (the ranking's {result['rank_time_s']:.0f} s "
             "inside the top-k arm's budget):", "",
             "| workload | arm | verdict | verified speedup (95% CI) | trials "
             "| ranking's top 5 (the paper's five: rank here) |",
             "|---|---|---|---|---|---|"]
    for r in result["runs"]:
        s = r["verified_speedup"]
        speedup = f"{interval(s)}{'' if s['won'] else ' n.s.'}" if s else "none verified"
        counts = ", ".join(f"{n} {kind}" for kind, n in r["counts"].items() if n)
        top = (", ".join(r["top_knobs"][:5]) + " (" + ", ".join(f"{k}: {v or '-'}" for k, v in
                                                                  r["published_top5"].items()) + ")"
               if r.get("top_knobs") else "")
        lines.append(f"| {r['workload']} | {r['arm']} | {r['verdict']} | {speedup} | {counts} | {top} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", default=["ycsb-a", "ycsb-b"])
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--budget", default="2h", help="each arm's whole budget, the ranking's included")
    parser.add_argument("--rank-time", type=float, default=2400.0, help="seconds of the top-k arm's ranking")
    parser.add_argument("--rank-rung", type=int, default=2, help="the rung the ranking's samples run at")
    parser.add_argument("--k", type=int, default=5, help="the top-k arm's number of knobs")
    parser.add_argument("--arms", nargs="+", choices=["top-k", "all"], default=["top-k", "all"],
                        help="the arms run per workload (one: a question that fits a sitting of the machine)")
    studies_main(parser, run, table)


if __name__ == "__main__":
    main()
