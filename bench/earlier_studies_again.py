"""Benchmark: the half-time later study again, on this checkout, beside the studies of a run of earlier_studies.py.

A change to how a study learns from earlier ones is measured where the run before it left off: given that run's
studies folder (--dir, the one earlier_studies.py was given), for each pair and seed it runs the later study with
half of --time once more, learning from a copy of the same earlier study (the earlier run's half-time folder, its
own later study taken out), as earlier_studies.py's fifth arm runs it. Then one interleaved `knobtune compare`:
the cold study's result (3 minutes, no earlier studies) first, the earlier run's half-time result, the control's
(cold at half the time), the new half-time result and the default, so the new result and the one before it are
measured side by side against the same cold result, on the same day. The studies the run before made are read,
never changed; what this adds goes into `warm-half-again` and `race-again` beside them.

    .venv/bin/python bench/earlier_studies_again.py --time 3m --seeds 1 2 --pair A B --dir STUDIES_OF_THE_RUN_BEFORE
"""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna

from _cli import ends_when_stopped, emit, knobtune_json, named_folder, printed_table, verified_speedup
from earlier_studies import (PAIRS, Bench, copy_studies, half_of, interval_text, noise_text, over_cold, repo_file,
                             shared_arguments, verified_text)
from knobtune.workloads import load_workload

ARMS = ("cold", "warm-half", "cold-half")  # the run before's, raced again beside the new one


def _stem(later: Path, seed: int) -> str:
    return f"{load_workload(str(later)).name}-s{seed}"


def check(root: Path, later: Path, seed: int) -> None:
    """One line, before anything runs, when ``root`` lacks what the run before left for ``later`` at ``seed`` or
    this ran there already."""
    folder = root / _stem(later, seed)
    if missing := [arm for arm in ARMS if not (folder / arm / "studies.db").is_file()]:
        raise SystemExit(f"{folder} holds no {', '.join(missing)} study of a run of earlier_studies.py (with the "
                         "cold-half arm). Fix: give --dir the studies folder of such a run, and its --pair, --seeds")
    if (folder / "warm-half-again").exists():
        raise SystemExit(f"{folder / 'warm-half-again'} exists: this seed ran again before. Fix: remove it and "
                         f"{folder / 'race-again'}, or give another run's folder")


def one_seed(bench: Bench, later: Path, seed: int) -> dict:
    """The half-time study again for one pair and seed, and the race of it beside the run before's results."""
    stem = _stem(later, seed)
    folder = bench.root / stem
    again = folder / "warm-half-again"
    copy_studies(folder / "warm-half", again)
    optuna.delete_study(study_name=f"{stem}-warm-half", storage=f"sqlite:///{again / 'studies.db'}")
    run = bench.tune(later, f"{stem}-warm-half-again", again, seed, True, half_of(bench.args.time))
    cold = knobtune_json("show", f"{stem}-cold", home=folder / "cold")
    studies = {arm: (folder / arm, f"{stem}-{arm}") for arm in ARMS}
    race = bench.race(later, {**studies, "warm-half-again": (again, f"{stem}-warm-half-again")},
                      folder / "race-again", seed)
    return {"seed": seed, "arm": run, "race": race,
            "cold_won": bool((verified_speedup(cold) or {}).get("won"))}


def run(args: argparse.Namespace) -> dict:
    root = named_folder(args.dir)
    bench = Bench(args, root)
    for _, later in args.pair or PAIRS:
        for seed in args.seeds:
            check(root, repo_file(later), seed)
    pairs = []
    for earlier, later in args.pair or PAIRS:
        seeds = [one_seed(bench, repo_file(later), seed) for seed in args.seeds]
        pairs.append({"earlier": load_workload(str(repo_file(earlier))).name,
                      "later": load_workload(str(repo_file(later))).name, "seeds": seeds})
    return {"question": "does the half-time later study on this checkout end nearer the cold study's result than "
                        "the one of the run before, raced side by side?",
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "table"},
            "pairs": pairs}


# ---------------------------------------------------------------- the table


def table(result: dict) -> str:
    """The race per pair and seed, how many of the half-time results reached cold's (at least as fast; level, the
    interval reaching 1), before and again, and the new study's verdicts."""
    half = half_of(result["args"]["time"])
    rows = [f"| pair | seed | default over cold's result | half the time ({half}), the run before | half the time, "
            "again | cold at half the time (the control) | noise |", "|---|---|---|---|---|---|---|"]
    verdicts = ["| pair | seed | study | verified speedup (95% CI) | tried first from earlier studies | verdict |",
                "|---|---|---|---|---|---|"]
    counts = {arm: [0, 0] for arm in ("warm-half", "warm-half-again", "cold-half")}  # at least as fast, level
    raced = 0
    for pair in result["pairs"]:
        name = f"{pair['earlier']} -> {pair['later']}"
        for s in pair["seeds"]:
            if "error" in s["race"]:
                rows.append(f"| {name} | {s['seed']} | did not run: {s['race']['error'][:120]} | | | | |")
            else:
                over = [interval_text(over_cold(s, arm)) for arm in ("default", *counts)]  # the columns
                rows.append(f"| {name} | {s['seed']} | {' | '.join(over)} | {noise_text(s['race'])} |")
                if s["cold_won"]:
                    raced += 1
                    for arm, count in counts.items():
                        v = over_cold(s, arm)
                        count[0] += v.get("ratio", 0) >= 1
                        count[1] += v.get("ci_high", 0) >= 1
            arm = s["arm"]
            first = ", ".join(t["label"] for t in arm["tried_first"]) or "none"
            verdicts.append(f"| {name} | {s['seed']} | {arm['study']} | {verified_text(arm)} | {first} "
                            f"| {arm['verdict']} |")

    def said(arm: str) -> str:
        return f"{counts[arm][0]} at least as fast and {counts[arm][1]} level"

    head = (f"Each half-time study `tune --time {half}`, learning from the same earlier study; the race, one "
            f"interleaved `compare` of {result['args']['race_repeats']} runs each, measures every result over the "
            f"cold study's (`--time {result['args']['time']}`, no earlier studies) of the run before. Of the "
            f"{raced} pair-seeds where cold's study verified a gain: again, {said('warm-half-again')}; the run "
            f"before's, {said('warm-half')}; the control, {said('cold-half')} (level: the 95% interval over cold's "
            "result reaching 1).")
    return "\n\n".join([head, "\n".join(rows), "\n".join(verdicts)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    shared_arguments(parser)  # as the run before was given them
    parser.add_argument("--dir", type=Path, help="the studies folder of the run of earlier_studies.py before")
    args = parser.parse_args()
    if printed_table(args, table):
        return
    if not args.dir:
        raise SystemExit("earlier_studies_again.py runs beside a run of earlier_studies.py. Fix: give --dir its "
                         "studies folder, and its --pair, --seeds and --time as it was given them")
    with ends_when_stopped():
        result = run(args)
    emit(result, args.out)


if __name__ == "__main__":
    main()
