"""Benchmark: trials a minute with halving after gains, against letting every config that beats the default climb
(issue 57, item 4).

The pruner (knobtune/tuning/loop/pruning.py) lets a config that beats the default at a small rung climb even when
halving would stop it; once the study has ``reduction_factor`` configs complete at full size ahead of the default,
it leaves the decision to halving. The earlier rule (``research.halving_after_gains = false``, through
``--experiment``) let such a config climb all study long, so most of a study's time went to full-size runs of
configs no better than those found. For each seed, `tune` runs both ways as a user runs it (the rules' starts, the
default sampler, verification inside --time; their order alternating from seed to seed, so the machine's drift
favours neither); then one interleaved `compare` of the default and both results. Recorded per arm and seed: the
trials and trials a minute of search (as `show` reports them), the outcomes, where the time went, the study's own
verdict and its result's gain in the comparison.

    .venv/bin/python bench/pruning_pace.py --workload put-get-delete --time 5m --seeds 1 2 3 \\
        --out bench/results/pruning-pace/
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path

import optuna

from _cli import emit_in_studies_folder, interval, printed_table, result_arguments
from headroom import compared, time_spent, tune
from knobtune.units import parse_duration_s

RESUMES = True  # its figures are its steps' outputs and the studies' records (bench/_steps.py)
ARMS = ("halving after gains", "beating the default climbs")  # today's pruner, then the earlier rule
BEFORE = "[research]\nhalving_after_gains = false\n"


def outcomes(home: Path, study: str) -> dict[str, int]:
    """The study's trials by state (complete, pruned, fail), its default's runs included."""
    stored = optuna.load_study(study_name=study, storage=f"sqlite:///{home / 'studies.db'}")
    return dict(Counter(t.state.name.lower() for t in stored.get_trials(deepcopy=False)))


def one_seed(args: argparse.Namespace, home: Path, seed: int) -> dict:
    workload = {"name": args.workload, "args": ["--workload", args.workload, "--driver", args.driver]}
    home.mkdir(parents=True, exist_ok=True)
    before = home / "before.toml"
    before.write_text(BEFORE)
    arms = ARMS if seed % 2 else ARMS[::-1]
    runs = {}
    for arm in arms:
        study = f"pace-{'after' if arm == ARMS[0] else 'before'}-s{seed}"
        extra = () if arm == ARMS[0] else ("--experiment", str(before))
        runs[arm] = tune(args, home, workload, study, parse_duration_s(args.time), None, seed, extra)
        runs[arm] |= {"time": time_spent(home, study), "outcomes": outcomes(home, study)}
    won = [r["study"] for r in runs.values() if r["claimed"] and r["claimed"]["won"]]
    comparison = compared(argparse.Namespace(system=args.system, repeats=args.repeats, seed=seed), home, workload,
                          won) if won else {"gains": {}}
    for r in runs.values():
        r["gain"] = comparison["gains"].get(r["study"])
    return {"seed": seed, "order": list(arms), "arms": runs, "noise_cv": comparison.get("noise_cv")}


def run(args: argparse.Namespace, home: Path) -> dict:
    seeds = [one_seed(args, home, seed) for seed in args.seeds]
    paces = {arm: [s["arms"][arm]["time"]["trials_per_min"] for s in seeds] for arm in ARMS}
    ratios = [a / b for a, b in zip(paces[ARMS[0]], paces[ARMS[1]], strict=True) if a and b]
    return {"system": args.system, "workload": args.workload, "driver": args.driver, "time": args.time,
            "repeats": args.repeats, "seeds": seeds,
            "pace_ratio_median": statistics.median(ratios) if ratios else None}


def _gain(r: dict) -> str:
    gain = r.get("gain")
    if not gain:
        return "kept the default" if not (r["claimed"] and r["claimed"]["won"]) else "not compared"
    if "ratio" not in gain:
        return f"failed: {gain.get('failure')}"
    return interval(gain)


def _claimed(r: dict) -> str:
    c = r["claimed"]
    return interval(c, "none verified") + ("" if not c or c["won"] else ", kept the default")


def table(data: dict) -> str:
    pace = data["pace_ratio_median"]
    rows = [f"{data['system']} {data['workload']} ({data['driver']}), `tune --time {data['time']}` each way; both "
            f"results and the default compared in one interleaved run, {data['repeats']} runs a config. Trials a "
            "minute, halving after gains over beating the default climbs (median over seeds): "
            + ("-" if pace is None else f"**{pace:.2f}x**"), "",
            "| seed | arm | trials/min | trials (complete, pruned, failed) | measured runs' share of search | "
            "its verdict | gain in the comparison |", "|---|---|---|---|---|---|---|"]
    for s in data["seeds"]:
        for arm in ARMS:
            r = s["arms"][arm]
            t, o = r["time"], r["outcomes"]
            per_min = "-" if t["trials_per_min"] is None else f"{t['trials_per_min']:.1f}"
            share = (t["window_s"] + t["settle_s"]) / t["search_s"] if t["search_s"] else None
            rows.append(f"| {s['seed']} | {arm} | {per_min} | {t['trials']} ({o.get('complete', 0)}, "
                        f"{o.get('pruned', 0)}, {o.get('fail', 0)}) | {'-' if share is None else f'{share:.0%}'} | "
                        f"{_claimed(r)} | {_gain(r)} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--driver", default="kvbench")
    parser.add_argument("--time", default="5m", help="each study's --time")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs a config in each comparison")
    parser.add_argument("--dir", type=Path, help="studies folder (default: a new temporary one)")
    result_arguments(parser)
    args = parser.parse_args()
    if printed_table(args, table):
        return
    emit_in_studies_folder(args, run, "knobtune-bench-pruning-pace-", resumes=RESUMES)


if __name__ == "__main__":
    main()
