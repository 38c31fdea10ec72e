"""Benchmark: does a study's winner keep its speedup once the bill it leaves (flush, compaction) is paid?

Runs one knobtune study (settled by default, or --unsettled) with its own
verification inside the --time budget, then re-measures the result against
the default, interleaved, --repeats times each at full size, three ways:

1. settled, as knobtune measures by default (reopen as after a crash, flush,
   wait for compaction; all counted), with peak memory and recovery time;
2. unsettled: the raw window;
3. (db_bench workloads) an independent harness that does not use knobtune's
   settle at all: db_bench itself with the workload's benchmarks followed by
   db_bench's own `flush,waitforcompaction`, timed as a whole process. RocksDB
   7.8's waitforcompaction first sleeps a fixed 5 s ("give background threads
   a chance to wake"); the harness reports its time with and without those 5 s.

    .venv/bin/python bench/settled.py --workload put-get-delete --time 10m --out bench/results/settled/
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _cli import emit, interval, named_folder

from knobtune.analysis import speedup
from knobtune.knobs import load_catalog
from knobtune.units import parse_duration_s
from knobtune.report import summarize
from knobtune.storage import open_store
from knobtune.systems import make_target
from knobtune.server.process import run_logged
from knobtune.tuning import Tuner, Experiment, build_space
from knobtune.tuning.proof import Candidate, run_interleaved
from knobtune.tuning.records import top_trials
from knobtune.workloads import load_workload

WAITFORCOMPACTION_SLEEP_S = 5.0  # RocksDB 7.8 db_bench: SleepForMicroseconds(5 s) before it starts waiting


def run_study(args: argparse.Namespace, store) -> tuple[dict, dict]:  # noqa: ANN001
    catalog = load_catalog(args.system)
    workload = load_workload(args.workload)
    settled = "unsettled" if args.unsettled else "settled"
    name = f"settled-{settled}-{args.workload}-s{args.seed}-{time.strftime('%H%M%S')}"
    settings = Experiment.of(catalog, workload, build_space(catalog, driver=args.driver), study=name,
                             driver=args.driver, search__sampler="tpe", search__seed=args.seed,
                             budget__time_s=parse_duration_s(args.time), proof__verify_top=3, proof__repeats=5,
                             research__settle=not args.unsettled, research__rules=False,
                             research__try_known_configs=False)
    started = time.monotonic()
    study = Tuner(settings, store).run()
    summary = summarize(study, catalog)
    result = {"study": name, "settled_study": not args.unsettled, "wall_s": round(time.monotonic() - started, 1),
              "counts": summary.trials.counts, "verdict": summary.verdict, "costs_in_study": summary.cost.costs}
    config = summary.result_config
    if summary.result_trial is None:
        best = top_trials(study, 1)
        config = dict(best[0].user_attrs["config"]) if best else {}
        result["note"] = "no verified winner: the best single run is re-measured"
    claim = (summary.proof.verification or {}).get("candidates", [])
    label = f"trial {summary.result_trial}"
    claimed = next((c["speedup"]["ratio"] for c in claim if c["label"] == label and "speedup" in c), None)
    result |= {"result_trial": summary.result_trial, "config": config, "claimed_speedup": claimed,
               "single_run_speedup": summary.result.single_run_speedup, "warnings": summary.safety.warnings}
    return result, {"catalog": catalog, "workload": workload, "config": config}


def interleaved(ctx: dict, args: argparse.Namespace, store, settle: bool) -> dict:  # noqa: ANN001
    catalog, workload, config = ctx["catalog"], ctx["workload"], ctx["config"]
    with make_target(catalog, workload, store.worker_scratch(), args.driver, settle=settle) as target:
        comparison = run_interleaved(
            target,
            [(Candidate("default", {}), catalog.defaults()), (Candidate("winner", config), catalog.config(config))],
            workload.full, repeats=args.repeats, objective=workload.objective, seed=args.seed,
            log_dir=store.home / "bench-settled" / ("settled" if settle else "unsettled"))
    data = comparison.to_dict()
    return {"speedup": data["candidates"][1].get("speedup"), "failure": data["candidates"][1]["failure"],
            "default": {"values": data["candidates"][0]["values"], "costs": data["candidates"][0]["costs"]},
            "winner": {"values": data["candidates"][1]["values"], "costs": data["candidates"][1]["costs"]},
            "noise_cv": comparison.noise}


def db_bench_harness(ctx: dict, args: argparse.Namespace, store) -> dict:  # noqa: ANN001
    """db_bench alone: the workload, then its own flush and waitforcompaction; wall time of the process."""
    catalog, workload = ctx["catalog"], ctx["workload"]
    folder = store.home / "bench-settled" / "db_bench-harness"
    times: dict[str, list[float]] = {"default": [], "winner": []}
    failures: dict[str, str] = {}
    with make_target(catalog, workload, folder / "scratch", "db_bench", settle=False) as target:
        for repeat in range(args.repeats):
            for label, changes in (("default", {}), ("winner", ctx["config"])):
                if label in failures:
                    continue  # one run that never settles is enough to know
                db_dir = folder / "scratch" / "db"
                argv = [a + ",flush,waitforcompaction" if a.startswith("--benchmarks=") else a
                        for a in target.argv(catalog.config(changes), workload.full, db_dir, args.seed)]
                outcome = run_logged(argv, log_path=folder / f"{label}-{repeat}.log", timeout_s=args.harness_limit_s)
                if outcome.timed_out or outcome.returncode != 0:
                    failures[label] = f"did not finish within {args.harness_limit_s} s" if outcome.timed_out else \
                        f"exit status {outcome.returncode}"
                else:
                    times[label].append(outcome.elapsed_s)
                print(f"  harness round {repeat + 1} {label}: {outcome.elapsed_s:.2f} s", flush=True)
    if failures or not times["winner"]:
        return {"failures": failures, "times": times}
    minus = {k: [t - WAITFORCOMPACTION_SLEEP_S for t in v] for k, v in times.items()}
    return {"times": times, "speedup": vars(speedup(times["default"], times["winner"], False)),
            "speedup_without_sleep": vars(speedup(minus["default"], minus["winner"], False))}


def _costs(costs: dict) -> str:
    settle = f"{costs['settle_s']:.2f} s" if costs.get("settle_s") is not None else "-"
    recovery = f"{costs['recovery_s']:.2f} s" if costs.get("recovery_s") is not None else "-"
    return f"{settle} / {recovery} / {costs['peak_rss_bytes'] / 2**20:,.0f} MiB"


def table(*results: dict) -> str:
    """Results as a Markdown table: one row per study."""
    rows = ["| workload | study | trials (complete / pruned / timeout) | knobtune's verdict | re-measured settled "
            "| re-measured unsettled | db_bench flush,waitforcompaction (raw; less its 5 s sleep) "
            "| default: settle / recovery / peak memory | winner: settle / recovery / peak memory |",
            "|---|---|---|---|---|---|---|---|---|"]
    for data in results:
        r, args = data["result"], data["args"]
        counts = r["counts"]
        harness = r.get("db_bench_harness") or {}
        if harness.get("failures"):
            harness_text = "; ".join(f"{k}: {v}" for k, v in harness["failures"].items())
        elif harness:
            harness_text = f"{interval(harness['speedup'])}; {interval(harness['speedup_without_sleep'])}"
        else:
            harness_text = "(not db_bench)"
        settled = r.get("settled", {})
        rows.append(f"| {args['workload']} | {'settled' if r['settled_study'] else 'unsettled'}, {args['time']} "
                    f"| {counts['complete']} / {counts['pruned']} / {counts['timeout']} | {r['verdict']} "
                    f"| {interval(settled.get('speedup'))} | {interval(r.get('unsettled', {}).get('speedup'))} "
                    f"| {harness_text} | {_costs(settled['default']['costs']) if settled else '-'} "
                    f"| {_costs(settled['winner']['costs']) if settled.get('winner', {}).get('values') else '-'} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--driver", default=None)
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--time", default="10m", help="budget of the study, its verification included")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--unsettled", action="store_true", help="run the study on the raw window")
    parser.add_argument("--harness-limit-s", type=float, default=90.0)
    parser.add_argument("--dir", type=Path, default=Path("bench/studies"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, nargs="+", default=None, help="print the README table of these results")
    args = parser.parse_args()
    if args.table:
        print(table(*(json.loads(path.read_text()) for path in args.table)))
        return
    store = open_store(named_folder(args.dir))
    result, ctx = run_study(args, store)
    print(json.dumps({k: result[k] for k in ("study", "counts", "verdict", "claimed_speedup", "config")}, default=str),
          flush=True)
    if ctx["config"]:
        result["settled"] = interleaved(ctx, args, store, settle=True)
        print("settled:", json.dumps(result["settled"]["speedup"]), flush=True)
        result["unsettled"] = interleaved(ctx, args, store, settle=False)
        print("unsettled:", json.dumps(result["unsettled"]["speedup"]), flush=True)
        driver = args.driver or ("db_bench" if args.system == "rocksdb" else "kvbench")
        if driver == "db_bench":
            result["db_bench_harness"] = db_bench_harness(ctx, args, store)
            print("db_bench flush,waitforcompaction:", json.dumps(result["db_bench_harness"].get("speedup")),
                  json.dumps(result["db_bench_harness"].get("speedup_without_sleep")), flush=True)
    emit({"args": {k: str(v) for k, v in vars(args).items()}, "result": result}, args.out)


if __name__ == "__main__":
    main()
