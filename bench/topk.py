"""Benchmark: does ranking knobs first and tuning only the top k pay off at the same wall-clock budget? (issue 13)

For each seed, four arms, each given the same total budget B:

- all:    ``knobtune tune`` (TPE) over every safe knob, --time B;
- random: the same with ``--sampler random``;
- top5, top10: ``knobtune rank`` (Latin-hypercube samples at rung 0) for R,
  then ``knobtune tune --ranking --top-k K`` for B - R (the ranking's time is
  counted against both top-k arms: it is shared, so each pays it whole).

Every study verifies its own top 3 against the default inside its budget
(5 interleaved runs each). Recorded per arm: the verified speedup (with its
95% CI), the best full-size value over time (from the trials' end times,
the ranking's time added for top-k arms), and when the arm first reached 95%
of the best full-size value the all-knob arm reached. Also the rank
agreement between rungs: the same ranking computed from rung 0 and from
rung 1 of the all-knob studies' trials (``rank --from-study``).

    .venv/bin/python bench/topk.py --budget 4m --rank-time 80 --seeds 1 2 3 --records 20000 \
        --out bench/results/topk/
    .venv/bin/python bench/topk.py --table bench/results/topk/DAY-COMMIT.json
    .venv/bin/python bench/topk.py --plot bench/results/topk/DAY-COMMIT.json topk.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from _cli import (as_speedups, emit, interval, knobtune_json, last_step_s, save_so_far, study_timeline,
                  verified_speedup)
from knobtune.units import parse_duration_s

RESUMES = True  # its figures are its steps' outputs and the studies' records (bench/_steps.py)


def arm(args: argparse.Namespace, home: Path, name: str, seed: int, budget_s: float) -> dict:
    common = ["--workload", args.workload, "--records", str(args.records), "--seed", str(seed)]
    offset, ranked = 0.0, None
    extra: list[str] = []
    if name.startswith("top"):
        ranking_study = f"rank-s{seed}"
        if not (home / f".ranked-{seed}").exists():  # one ranking a seed, shared by the top-k arms
            ranked = knobtune_json("rank", args.system, *common, "--samples", "400", "--time", f"{args.rank_time}s",
                                   "--rung", str(args.rank_rung), "--study", ranking_study, home=home)
            (home / f".ranked-{seed}").write_text(json.dumps({"s": last_step_s(), "ranking": ranked}))
        saved = json.loads((home / f".ranked-{seed}").read_text())
        offset, ranked = saved["s"], saved["ranking"]
        extra = ["--ranking", ranking_study, "--top-k", name.removeprefix("top")]
    if name == "random":
        extra = ["--sampler", "random"]
    study = f"{name}-s{seed}"
    summary = knobtune_json("tune", args.system, *common, "--time", f"{max(budget_s - offset, 30):.0f}s", "--study",
                            study, *extra, home=home)
    wall = last_step_s() + offset
    maximize = summary["objective"] == "ops_per_s"
    verified = verified_speedup(summary)
    return {"arm": name, "seed": seed, "study": study, "wall_s": round(wall, 1), "ranking_s": round(offset, 1),
            "ranking_samples": ranked["samples"] if ranked else None, "verdict": summary["verdict"],
            "verified_speedup": verified, "counts": summary["counts"], "default_value": summary["default_value"],
            "maximize": maximize, "timeline": study_timeline(home, study, maximize, offset),
            "top_knobs": ranked["order"][:10] if ranked else None}


def rung_agreement(args: argparse.Namespace, home: Path, seed: int) -> dict:
    """The same ranking from rung 0 and rung 1 of one all-knob study's trials: Kendall's tau of the orders."""
    from scipy.stats import kendalltau

    orders = {}
    for rung in (0, 1):
        try:
            orders[rung] = knobtune_json("rank", args.system, "--workload", args.workload, "--from-study",
                                         f"all-s{seed}",
                                    "--rung", str(rung), home=home)
        except SystemExit as exc:  # too few trials reached rung 1
            return {"seed": seed, "note": str(exc)[:300]}
    knobs = orders[0]["order"]
    positions = [[orders[r]["order"].index(k) for k in knobs] for r in (0, 1)]
    tau = kendalltau(*positions).statistic
    return {"seed": seed, "samples": {r: orders[r]["samples"] for r in (0, 1)}, "tau": tau,
            "top5": {r: orders[r]["order"][:5] for r in (0, 1)}}


def table(data: dict) -> str:
    """A result as a Markdown table: one row per arm, its seeds' figures side by side."""
    rows = ["| arm | seeds | verified speedup of the best candidate per seed (95% CI; n.s.: within the noise) | "
            "best full-size single run per seed (over the arm's default) | time to 95% of the all-knob best (median) |",
            "|---|---|---|---|---|"]
    arms = sorted({r["arm"] for r in data["runs"]}, key=["all", "random", "top5", "top10"].index)
    for name in arms:
        runs = [r for r in data["runs"] if r["arm"] == name]
        verified = "; ".join(f"{interval(s)}{'' if s.get('won') else ' n.s.'}"
                             if (s := r["verified_speedup"]) else "none verified" for r in runs)
        bests = "; ".join(f"{max(v for _, v in speedups(r)):.2f}x" if r["timeline"] else "-" for r in runs)
        reach = [r.get("reached_s") for r in runs if r.get("reached_s") is not None]
        reached = f"{statistics.median(reach):.0f} s ({len(reach)}/{len(runs)} reached)" if reach else "never"
        rows.append(f"| {name} | {len(runs)} | {verified} | {bests} | {reached} |")
    return "\n".join(rows)


