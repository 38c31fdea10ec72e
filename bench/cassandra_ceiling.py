"""Benchmark: Cassandra's ceiling: do the knobs a ranking put first, each swept over its range with the others at their
defaults, beat the default anywhere (issue 58, item 3: "a measured ceiling (a sweep of the ranked knobs showing none
ahead) when there is none")?

The knobs are the first ``--knobs`` of the ranking a cassandra-ycsb top-k result recorded (``--ranked-from RESULT``,
a result file of the repository: its top-k run's ``top_knobs``), so the sweep asks of exactly the knobs that arm
tuned, at its workload and size. Each knob: ``knobtune sweep cassandra --knob K --points P --repeats N`` (the default,
P points over the knob's range and its special values, each run N times, interleaved, at full size). A point is
ahead when it is across every point of every knob swept (Holm's step-down over each point's one-sided rank test
against its sweep's default: knobtune/analysis/sweep.py, ``ahead_across``); the ceiling holds when no point is. The
table also names the points whose own 95% interval lies above 1: of many points, some do by chance.

    .venv/bin/python bench/cassandra_ceiling.py --ranked-from bench/results/cassandra-ycsb-a-top5/RESULT.json \
        --knobs 5 --points 3 --repeats 6 --out bench/results/cassandra-ceiling-a/
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _cli import interval, knobtune_json, studies_main
from knobtune.analysis.sweep import ahead_across, runs_to_tell

RESUMES = True  # its figures are its steps' outputs (bench/_steps.py)


def run(args: argparse.Namespace) -> dict:
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-cassandra-ceiling-"))
    source = json.loads(args.ranked_from.read_text())
    ranked = next((r for r in source["runs"] if r.get("top_knobs")), None)
    if ranked is None:
        raise SystemExit(f"{args.ranked_from} holds no ranking (no run with top_knobs). Fix: name a cassandra-ycsb "
                         "result of a top-k arm")
    knobs = ranked["top_knobs"][:args.knobs]
    sweeps = [swept(args, home, ranked["workload"], source["records"], knob) for knob in knobs]
    family = {(i, label): p for i, s in enumerate(sweeps) for label, p in (s.get("p_better") or {}).items()}
    ahead = ahead_across(family)
    for i, s in enumerate(sweeps):
        if "error" not in s:
            s["ahead_across"] = [label for label in s["p_better"] if (i, label) in ahead]
    return {"compared": len(family), "runs_to_tell": runs_to_tell(len(family)),
            "ranked_from": str(args.ranked_from), "workload": ranked["workload"], "records": source["records"],
            "ranking_samples": ranked.get("ranking_samples"), "knobs": knobs, "points": args.points,
            "repeats": args.repeats, "seed": args.seed, "sweeps": sweeps,
            "ceiling": ceiling(sweeps)}


def ceiling(sweeps: list[dict]) -> bool | None:
    """True when no point of any knob is ahead across them all (a result from before that judgement: by its own
    interval); None when a knob's sweep did not run (nothing to say of it)."""
    if any(s.get("ahead_across", s.get("ahead")) for s in sweeps):
        return False
    return None if any("error" in s for s in sweeps) else True


def swept(args: argparse.Namespace, home: Path, workload: str, records: int, knob: str) -> dict:
    """One knob swept with the others at their defaults: its points against the default, and those ahead of it."""
    try:
        data = knobtune_json("sweep", "cassandra", "--workload", workload, "--records", str(records), "--knob", knob,
                             "--points", str(args.points), "--repeats", str(args.repeats), "--seed", str(args.seed),
                             home=home)
    except SystemExit as exc:
        return {"knob": knob, "error": str(exc)[:500]}
    points = [p for p in data["points"] if not p["default"]]
    measured = [p for p in points if p["versus_default"]]
    best = max(measured, key=lambda p: p["versus_default"]["ratio"], default=None)
    return {"knob": knob, "points": len(points), "failed": sum(1 for p in points if p["failure"]),
            "noise_cv": data["noise_cv"],
            "best": None if best is None else {"label": best["label"], **{k: best["versus_default"][k] for k in
                                                                        ("ratio", "ci_low", "ci_high")}},
            "ahead": [p["label"] for p in measured if p["versus_default"]["significant"]],
            "p_better": {p["label"]: p["p_better"] for p in measured if p.get("p_better") is not None},
            "behind": [p["label"] for p in measured if p["versus_default"]["ci_high"] < 1.0]}


def table(result: dict) -> str:
    """Per knob: its best point over the default with the interval, the points ahead and behind, the failures."""
    lines = [f"{result['workload']} at {result['records']:,} records: the first {len(result['knobs'])} knobs of the "
             f"ranking in {result['ranked_from']}, each swept with the others at their defaults ({result['points']} "
             f"points and its special values, {result['repeats']} interleaved runs a point); "
             + {True: "**no point ahead of the default**", False: "**a point ahead of the default**",
                None: "no ceiling to state: a knob's sweep did not run"}[result["ceiling"]] + _family(result), "",
             "| knob | points (failed) | best point over the default (95% CI) | ahead across all | ahead by its own "
             "interval | behind | noise |", "|---|---|---|---|---|---|---|"]
    for s in result["sweeps"]:
        if "error" in s:
            lines.append(f"| {s['knob']} | did not run: {s['error'][:120]} | | | | |")
            continue
        b = s["best"]
        best = f"{b['label']}: {interval(b)}" if b else "none measured"
        across = ", ".join(s["ahead_across"]) or "-" if "ahead_across" in s else "not judged"
        lines.append(f"| {s['knob']} | {s['points']} ({s['failed']}) | {best} | {across} "
                     f"| {', '.join(s['ahead']) or '-'} | {len(s['behind'])} | {s['noise_cv']:.1%} |")
    return "\n".join(lines)


def _family(result: dict) -> str:
    """How the points were judged together, and whether the runs could tell one ahead at all."""
    if "compared" not in result:
        return " (each point by its own 95% interval: a result from before points were judged together)"
    text = f" (judged across all {result['compared']} points, at a 5% error rate across them"
    if result["repeats"] < result["runs_to_tell"]:
        text += f"; at {result['repeats']} runs a point none can be: {result['runs_to_tell']} runs could tell"
    return text + ")"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranked-from", type=Path, required=True, help="a cassandra-ycsb result of a top-k arm")
    parser.add_argument("--knobs", type=int, default=5, help="how many of its ranked knobs to sweep")
    parser.add_argument("--points", type=int, default=3, help="points over each knob's range")
    parser.add_argument("--repeats", type=int, default=6,
                        help="interleaved runs a point (6: the fewest at which one of 15 points can be told ahead)")
    studies_main(parser, run, table)


if __name__ == "__main__":
    main()
