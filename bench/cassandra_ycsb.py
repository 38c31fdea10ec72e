"""Benchmark: a knobtune study of Cassandra 5.0 on YCSB-A, and a knob ranking on YCSB-B beside the published top 5.

Runs, with the CLI a user runs:

1. ``knobtune tune cassandra --workload ycsb-a --time T`` (TPE; its own
   verification of the top candidates against the default, interleaved,
   inside the budget);
2. ``knobtune rank cassandra --workload ycsb-b --time R`` (Latin-hypercube
   samples at rung 0, ranked by four methods);
3. the ranking's top knobs beside the knob-importance study's top 5 for
   Cassandra (Kanellis et al., HotStorage'20, via a secondary source):
   concurrent_reads, native_transport_max_threads, memtable_heap_space,
   memtable_cleanup_threshold, compaction_throughput.

    .venv/bin/python bench/cassandra_ycsb.py --records 20000 --time 20m --rank-time 20m \
        --out cassandra-ycsb.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _cli import emit, knobtune, result_path

PUBLISHED_TOP5 = ("concurrent_reads", "native_transport_max_threads", "memtable_heap_space",
                  "memtable_cleanup_threshold", "compaction_throughput")



def table(result: dict) -> str:
    """A result in Markdown: the study's verdict, then the ranking's top 10 beside the published top 5."""
    lines = []
    if "tune" in result:
        counts = ", ".join(f"{n} {kind}" for kind, n in result["tune"]["counts"].items() if n)
        lines += [f"The study on ycsb-a ({result['records']:,} records): {result['tune']['verdict']} ({counts})", ""]
    order = result["rank"]["order"]
    lines += ["| rank | the ranking on ycsb-b | published top 5 (rank here) |", "|---|---|---|"]
    published = list(result["published_top5"].items())
    for index in range(max(10, len(published))):
        knob = order[index] if index < len(order) else ""
        other = (f"{published[index][0]} ({published[index][1] or 'not ranked'})" if index < len(published) else "")
        lines.append(f"| {index + 1} | {knob} | {other} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--time", default="20m", help="the tuning study's budget")
    parser.add_argument("--rank-time", default="20m", help="the ranking's budget")
    parser.add_argument("--samples", type=int, default=200, help="ranking samples at most (the time may end first)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--skip-tune", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-cassandra-"))
    result: dict = {"records": args.records, "seed": args.seed}
    if not args.skip_tune:
        result["tune"] = json.loads(knobtune("tune", "cassandra", "--workload", "ycsb-a", "--records",
                                             str(args.records),
                                             "--time", args.time, "--study", "cassandra-ycsb-a", "--seed",
                                             str(args.seed), "--json", home=home))
        if out := result_path(args.out):  # the study's part so far (emit adds the provenance at the end)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1) + "\n")
    ranking = json.loads(knobtune("rank", "cassandra", "--workload", "ycsb-b", "--records", str(args.records),
                                  "--samples", str(args.samples), "--time", args.rank_time, "--study",
                                  "rank-cassandra-ycsb-b", "--seed", str(args.seed), "--json", home=home))
    order = ranking["order"]
    result["rank"] = ranking
    result["published_top5"] = {knob: (order.index(knob) + 1 if knob in order else None) for knob in PUBLISHED_TOP5}
    result["overlap_top5"] = sorted(set(order[:5]) & set(PUBLISHED_TOP5))
    result["overlap_top10"] = sorted(set(order[:10]) & set(PUBLISHED_TOP5))
    emit(result, args.out)


if __name__ == "__main__":
    main()