def speedups(run: dict) -> list[tuple[float, float]]:
    """An arm's timeline as speedups over its own default's single run (the machine's drift between arms cancels)."""
    return as_speedups(run["timeline"], run["default_value"], run["maximize"])


def mark_reached(runs: list[dict]) -> None:
    """When each arm first reached 95% of the best speedup its seed's all-knob arm reached (``reached_s``)."""
    for run in runs:
        reference = next((r for r in runs if r["arm"] == "all" and r["seed"] == run["seed"] and r["timeline"]), None)
        goal = 0.95 * max(v for _, v in speedups(reference)) if reference else None
        run["reached_s"] = next((t for t, v in speedups(run) if v >= goal), None) if goal else None


def refresh(path: Path, home: Path) -> None:
    """Re-read each run's verification from its stored study (``show --json``) into the result file."""
    data = json.loads(path.read_text())
    for run in data["runs"]:
        run["verified_speedup"] = verified_speedup(knobtune_json("show", run["study"], home=home))
    mark_reached(data["runs"])
    path.write_text(json.dumps(data, indent=1) + "\n")


def plot(path: Path, out: Path) -> None:
    """Each arm's best full-size speedup over its own default's single run, over time; its verified speedup
    (95% CI) at the end of its budget."""
    from _plot import plot_best_over_time

    data = json.loads(path.read_text())
    lines = []
    for run in data["runs"]:
        verified = run["verified_speedup"]
        end = (run["wall_s"], verified["ratio"], verified["ci_low"], verified["ci_high"]) if verified else None
        lines.append({"arm": run["arm"], "points": speedups(run), "end": end})
    plot_best_over_time(lines, out, ylabel="best full-size speedup so far (single runs; dot: verified, 95% CI)",
                        title=f"RocksDB put-get-delete, {data.get('records', '?')} records, {data.get('budget', '?')} "
                              "per arm, "
                              f"{len({r['seed'] for r in data['runs']})} seeds")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--budget", default="4m")
    parser.add_argument("--rank-time", type=float, default=80.0, help="seconds of ranking samples")
    parser.add_argument("--rank-rung", type=int, default=0, help="the rung the ranking's samples run at")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--arms", nargs="+", default=["all", "random", "top5", "top10"])
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path)
    parser.add_argument("--refresh", nargs=2, type=Path, metavar=("RESULT", "DIR"),
                        help="recompute each run's verified figures from its study in the studies folder DIR")
    parser.add_argument("--plot", nargs=2, type=Path, metavar=("RESULT", "PNG"),
                        help="draw the best speedup over time of a result file into a PNG")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if args.plot:
        plot(*args.plot)
        return
    if args.refresh:
        refresh(*args.refresh)
        return
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-topk-"))
    budget_s = parse_duration_s(args.budget)
    runs = []
    for seed in args.seeds:  # arms of one seed one after the other: drift spreads over every arm alike
        for name in args.arms:
            runs.append(arm(args, home, name, seed, budget_s))
            save_so_far({"runs": runs}, args.out)
    mark_reached(runs)
    result = {"budget": args.budget, "rank_time_s": args.rank_time, "records": args.records, "runs": runs,
              "rung_agreement": [rung_agreement(args, home, seed) for seed in args.seeds if "all" in args.arms]}
    emit(result, args.out)


if __name__ == "__main__":
    main()
