"""Benchmark: does a fixed-budget knobtune study beat the default, and by how much, beyond the noise?

Runs a study on a workload with a time budget (no built-in verification), then
measures the default and the study's best single-run config side by side,
interleaved, --repeats times each at full size, and prints the median ratio
with its 95% bootstrap interval and each side's spread. With --unsafe-too it
repeats the study with --allow-unsafe at the same budget and reports how many
trials were rejected for data loss and what that study's winner verified at.

    .venv/bin/python bench/tune_vs_default.py --time 10m --repeats 5 --unsafe-too
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from knobtune.knobs import load_catalog
from knobtune.units import parse_duration_s
from knobtune.report import summarize
from knobtune.storage import open_store
from knobtune.systems import make_target
from knobtune.tuning import Tuner, Experiment, build_space
from knobtune.tuning.proof import Candidate, run_interleaved
from knobtune.tuning.records import top_trials
from knobtune.workloads import load_workload


def run_study(name: str, allow_unsafe: bool, args: argparse.Namespace, store) -> dict:  # noqa: ANN001
    catalog = load_catalog("rocksdb")
    workload = load_workload(args.workload)
    if args.records:
        workload = workload.scaled(args.records)
    knobs = [k for k in build_space(catalog, allow_unsafe=allow_unsafe).knobs if k not in args.exclude]
    settings = Experiment.of(catalog, workload, build_space(catalog, knobs, allow_unsafe=allow_unsafe), study=name,
                             search__sampler=args.sampler, search__seed=args.seed,
                             budget__time_s=parse_duration_s(args.time), proof__verify_top=0, proof__repeats=0,
                             research__rules=False, research__try_known_configs=False)
    started = time.monotonic()
    study = Tuner(settings, store).run()
    searched_s = time.monotonic() - started
    summary = summarize(study, catalog)
    best = top_trials(study, 1)
    result = {"study": name, "allow_unsafe": allow_unsafe, "search_s": round(searched_s, 1),
              "counts": summary.trials.counts, "default_single_run": summary.default.default_value}
    if not best:
        return result | {"verdict": "no trial completed every rung"}
    config = best[0].user_attrs["config"]
    result |= {"best_trial": best[0].number, "best_single_run": best[0].value, "best_config": config,
               "unsafe_in_best": summary.safety.unsafe_in_result}
    with make_target(catalog, workload, store.worker_scratch()) as target:
        comparison = run_interleaved(
            target,
            [(Candidate("default", {}), catalog.defaults()), (Candidate("best", config), catalog.config(config))],
            workload.full, repeats=args.repeats, objective=workload.objective, seed=args.seed,
            log_dir=store.artifacts(name) / "bench")
    default_runs, best_runs = comparison.runs
    speedup = comparison.speedups.get("best")
    result |= {
        "objective": workload.objective.value, "repeats": args.repeats,
        "default_values": default_runs.values, "best_values": best_runs.values,
        "best_failure": None if best_runs.failure is None else best_runs.failure.reason,
        "median_ratio": speedup.ratio if speedup else None,
        "ci95": [speedup.ci_low, speedup.ci_high] if speedup else None,
        "p_value": speedup.p_value if speedup else None,
        "noise_cv": comparison.noise,
    }
    return result


def describe(result: dict) -> str:
    lines = [f"study {result['study']} (allow_unsafe={result['allow_unsafe']}): searched {result['search_s']} s; "
             + ", ".join(f"{n} {k}" for k, n in result["counts"].items() if n)]
    if "median_ratio" in result and result["median_ratio"]:
        d, b = result["default_values"], result["best_values"]
        lines.append(f"  default {result['objective']}: median {statistics.median(d):.3f} (min {min(d):.3f}, max "
                     f"{max(d):.3f})")
        lines.append(f"  best (trial {result['best_trial']}): median {statistics.median(b):.3f} "
                     f"(min {min(b):.3f}, max {max(b):.3f})")
        lines.append(f"  tuned/default: {result['median_ratio']:.2f}x, 95% CI {result['ci95'][0]:.2f}-"
                     f"{result['ci95'][1]:.2f}, p={result['p_value']:.3g}, noise {result['noise_cv'] * 100:.1f}%, "
                     f"{result['repeats']} interleaved runs each")
    elif result.get("best_failure"):
        lines.append(f"  best config failed when re-run: {result['best_failure']}")
    else:
        lines.append(f"  {result.get('verdict', 'no verification')}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--time", default="10m", help="search budget of each study")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--unsafe-too", action="store_true", help="also run the same study with --allow-unsafe")
    parser.add_argument("--unsafe-only", action="store_true", help="run only the --allow-unsafe study")
    parser.add_argument("--exclude", default="", type=lambda text: [k for k in text.split(",") if k],
                        help="knobs left out of both studies (e.g. fifo_compaction_max_table_files_size_mb, "
                             "to leave db_bench's FIFO limit at its default 0 as a hand-written script would)")
    parser.add_argument("--dir", type=Path, default=Path("bench/studies"))
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    store = open_store(args.dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results = []
    if not args.unsafe_only:
        results.append(run_study(f"bench-safe-{stamp}", False, args, store))
        print(describe(results[-1]), flush=True)
    if args.unsafe_too or args.unsafe_only:
        results.append(run_study(f"bench-unsafe-{stamp}", True, args, store))
        print(describe(results[-1]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results},
                                       indent=2, default=str))


if __name__ == "__main__":
    main()
