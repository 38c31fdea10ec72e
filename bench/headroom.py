"""Benchmark: how much a workload's space holds on this machine, and how much of it 5- and 10-minute studies reach
(issue 57).

Gains have plateaued near 1.2x at 10 minutes. Is that the space (no config does much better here) or the search
(better configs exist, the study does not find them in time)? Per workload:

1. The reference, an hour or more in all: `tune` once per --reference-arm (a sampler and a seed: TPE with two
   seeds and random search by default), --reference-time each; then the best of them (the largest verified gain)
   is explained (`explain`: the ablation path from the default to it, each step's share of the gain) and the
   --sweep-knobs knobs that earned most of it are swept around it (`sweep --knob K --around STUDY`, 5 runs a
   point: enough to tell one of up to 12 points ahead of the reference's value across them all): a point beyond
   the reference's own value, past the noise across the sweep, says the space holds more than the reference found.
2. The short studies: `tune` as a user runs it (the default sampler) for each of --budgets.
3. One interleaved comparison (`compare`, --repeats runs a config) of the default, the reference's result and
   each short study's result: each one's gain over the default, and each short study's share of the reference's
   gain, (r - 1) / (R - 1) (the issue's goal: 10 minutes reach 90% or more), and the reference's result over each
   short study's measured directly from their runs (the default's noisier runs widen the shares' intervals). A
   study that kept the default has gain 1.0.
4. Where each short study's time went, from its trials' records: the measured runs (the workload's window, the
   settle: flush, compaction and the crash check's restart), the rest of each trial (load, open, copy, read-back,
   the runs a trial cut short), the time between trials, and the verification; trials a minute.

Workloads are shipped names or files (bench/workloads/); --capture FILE also captures a kvbench workload once
(as an application's capture: `knobtune.systems.rocksdb.capture.from_workload`) and measures its replay.

    .venv/bin/python bench/headroom.py --workloads put-get-delete bench/workloads/scans-reads-updates.toml \\
        --capture bench/workloads/inbox-day.toml --out bench/results/headroom/
    .venv/bin/python bench/headroom.py --table bench/results/headroom/DAY-COMMIT.json
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import optuna

from _cli import (compared_speedup, emit_in_studies_folder, interval, knobtune_json, printed_table, result_arguments,
                  verified_speedup)
from knobtune.analysis import stats
from knobtune.analysis.sweep import runs_to_tell
from knobtune.report.sections import TimeSpent
from knobtune.tuning.records import attrs, records
from knobtune.units import parse_duration_s
from knobtune.workloads import load_workload

RESUMES = True  # its figures are its steps' outputs and the studies' records (bench/_steps.py)
REFERENCE_ARMS = ("tpe:1", "tpe:2", "random:3")  # sampler:seed; three of 20 minutes: an hour in all
GOAL = 0.9  # the share of the reference's gain the issue asks 10 minutes to reach
SWEEP_RUNS = 5  # runs a point of a sweep around the reference: runs_to_tell for up to 12 points compared


def study_name(*parts: object) -> str:
    return "-".join(str(part) for part in parts).replace(".", "_").replace("/", "_")


def tune(args: argparse.Namespace, home: Path, workload: dict, study: str, time_s: float, sampler: str | None,
         seed: int, extra: tuple[str, ...] = ()) -> dict:
    """One `tune` as a user runs it (and ``extra`` arguments), its verification inside --time; what the study
    claims."""
    argv = ["tune", args.system, *workload["args"], "--time", f"{time_s:.0f}s", "--seed", str(seed), "--study", study,
            *extra]
    summary = knobtune_json(*argv, *(["--sampler", sampler] if sampler else []), home=home)
    return {"study": study, "sampler": sampler or "tpe (the default)", "seed": seed, "time_s": time_s,
            "claimed": verified_speedup(summary), "result_trial": summary.get("result_trial")}


def explained(args: argparse.Namespace, home: Path, study: str) -> dict:
    """`explain` of the study's result: the knobs of each step of the path and their share of the gain."""
    try:
        data = knobtune_json("explain", study, "--repeats", "3", home=home)
    except SystemExit as exc:
        return {"error": str(exc)[:500]}
    steps = [{"knobs": step["knobs"], "share": step.get("share"), "ratio": step.get("ratio")}
             for step in data.get("steps", [])]
    return {"steps": steps, "noise_cv": data.get("noise_cv"), "minimal_note": data.get("minimal_note")}


