"""Benchmark: at which size do Cassandra's knobs matter while a run stays cheap on this machine (issue 58, item 1)?

For each full size asked (``--records``; YCSB's operations scale with the records, the ladder keeps its fractions)
it runs what a user runs, ``knobtune rank cassandra --workload W --records R --samples N --rung FULL``: the default,
then N Latin-hypercube samples of every searchable knob, each at full size on a node of its own (restored, started,
run, killed, recovered, settled). From the study it reads, per size:

- what the knobs change: the best and the worst sample's throughput, their ratio, the best over the default
  (the issue asks 1.3x or more between the best and the worst);
- whether the node is under pressure at that size, from its own counters over each run (medians): memtable
  flushes, flushes a full commit log forced, compactions finished, compaction tasks left at the run's end,
  the share of the run in GC pauses, writes dropped;
- what a run costs: the trial's wall time, the workload's, the recovery after the crash and the settle, the
  node's peak memory, and the whole command's wall time (the load and the node's first start included).

    .venv/bin/python bench/cassandra_size.py --workload ycsb-a --records 20000 100000 300000 --samples 8 \
        --out bench/results/cassandra-size/
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from _cli import knobtune_json, studies_main

from knobtune.storage import open_store
from knobtune.workloads.spec import DATA_DIR
from knobtune.tuning.records import records

PRESSURE = ("memtable_flushes", "memtable_switches_commitlog_full", "compactions_completed", "compacted_bytes",
            "pending_compactions_end", "gc_pause_s", "gc_pause_share", "dropped_mutations", "dropped_reads")
COSTS = ("workload_s", "recovery_s", "settle_s", "peak_rss_bytes")


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def workload_file(home: Path, name: str, value_size: int | None) -> str:
    """The workload to run: the shipped one by name, or a copy of its file with another ``value_size`` (written into
    the studies folder, named for its size)."""
    if value_size is None:
        return name
    text = (DATA_DIR / f"{name}.toml").read_text()
    size_line = re.compile(r"^value_size = \d+$", re.MULTILINE)
    if not size_line.search(text):
        raise SystemExit(f"{name}: no value_size line to change")
    text = size_line.sub(f"value_size = {value_size}", text)
    text = re.sub(r'^name = "[^"]+"$', f'name = "{name}-{value_size}b"', text, count=1, flags=re.MULTILINE)
    path = home / f"{name}-{value_size}b.toml"
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def one_size(args: argparse.Namespace, home: Path, records_: int) -> dict:
    """Rank at full size ``records_``; what the study's trials say about that size."""
    study = f"size-{records_}" + (f"-{args.value_size}b" if args.value_size else "")
    started = time.monotonic()
    try:
        ranked = knobtune_json("rank", "cassandra", "--workload", workload_file(home, args.workload, args.value_size),
                               "--records", str(records_),
                               "--samples", str(args.samples), "--rung", str(args.rung), "--study", study,
                               "--seed", str(args.seed), home=home)
    except SystemExit as refused:  # fewer than 8 samples measured: no ranking, the runs still say what they cost
        ranked = {"refused": str(refused)[-300:]}
    wall_s = time.monotonic() - started
    trials = records(open_store(home).load(study))
    measured = [(t, t.runs[args.rung]) for t in trials if args.rung in t.runs and t.runs[args.rung].ok]
    defaults = [run.value for t, run in measured if t.is_default]
    samples = [run.value for t, run in measured if not t.is_default]
    failed: dict[str, int] = {}
    for t in trials:
        if not t.is_default and (args.rung not in t.runs or not t.runs[args.rung].ok):
            kind = t.outcome.value if t.outcome else "unknown"
            failed[kind] = failed.get(kind, 0) + 1
    default = _median([v for v in defaults if v is not None])
    best, worst = (max(samples), min(samples)) if samples else (None, None)
    return {
        "records": records_, "value_size": args.value_size, "samples_asked": args.samples,
        "samples_measured": len(samples), "failed": failed,
        "default_ops_per_s": default, "default_runs": defaults, "samples_ops_per_s": sorted(samples),
        "best_over_worst": round(best / worst, 3) if samples else None,
        "best_over_default": round(best / default, 3) if samples and default else None,
        "worst_over_default": round(worst / default, 3) if samples and default else None,
        "pressure": {c: _median([float(run.counters[c]) for _, run in measured if c in run.counters])
                     for c in PRESSURE},
        "default_pressure": {c: _median([float(run.counters[c]) for t, run in measured
                                         if t.is_default and c in run.counters]) for c in PRESSURE},
        "costs": {c: _median([float(run.summary[c]) for _, run in measured if run.summary.get(c) is not None])
                  for c in COSTS},
        "trial_s": _median([t.seconds for t in trials if t.seconds is not None]),
        "command_s": round(wall_s, 1),
        "ranking_top5": ranked.get("order", [])[:5],
        **({"ranking_refused": ranked["refused"]} if "refused" in ranked else {}),
    }


