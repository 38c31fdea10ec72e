"""Benchmark: does a knobtune study beat PostgreSQL's default and PGTune beyond the noise? (issue 12)

Runs, with the CLI a user runs:

1. ``knobtune tune postgresql --workload W --time T`` (TPE, its own
   verification inside the budget, PGTune verified beside its candidates);
2. ``knobtune baseline postgresql --profile oltp -o pgtune.json`` (PGTune's
   rules for this machine);
3. ``knobtune compare postgresql --config default --config pgtune.json
   --config study:NAME --repeats N``: the three side by side, interleaved, at
   full size, each run settled (the server killed with its work dirty,
   restarted and checkpointed: recovery time measured), the data checked.

and writes the study's verdict, the comparison (medians, 95% bootstrap
intervals against the default, Mann-Whitney p-values, recovery time and peak
memory of each) and the tuned config to one JSON file.

    .venv/bin/python bench/postgresql.py --workload pgbench-tpcb --time 30m --out tpcb.json
    .venv/bin/python bench/run.py postgresql-tpcb       # the suite's question (bench/questions/)
    .venv/bin/python bench/postgresql.py --table bench/results/postgresql-*/*.json
    .venv/bin/python bench/postgresql.py --queries bench/results/postgresql-tpch/DAY-COMMIT.json   # per query, tpch
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _cli import emit, interval, knobtune

def run(args: argparse.Namespace) -> dict:
    home = Path(args.dir or tempfile.mkdtemp(prefix="knobtune-bench-pg-"))
    driver = ["--driver", args.driver] if args.driver else []
    started = time.monotonic()
    if args.study:  # a finished study: only the comparison
        study = args.study
        tuned = json.loads(knobtune("show", study, "--json", home=home))
    else:
        study = f"bench-{args.workload}-s{args.seed}-{time.strftime('%H%M%S')}"
        limit = ["--max-recovery-time", args.max_recovery_time] if args.max_recovery_time else []
        tuned = json.loads(knobtune("tune", "postgresql", "--workload", args.workload, *driver, "--time", args.time,
                                    "--study", study, "--seed", str(args.seed), *limit, "--json", home=home))
    study_s = time.monotonic() - started
    pgtune = home / "pgtune.json"
    knobtune("baseline", "postgresql", "--profile", args.profile, "-o", str(pgtune), home=None)
    compared = json.loads(knobtune("compare", "postgresql", "--workload", args.workload, *driver, "--config", "default",
                                   "--config", str(pgtune), "--config", f"study:{study}", "--repeats",
                                   str(args.repeats), "--seed", str(args.seed + 1), "--json", home=home))
    return {"workload": args.workload, "time": args.time, "seed": args.seed, "study": study,
            "study_wall_s": None if args.study else round(study_s, 1),
            "pgtune_profile": args.profile, "summary": tuned, "compare": compared,
            "total_wall_s": round(time.monotonic() - started, 1)}


def table(*results: dict) -> str:
    """Results as a Markdown table: per result, each candidate of its side-by-side comparison."""
    rows = ["| workload | study | candidate | median (tps, or s for tpch) | vs default (95% CI) | p | recovery "
            "(median) | peak memory |",
            "|---|---|---|---|---|---|---|---|"]
    for data in results:
        counts = data["summary"].get("counts", {})
        trials = " / ".join(f"{counts.get(k, 0)}" for k in ("complete", "pruned", "timeout"))
        for row, name in zip(data["compare"]["candidates"], ("default", f"PGTune ({data['pgtune_profile']})",
                                                             f"the study's result ({data['study']})")):
            speedup = row.get("speedup") or {}
            ci = interval(speedup, "the default")
            p = f"{speedup['p_value']:.3f}" if speedup.get("p_value") is not None else ""
            costs = row.get("costs") or {}
            recovery = costs.get("recovery_s")
            memory = costs.get("peak_rss_bytes")
            median = row["median"]
            shown = "" if median is None else (f"{median:.0f}" if median >= 100 else f"{median:.2f}")
            rows.append(f"| {data['workload']} | {data['time']}, trials {trials} | {name} | {shown} | {ci} | "
                        f"{p} | {'' if recovery is None else f'{recovery:.2f} s'} | "
                        f"{'' if memory is None else f'{memory / 2**20:.0f} MiB'} |")
    return "\n".join(rows)


def query_table(path: Path) -> str:
    """Per query, each candidate's median time over its runs (the queries driver's phases), and its ratio to the
    default's: where an analytic config gains or loses."""
    candidates = json.loads(path.read_text())["compare"]["candidates"]
    seconds = [{phase: values["seconds"]
                for phase, values in (c.get("latency_us") or {}).items() if "seconds" in values}
               for c in candidates]
    queries = sorted(seconds[0], key=lambda q: int(q.lstrip("Qq")) if q.lstrip("Qq").isdigit() else 0)
    labels = [c["label"] for c in candidates]
    rows = ["| query | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for query in queries:
        base = seconds[0][query]
        cells = [f"{base:.2f} s"] + [f"{s[query]:.2f} s ({base / s[query]:.2f}x)" if s.get(query) else "-"
                                     for s in seconds[1:]]
        rows.append(f"| {query} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="pgbench-tpcb")
    parser.add_argument("--time", default="20m", help="the study's wall-clock budget")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved runs per config in the comparison")
    parser.add_argument("--profile", default="oltp", help="PGTune's database type")
    parser.add_argument("--max-recovery-time", help="the study's --max-recovery-time, e.g. 30s")
    parser.add_argument("--driver", help="the driver (default: the system's, pgbench); queries for tpch")
    parser.add_argument("--dir", help="studies folder (default: a new temporary one)")
    parser.add_argument("--study", help="compare this finished study of --dir instead of running one")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", nargs="+", type=Path, help="print the markdown table of these result files")
    parser.add_argument("--queries", type=Path, help="print the per-query table of this result file (tpch)")
    args = parser.parse_args()
    if args.table:
        print(table(*(json.loads(path.read_text()) for path in args.table)))
        return
    if args.queries:
        print(query_table(args.queries))
        return
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