def top_knobs(explanation: dict, count: int) -> list[str]:
    """The knobs of the steps that earned the largest shares of the gain, ``count`` at most: a step of several knobs
    (knobs that go together, as a bucket count with the buffer it hashes) gives each of its knobs in turn."""
    steps = [s for s in explanation.get("steps", []) if s.get("share") is not None]
    knobs = [knob for s in sorted(steps, key=lambda s: -s["share"]) for knob in s["knobs"]]
    return list(dict.fromkeys(knobs))[:count]


def swept(args: argparse.Namespace, home: Path, workload: dict, study: str, knob: str) -> dict:
    """One knob swept around the study's result: whether a point beats the study's own value beyond the noise."""
    try:
        data = knobtune_json("sweep", args.system, *workload["args"], "--knob", knob, "--around", study,
                             "--repeats", str(SWEEP_RUNS), "--seed", str(args.seed), home=home)
    except SystemExit as exc:
        return {"knob": knob, "error": str(exc)[:500]}
    versus = data.get("study_versus_best")
    beaten = data.get("study_point") is not None and data.get("best_point") != data.get("study_point") \
        and not data.get("study_within_noise")
    compared = data.get("study_compared") or 0
    return {"knob": knob, "beaten": bool(beaten), "points": len(data.get("points", [])), "compared": compared,
            "could_tell": compared > 0 and data["repeats"] >= runs_to_tell(compared),
            "best_over_study": None if not versus else {k: versus[k] for k in ("ratio", "ci_low", "ci_high")}}


def compared(args: argparse.Namespace, home: Path, workload: dict, studies: list[str]) -> dict:
    """The default and each study's result (a study that kept the default is left out: its gain is 1.0), in one
    interleaved comparison."""
    configs = [arg for study in studies for arg in ("--config", f"study:{study}")]
    try:
        data = knobtune_json("compare", args.system, *workload["args"], "--repeats", str(args.repeats), "--seed",
                             str(args.seed), "--config", "default", *configs, home=home)
    except SystemExit as exc:
        return {"error": str(exc)[:500]}
    gains, values = {}, {}
    for candidate in data["candidates"]:
        label = candidate["label"].removeprefix("study:")
        if label in studies:
            gains[label] = compared_speedup(candidate)
            values[label] = candidate.get("values") or []
    return {"noise_cv": data.get("noise_cv"), "repeats": args.repeats, "objective": data.get("objective"),
            "gains": gains, "values": values}


def reference_over(comparison: dict, reference: str | None, study: str) -> dict | None:
    """How much faster the reference's result ran than ``study``'s in the same comparison, with its interval: the
    short study measured against the reference directly, not through the default's noisier runs. None when either
    has no runs."""
    runs = comparison.get("values", {})
    if reference is None or not runs.get(reference) or not runs.get(study):
        return None
    versus = stats.speedup(runs[study], runs[reference], comparison.get("objective") == "ops_per_s")
    return {"ratio": versus.ratio, "ci_low": versus.ci_low, "ci_high": versus.ci_high}