def run(args: argparse.Namespace) -> dict:
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-cassandra-size-"))
    sizes = []
    for records_ in args.records:
        sizes.append(one_size(args, home, records_))
        print(table({"workload": args.workload, "sizes": sizes}), flush=True)
    return {"workload": args.workload, "value_size": args.value_size, "samples": args.samples, "seed": args.seed,
            "rung": args.rung, "sizes": sizes}


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.0f} MiB"


def _n(value: float | None, form: str = "{:,.0f}") -> str:
    return "-" if value is None else form.format(value)


def table(result: dict) -> str:
    """Per size: what the knobs change, the pressure the counters show (medians over the runs), what a run costs."""
    size = f", {result['value_size']:,}-byte values" if result.get("value_size") else ""
    lines = [f"{result['workload']}{size}, Latin-hypercube samples at full size (medians over the runs):", "",
             "| records | default | samples: worst - best | best / worst | best / default | flushes "
             "(commit log full) | compactions | left at end | GC pauses | trial | run, recovery, settle | "
             "peak memory | command |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in result["sizes"]:
        p, c = s["pressure"], s["costs"]
        spread = (f"{s['samples_ops_per_s'][0]:,.0f} - {s['samples_ops_per_s'][-1]:,.0f} ops/s "
                  f"({s['samples_measured']} of {s['samples_asked']})" if s["samples_ops_per_s"] else "none measured")
        lines.append(
            f"| {s['records']:,} | {_n(s['default_ops_per_s'])} ops/s | {spread} "
            f"| {_n(s['best_over_worst'], '{:.2f}x')} "
            f"| {_n(s['best_over_default'], '{:.2f}x')} | {_n(p['memtable_flushes'])} "
            f"({_n(p['memtable_switches_commitlog_full'])}) | {_n(p['compactions_completed'])} "
            f"| {_n(p['pending_compactions_end'])} | {_n(p['gc_pause_share'], '{:.1%}')} "
            f"| {_n(s['trial_s'], '{:.0f} s')} | {_n(c['workload_s'], '{:.0f}')} s, {_n(c['recovery_s'], '{:.1f}')} s, "
            f"{_n(c['settle_s'], '{:.1f}')} s | {_mib(c['peak_rss_bytes'])} | {s['command_s'] / 60:.0f} min |")
    failed = [f"{s['records']:,}: " + ", ".join(f"{n} {kind}" for kind, n in s["failed"].items())
              for s in result["sizes"] if s["failed"]]
    if failed:
        lines += ["", "Samples that did not measure: " + "; ".join(failed)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="ycsb-a")
    parser.add_argument("--records", type=int, nargs="+", default=[20000, 100000, 300000])
    parser.add_argument("--value-size", type=int, help="bytes a record holds (default: the workload's)")
    parser.add_argument("--samples", type=int, default=8, help="Latin-hypercube samples per size (8 or more)")
    parser.add_argument("--rung", type=int, default=2, help="the rung every sample runs at (2: full size)")
    studies_main(parser, run, table)


if __name__ == "__main__":
    main()
