"""Benchmark: does the gain found on a capture's replay hold on the workload that was captured?

The question a user asks before trusting a replay: tune on the capture, then run
the winner on the original workload. For a workload of `--system` (RocksDB:
one kvbench runs; PostgreSQL: one pgbench runs), at each seed:
1. capture it: `knobtune capture SYSTEM --workload W` runs it under the
   default config and records it as the system does (RocksDB's tracer: its
   load phase in the checkpoint, its measured phases in the trace;
   PostgreSQL: the server's CSV log and a dump);
2. tune on the capture for `--budget` (`knobtune tune rocksdb --workload CAPTURE`),
   which verifies its winner against the default on the replay;
3. measure that winner (or, when nothing won, the best verified candidate) on
   the original workload beside the default, interleaved, `--repeats` times
   (`knobtune compare --driver kvbench|pgbench`).
It prints and stores (`--out`) both gains with their 95% CIs (each side's own
objective: the replay's time, the workload's; for a workload that measures its
run phase in ops/s, both count the same operations and the settle after them),
their ratio (1.0: the replay's gain holds on the original exactly), and the
cost of one full-size run of the default on each (replay + settle against
workload + settle; the original's includes its load phase, which the capture
holds as its checkpoint), with the commit, the machine and the RocksDB build.

    .venv/bin/python bench/replay_transfer.py --workload ycsb-a --budget 5m --seeds 1 2 3 \
        --out bench/results/replay-transfer/
    .venv/bin/python bench/replay_transfer.py --system postgresql --workload pgbench-tpcb --records 20000 \
        --kit-objective p99_us --nondeterministic "pgbench_history.mtime" --budget 10m --seeds 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

from _cli import emit, interval, knobtune, knobtune_json, verified_speedup

from knobtune.systems.rocksdb.build import rocksdb_build

KIT_DRIVER = {"rocksdb": "kvbench", "postgresql": "pgbench"}  # how each system runs the original workload


def _commit() -> str:
    here = Path(__file__).resolve().parent
    found = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return found.stdout.strip() + ("+changes" if dirty else "")


def _machine() -> dict:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"host": platform.node(), "cpus": os.cpu_count(), "memory_bytes": memory, "kernel": platform.release(),
            "rocksdb": rocksdb_build().description}


def _run_s(costs: dict | None) -> float | None:
    """One run's time (its workload plus its settle) from a ``costs`` entry of knobtune's JSON."""
    if not costs or costs.get("workload_s") is None:
        return None
    return round(costs["workload_s"] + (costs.get("settle_s") or 0.0), 3)


def one_seed(args: argparse.Namespace, seed: int, home: Path) -> dict:
    capture = home / f"capture-s{seed}"
    sizing = ["--records", str(args.records)] if args.records else []
    knobtune("capture", args.system, "--workload", args.workload, *sizing, "-o", str(capture))
    if args.nondeterministic:  # what the user knows of their workload: columns concurrent sessions fill in any order
        text = (capture / "capture.toml").read_text()
        listed = ", ".join(f'"{c}"' for c in args.nondeterministic.split(","))
        (capture / "capture.toml").write_text(text.replace("nondeterministic = []", f"nondeterministic = [{listed}]"))
    study = f"replay-{Path(args.workload).stem}-s{seed}"
    summary = knobtune_json("tune", args.system, "--workload", str(capture), "--time", args.budget, "--study", study,
                            "--seed", str(seed), "--repeats", str(args.repeats), home=home)
    on_replay = verified_speedup(summary)
    if on_replay is None:
        return {"seed": seed, "study": study, "verdict": summary.get("verdict"), "on_replay": None}
    trial = on_replay["label"].removeprefix("trial ")
    config = home / f"{study}-winner.json"
    knobtune("export", study, "--format", "json", "--trial", trial, "-o", str(config), home=home)
    objective = ["--objective", args.kit_objective] if args.kit_objective else []
    compared = knobtune_json("compare", args.system, "--driver", KIT_DRIVER[args.system], "--workload", args.workload,
                             *sizing, *objective, "--config", "default", "--config", str(config), "--repeats",
                             str(args.repeats), "--seed", str(seed), home=home)
    winner = next(c for c in compared["candidates"] if c["label"] != "default")
    on_kit = {key: winner["speedup"].get(key) for key in ("ratio", "ci_low", "ci_high", "p_value")} \
        if winner.get("speedup") else None
    replay_cost = _run_s((summary.get("costs") or {}).get("default"))
    kit_cost = _run_s(next(c for c in compared["candidates"] if c["label"] == "default").get("costs"))
    return {"seed": seed, "study": study, "trials": summary.get("counts"), "winner": on_replay["label"],
            "winner_config": json.loads(config.read_text()), "won_on_replay": on_replay["won"],
            "on_replay": on_replay, "on_original": on_kit,
            "held": round(on_kit["ratio"] / on_replay["ratio"], 3) if on_kit and on_replay["ratio"] else None,
            "default_run_s": {"replay": replay_cost, "original": kit_cost},
            "noise_cv": {"replay": (summary.get("verification") or {}).get("noise_cv"),
                         "original": compared.get("noise_cv")}}


def table(result: dict) -> str:
    """A result file as a Markdown table, one row per seed (bench/RESULTS.md shows it)."""
    build = f", RocksDB {result['machine']['rocksdb']}" if result.get("system", "rocksdb") == "rocksdb" else ""
    rows = [f"{result.get('system', 'rocksdb')} / {result['workload']}, budget {result['budget']}, "
            f"{result['repeats']} interleaved runs a side, commit {result['commit']}{build}",
            "", "| seed | winner | gain on the replay | gain on the original | held | default's run: replay / original "
            "| trials |", "|---|---|---|---|---|---|---|"]
    for seed in result["seeds"]:
        runs = seed.get("default_run_s") or {}
        trials = ", ".join(f"{n} {k}" for k, n in (seed.get("trials") or {}).items() if n)
        rows.append(f"| {seed['seed']} | {seed.get('winner', '-')}{'' if seed.get('won_on_replay') else ' (not won)'} "
                    f"| {interval(seed.get('on_replay'), 'n/a')} | {interval(seed.get('on_original'), 'n/a')} "
                    f"| {seed.get('held')} "
                    f"| {runs.get('replay')} s / {runs.get('original')} s | {trials} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", default="rocksdb", choices=sorted(KIT_DRIVER))
    parser.add_argument("--workload", default="ycsb-a", help="a workload the kit's driver runs (shipped name or .toml)")
    parser.add_argument("--kit-objective", default=None, help="the original's objective (default: the workload's)")
    parser.add_argument("--nondeterministic", default="", help="PostgreSQL: columns the data check leaves out, "
                        "table.column or table.* (comma-separated; docs/replay.md)")
    parser.add_argument("--records", type=int, default=None, help="its full size (default: the workload's)")
    parser.add_argument("--budget", default="5m", help="tune's --time on the capture")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per config, on each side")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--dir", type=Path, default=None, help="studies folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, metavar="RESULT", help="print a result file as a Markdown table")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    commit = _commit()  # the code state the runs start from (each knobtune command imports it afresh)
    with tempfile.TemporaryDirectory(prefix="knobtune-replay-bench-") as tmp:
        home = args.dir or Path(tmp)
        seeds = [one_seed(args, seed, home) for seed in args.seeds]
    emit({"question": "does the gain found on a capture's replay hold on the original workload?",
          "system": args.system, "workload": args.workload, "kit_driver": KIT_DRIVER[args.system],
          "records": args.records, "budget": args.budget, "repeats": args.repeats,
          "commit": commit, "machine": _machine(), "seeds": seeds}, args.out)


if __name__ == "__main__":
    main()