def time_spent(home: Path, study_name_: str) -> dict:
    """Where a study's time went, from its trials' records (seconds); its search, verification and trials a minute
    as `show` reports them (``TimeSpent``)."""
    study = optuna.load_study(study_name=study_name_, storage=f"sqlite:///{home / 'studies.db'}")
    spent = TimeSpent.from_record(study.user_attrs.get(attrs.TIME_SPENT))
    rows = [r for r in records(study) if r.seconds is not None]
    window = settle = 0.0
    for record in rows:
        for run in record.runs.values() if record.reused_from is None else ():  # a reused run ran in another trial
            costs = run.costs()
            window += float(costs.get("workload_s") or 0.0)
            settle += float(costs.get("settle_s") or 0.0)
    trials_s = sum(r.seconds or 0.0 for r in rows)
    search_s = spent.search_s if spent else trials_s
    return {"search_s": search_s, "verification_s": spent.verification_s if spent else None, "window_s": window,
            "settle_s": settle, "rest_of_trials_s": max(trials_s - window - settle, 0.0),
            "between_trials_s": max(search_s - trials_s, 0.0), "trials": spent.trials if spent else len(rows),
            "trials_per_min": spent.trials_a_minute if spent else None}


def share(gain: dict | None, reference: dict | None) -> float | None:
    """A gain's share of the reference's: (r - 1) / (R - 1); None when either is unmeasured or the reference
    gained nothing."""
    if not reference or "ratio" not in reference or reference["ratio"] <= 1.0:
        return None
    ratio = gain["ratio"] if gain and "ratio" in gain else 1.0
    return (ratio - 1.0) / (reference["ratio"] - 1.0)


def one_workload(args: argparse.Namespace, home: Path, workload: dict) -> dict:
    name = workload["name"]
    reference = []
    for arm in args.reference_arms:
        sampler, seed = arm.split(":")
        reference.append(tune(args, home, workload, study_name("ref", name, sampler, seed),
                              parse_duration_s(args.reference_time), sampler, int(seed)))
    won = [r for r in reference if r["claimed"] and r["claimed"]["won"]]
    best = max(won, key=lambda r: r["claimed"]["ratio"]) if won else None
    explanation, sweeps = {}, []
    if best is not None:
        explanation = explained(args, home, best["study"])
        sweeps = [swept(args, home, workload, best["study"], knob)
                  for knob in top_knobs(explanation, args.sweep_knobs)]
    short = [tune(args, home, workload, study_name("short", name, budget, args.seed), parse_duration_s(budget),
                  None, args.seed) | {"budget": budget} for budget in args.budgets]
    with_results = [s["study"] for s in ([best] if best else []) + short if s["claimed"] and s["claimed"]["won"]]
    comparison = compared(args, home, workload, with_results) if with_results else {"gains": {}}
    reference_gain = comparison["gains"].get(best["study"]) if best else None
    for study in short:
        study["gain"] = comparison["gains"].get(study["study"])
        study["share_of_reference"] = share(study["gain"], reference_gain)
        study["reference_over"] = reference_over(comparison, best["study"] if best else None, study["study"])
        study["time"] = time_spent(home, study["study"])
    return {"workload": name, "reference": {"arms": reference, "best": best["study"] if best else None,
                                            "gain": reference_gain, "explain": explanation, "sweeps": sweeps},
            "short": short, "comparison": {k: v for k, v in comparison.items() if k not in ("gains", "values")}}


def prepared(args: argparse.Namespace, home: Path) -> list[dict]:
    """The workloads as `tune` takes them: names or files through --driver; each --capture captured once."""
    from knobtune.systems.rocksdb.capture import from_workload

    shown = [{"name": load_workload(w).name, "args": ["--workload", w, "--driver", args.driver]
              + (["--records", str(args.records)] if args.records else [])} for w in args.workloads]
    for source in args.capture:
        workload = load_workload(source)
        folder = home / f"{workload.name}.capture"
        if not folder.exists():  # made whole, then renamed: a run stopped while capturing leaves no half capture
            partial = home / f".{workload.name}.capture-partial"
            shutil.rmtree(partial, ignore_errors=True)
            from_workload(workload, partial, workload.name, args.records)
            partial.rename(folder)
        shown.append({"name": f"{workload.name}-capture", "args": ["--workload", str(folder)]})
    return shown


def run(args: argparse.Namespace, home: Path) -> dict:
    results = [one_workload(args, home, workload) for workload in prepared(args, home)]
    return {"system": args.system, "driver": args.driver, "seed": args.seed, "budgets": args.budgets,
            "reference_arms": args.reference_arms, "reference_time": args.reference_time,
            "sweep_knobs": args.sweep_knobs, "repeats": args.repeats, "goal": GOAL, "workloads": results}


