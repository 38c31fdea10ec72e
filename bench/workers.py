"""Benchmark: one study with one worker, then the same study with two (issue 15).

Both arms run the same `tune` (same workload, size, seed and --time) on a
PostgreSQL storage (a scratch server, knobtune's `StorageServer`); the second
arm adds one `knobtune worker` process that joins as soon as the study has
started. Recorded per arm: trials finished per worker and per hour, how many
reached full size, the configs measured twice at one rung (should be none),
and the study's own verified verdict. On one 2-core machine the two
processes disturb each other's timings (two db_bench runs at once): this
shows the mechanics and the throughput of trials, not the gain of a second
machine.

    .venv/bin/python bench/workers.py --time 6m --records 20000 --out bench/results/workers/
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import optuna

from _cli import EARLIER_OFF, KNOBTUNE, emit, verified_speedup
from knobtune.units import parse_duration_s
from knobtune.systems.postgresql.storage_server import StorageServer
from knobtune.tuning import attrs


def run_arm(args: argparse.Namespace, url: str, home: Path, workers: int) -> dict:
    study = f"workers-{workers}"
    tune = [KNOBTUNE, "tune", args.system, "--workload", args.workload, "--records", str(args.records),
            "--time", args.time, "--seed", str(args.seed), "--study", study, "--storage", url, "--dir", str(home),
            "--json", *EARLIER_OFF]
    print("$", " ".join(tune[1:]), flush=True)
    started = time.monotonic()
    first = subprocess.Popen(tune, stdout=subprocess.PIPE, text=True)
    others = []
    while len(others) < workers - 1:
        time.sleep(0.5)
        try:
            if attrs.EXPERIMENT not in optuna.load_study(study_name=study, storage=url).user_attrs:
                continue
        except KeyError:
            continue
        join = [KNOBTUNE, "worker", "--study", study, "--storage", url, "--dir", str(home)]
        print("$", " ".join(join[1:]), flush=True)
        others.append(subprocess.Popen(join, stdout=subprocess.DEVNULL))
    out, _ = first.communicate()
    statuses = [first.returncode] + [p.wait() for p in others]
    wall = time.monotonic() - started
    if any(statuses):
        raise SystemExit(f"a process of arm {workers} failed: {statuses}")
    summary = json.loads(out)
    trials = optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)
    sampled = [t for t in trials if not attrs.is_default(t.user_attrs) and t.state.is_finished()]
    measured = Counter()
    for trial in sampled:
        for key, result in trial.user_attrs.items():
            if key.startswith(attrs.RUNG_PREFIX) and "failure" not in result:
                measured[(trial.user_attrs.get(attrs.CONFIG_HASH), key, json.dumps(result, sort_keys=True))] += 1
    per_config_rung = Counter((h, k) for h, k, _ in measured)
    search_h = parse_duration_s(args.time) / 3600
    return {"workers": workers, "wall_s": round(wall, 1), "verdict": summary["verdict"],
            "verified_speedup": verified_speedup(summary), "counts": summary["counts"],
            "trials": len(sampled), "trials_per_hour": round(len(sampled) / search_h, 1),
            "full_size": sum(1 for t in sampled if t.state == optuna.trial.TrialState.COMPLETE),
            "per_worker": dict(Counter(t.user_attrs.get(attrs.WORKER) for t in sampled)),
            "references": sum(1 for t in trials if attrs.is_default(t.user_attrs)),
            "measured_twice": sum(1 for n in per_config_rung.values() if n > 1),
            "machines": summary.get("machines")}



def table(result: dict) -> str:
    """A result as a Markdown table: one row per arm."""
    rows = ["| workers | trials (per worker) | per hour | reached full size | defaults run (baseline + controls) "
            "| configs measured twice at one rung | study's own verdict |", "|---|---|---|---|---|---|---|"]
    for arm in result["arms"]:
        per_worker = " + ".join(str(n) for n in arm["per_worker"].values())
        rows.append(f"| {arm['workers']} | {arm['trials']} ({per_worker}) | {arm['trials_per_hour']:,.0f} "
                    f"| {arm['full_size']} | {arm['references']} | {arm['measured_twice']} | {arm['verdict']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--time", default="6m")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="knobtune-bench-workers-") as folder, StorageServer() as url:
        arms = [run_arm(args, url, Path(folder) / f"home-{n}", n) for n in (1, 2)]
    emit({"args": vars(args) | {"out": str(args.out)}, "arms": arms}, args.out)


if __name__ == "__main__":
    main()
