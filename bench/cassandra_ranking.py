"""Benchmark: the knob-importance study's method on Cassandra, reproduced at a size where its knobs matter (issue 58).

Kanellis et al. ("Too Many Knobs to Tune? Towards Faster Database Tuning by Pre-selecting Important Knobs",
HotStorage 2020) rank Cassandra's knobs from Latin-hypercube samples with a random forest and find that a few
knobs give nearly all the throughput tuning many gives. This runs, with the CLI a user runs:

1. ``knobtune rank cassandra --workload W --records R --samples N --rung K``, then the same command with N raised
   by ``--step`` (the study resumes down the same design) until the consensus top 5 is the same in at least half
   of the bootstrap resamples (``top_k_stability``) or ``--max-samples`` is reached;
2. the best sample's share of gain its top-5 knobs keep: ``knobtune compare`` at full size, interleaved, of the
   default, the best sample (every knob as sampled) and the same sample with only the ranking's top 5 changed
   (the rest at their defaults): share = (top-5 gain - 1) / (best sample's gain - 1);
3. the top 5 the paper names for Cassandra on YCSB-A beside the ranking's order. We took that list from a
   secondary summary of the paper, not from the paper's own table: concurrent_reads,
   native_transport_max_threads, memtable_heap_space, memtable_cleanup_threshold, compaction_throughput.

    .venv/bin/python bench/cassandra_ranking.py --workload ycsb-a --records 100000 --samples 40 --step 20 \
        --max-samples 100 --rung 2 --repeats 3 --out bench/results/cassandra-ranking/
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _cli import interval, knobtune_json, studies_main

from knobtune.storage import open_store
from knobtune.tuning.records import records

RESUMES = True  # its figures are its steps' outputs and the studies' records (bench/_steps.py)

PUBLISHED_TOP5 = ("concurrent_reads", "native_transport_max_threads", "memtable_heap_space",
                  "memtable_cleanup_threshold", "compaction_throughput")
STABLE = 0.5  # the share of bootstrap resamples whose top 5 is the consensus top 5 that the issue asks for


def ranked(args: argparse.Namespace, home: Path) -> list[dict]:
    """Rank with more samples until the top 5 is stable or the samples run out; each ranking as printed."""
    rankings: list[dict] = []
    samples = args.samples
    while True:
        rankings.append(knobtune_json("rank", "cassandra", "--workload", args.workload, "--records",
                                      str(args.records), "--samples", str(samples), "--rung", str(args.rung),
                                      "--study", "rank", "--seed", str(args.seed), home=home))
        stability = rankings[-1]["top_k_stability"].get("5", 0.0)
        print(f"{rankings[-1]['samples']} samples: top 5 stable in {stability:.0%} of the resamples", flush=True)
        if stability >= STABLE or samples >= args.max_samples:
            return rankings
        samples = min(samples + args.step, args.max_samples)


def top5_share(args: argparse.Namespace, home: Path, order: list[str]) -> dict:
    """The best sample at the ranking's rung, measured at full size beside its top-5 part and the default."""
    trials = [t for t in records(open_store(home).load("rank"))
              if not t.is_default and args.rung in t.runs and t.runs[args.rung].ok]
    best = max(trials, key=lambda t: t.runs[args.rung].value or 0.0)
    part = {knob: value for knob, value in best.config.items() if knob in order[:5]}
    files = {"best": home / "best-sample.json", "top5": home / "best-sample-top5.json"}
    files["best"].write_text(json.dumps(dict(best.config)))
    files["top5"].write_text(json.dumps(part))
    compared = knobtune_json("compare", "cassandra", "--workload", args.workload, "--records", str(args.records),
                             "--config", "default", "--config", str(files["best"]), "--config", str(files["top5"]),
                             "--repeats", str(args.repeats), "--seed", str(args.seed), home=home)
    by_label = {c["label"]: c for c in compared["candidates"]}
    gains = {name: (by_label.get(str(path)) or {}).get("speedup") for name, path in files.items()}
    share = None
    if gains["best"] and gains["top5"] and gains["best"]["ratio"] != 1:
        share = round((gains["top5"]["ratio"] - 1) / (gains["best"]["ratio"] - 1), 3)
    return {"trial": best.number, "config": dict(best.config), "top5_part": part, "gains": gains, "share": share,
            "noise_cv": compared.get("noise_cv"), "compare": compared}


def run(args: argparse.Namespace) -> dict:
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-cassandra-ranking-"))
    rankings = ranked(args, home)
    order = rankings[-1]["order"]
    result = {"workload": args.workload, "records": args.records, "rung": args.rung, "seed": args.seed,
              "rankings": [{"samples": r["samples"], "top_k_stability": r["top_k_stability"], "top10": r["order"][:10]}
                           for r in rankings],
              "ranking": rankings[-1],
              "published_top5": {knob: (order.index(knob) + 1 if knob in order else None) for knob in PUBLISHED_TOP5},
              "overlap_top5": sorted(set(order[:5]) & set(PUBLISHED_TOP5)),
              "overlap_top10": sorted(set(order[:10]) & set(PUBLISHED_TOP5))}
    if args.repeats > 0:
        result["top5_share"] = top5_share(args, home, order)
    return result


def table(result: dict) -> str:
    """The ranking's top 10 beside the paper's top 5, its stability as samples grew, and the top-5 share."""
    lines = [f"{result['workload']} at {result['records']:,} records, samples at rung {result['rung']}:", "",
             "| samples | top 5 stable in | top 3 | top 1 |", "|---|---|---|---|"]
    for r in result["rankings"]:
        s = r["top_k_stability"]
        lines.append(f"| {r['samples']} | {s.get('5', 0):.0%} | {s.get('3', 0):.0%} | {s.get('1', 0):.0%} |")
    order, published = result["ranking"]["order"], list(result["published_top5"].items())
    lines += ["", "| rank | the ranking here | the paper's top 5 (its rank here) |", "|---|---|---|"]
    for index in range(10):
        other = f"{published[index][0]} ({published[index][1] or 'not ranked'})" if index < len(published) else ""
        lines.append(f"| {index + 1} | {order[index] if index < len(order) else ''} | {other} |")
    if share := result.get("top5_share"):
        lines += ["", f"The best sample (trial {share['trial']}, {len(share['config'])} knobs changed) at full size: "
                      f"{interval(share['gains']['best'])} over the default; its top-5 knobs alone "
                      f"({', '.join(f'{k}={v}' for k, v in share['top5_part'].items()) or 'none changed'}): "
                      f"{interval(share['gains']['top5'])}; share of the gain the top 5 keep: "
                      f"{'-' if share['share'] is None else format(share['share'], '.0%')} "
                      f"(noise {share['noise_cv'] or 0:.1%})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="ycsb-a")
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--samples", type=int, default=40, help="samples of the first ranking")
    parser.add_argument("--step", type=int, default=20, help="samples added while the top 5 is not stable")
    parser.add_argument("--max-samples", type=int, default=100)
    parser.add_argument("--rung", type=int, default=2, help="the rung every sample runs at (2: full size)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved full-size runs of the top-5 share "
                        "(0: no share)")
    studies_main(parser, run, table)


if __name__ == "__main__":
    main()