def _ratio(gain: dict | None) -> str:
    if not gain:
        return "1.00x (kept the default)"
    if "ratio" not in gain:
        return f"failed: {gain.get('failure')}"
    return interval(gain)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def table(data: dict) -> str:
    # the reference over each short study: a result made before commit 78315f5 has none
    over = any(s.get("reference_over") for w in data["workloads"] for s in w["short"])
    rows = [f"{data['system']}, reference: {', '.join(data['reference_arms'])} of {data['reference_time']} each, "
            f"then `explain` and sweeps of its top {data['sweep_knobs']} knobs; every result compared in one "
            f"interleaved run, {data['repeats']} runs a config.", "",
            "| workload | reference | sweeps beyond it | "
            + " | ".join(f"{b}: gain, share{', reference over it' if over else ''}" for b in data["budgets"]) + " |",
            "|---|---|---|" + "---|" * len(data["budgets"])]
    for w in data["workloads"]:
        ref = w["reference"]
        beyond = [s["knob"] for s in ref["sweeps"] if s.get("beaten")]
        sweeps = ("none of " + str(len(ref["sweeps"])) if not beyond else ", ".join(beyond)) if ref["sweeps"] else "-"
        blind = [s["knob"] for s in ref["sweeps"] if s.get("could_tell") is False]  # too few runs for its points
        sweeps += f" ({', '.join(blind)}: too few runs a point to tell)" if blind else ""
        cells = [f"{_ratio(s.get('gain'))}, {_share(s.get('share_of_reference'))}"
                 + (f", {interval(s.get('reference_over'))}" if over else "") for s in w["short"]]
        rows.append(f"| {w['workload']} | {_ratio(ref['gain'])} | {sweeps} | " + " | ".join(cells) + " |")
    rows += ["", "Where the short studies' time went (seconds; trials a minute of search):", "",
             "| workload | budget | window | settle | rest of trials | between trials | verification | trials/min |",
             "|---|---|---|---|---|---|---|---|"]
    for w in data["workloads"]:
        for s in w["short"]:
            t = s["time"]
            per_min = "-" if t["trials_per_min"] is None else f"{t['trials_per_min']:.1f}"
            rows.append(f"| {w['workload']} | {s['budget']} | {t['window_s']:.0f} | {t['settle_s']:.0f} | "
                        f"{t['rest_of_trials_s']:.0f} | {t['between_trials_s']:.0f} | "
                        f"{t['verification_s'] or 0:.0f} | {per_min} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--driver", default="kvbench", help="the driver of the --workloads (not of a capture)")
    parser.add_argument("--workloads", nargs="*", default=["put-get-delete"],
                        help="workloads tuned as they are (none: only the --capture ones)")
    parser.add_argument("--capture", nargs="*", default=[], help="kvbench workload files captured, then replayed")
    parser.add_argument("--records", type=int, default=None, help="every workload's full size (default: its own)")
    parser.add_argument("--reference-arms", nargs="+", default=list(REFERENCE_ARMS), metavar="SAMPLER:SEED")
    parser.add_argument("--reference-time", default="20m", help="--time of each reference arm")
    parser.add_argument("--sweep-knobs", type=int, default=2, help="knobs swept around the reference's result")
    parser.add_argument("--budgets", nargs="+", default=["5m", "10m"])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs a config in the comparison")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="studies folder (default: a new temporary one)")
    result_arguments(parser)
    args = parser.parse_args()
    if printed_table(args, table):
        return
    for arm in args.reference_arms:
        if arm.count(":") != 1 or not arm.split(":")[1].isdigit():
            parser.error(f"--reference-arms {arm}: not SAMPLER:SEED. Fix: e.g. tpe:1")
    emit_in_studies_folder(args, run, "knobtune-bench-headroom-", resumes=RESUMES)


if __name__ == "__main__":
    main()
