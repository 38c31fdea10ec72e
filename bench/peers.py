"""Benchmark: knobtune, SMAC3 and a hand-written Optuna script, same budget, same knobs, same runs (issues 17, 32).

For each seed the chosen tools (``--tools``; the arms) search one workload, each for the same wall-clock budget B,
one after the other (their order rotated from seed to seed, so the machine's drift favours none):

- knobtune: ``knobtune tune --time B --seed S`` as shipped (the diagnosis rules' starts and narrowed first
  search, then TPE); its own verification (top 3 x 5 interleaved runs) is inside B.
- knobtune-basins: the same with a fifth of its sampled trials drawn inside the runner-up choice of a knob that
  decides which others apply (bench/arms/knobtune-basins.toml: ``search.basin_share = 0.2``;
  knobtune/tuning/search/basins.py).
- knobtune-alone: the same with ``--no-rules``: the search alone (no starts from the rules, no narrowing).
- rules-random: the same with ``--sampler random``: the rules' starts and narrowing, then random search.
- SMAC3 (smac): its multi-fidelity facade (random-forest BO, Hyperband with knobtune's reduction factor 3) over
  knobtune's own search space written as a ConfigSpace; SMAC's budgets 1, 3, 9 are the ladder's rungs 0, 1, 2.
- smac-starts: the same SMAC3 given the rules' starts as its initial design's ``additional_configs``: the starts
  ``tune`` would queue, read from the default's full-size run in this harness (``peer_smac.rules_starts``). SMAC
  runs them after its own random initial configs, inside its Hyperband brackets (it may stop them at a small rung,
  where knobtune never prunes a start). The record lists the starts given and those its ConfigSpace cannot hold.
- The hand-written Optuna script (optuna: ``handwritten_optuna.search``: random sampling, successive halving) over
  the same space.

SMAC3 (bench/peer_smac.py) and the script run every config through knobtune's own target (the same settled
measurement; bench/peer_harness.py), after the default has run at every rung, and under knobtune's time rules: a
run may take 3x the default's time at its rung, and none starts that cannot end inside B. A failed run (refused,
crash, timeout, data loss) is a crashed trial for SMAC, at the cost knobtune gives it (no better than a run that
used its whole time limit); the script prunes it, as such scripts do. Only the search differs. knobtune runs its
small rungs scaled (the config's data-sized knobs at the rung's share of the data); the peers run them as the
config is, as their users would, unless ``--peers-scaled-rungs``.

Then the arms' winners and the default are measured side by side by one ``knobtune compare`` per seed (5
interleaved full-size runs each). Recorded per tool and seed: the verified speedup with its 95% CI, the tool's
own claim, its trials and runs, when it reached 95% of its final best, and the unsafe values its winner holds.

    .venv/bin/python -m pip install -e ".[bench]"      # SMAC3 and matplotlib
    .venv/bin/python bench/peers.py --budget 10m --seeds 1 2 3 --out peers.json   # the suite's: bench/run.py peers
    .venv/bin/python bench/peers.py --budget 10m --seeds 1 2 3 \
        --tools knobtune knobtune-alone rules-random smac smac-starts optuna --out arms.json
    .venv/bin/python bench/peers.py --table bench/results/peers/DAY-COMMIT.json
    .venv/bin/python bench/peers.py --plot bench/results/peers/DAY-COMMIT.json peers.png
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

import handwritten_optuna
from _cli import (as_speedups, compared_speedup, emit, interval, knobtune_json, named_folder, save_so_far,
                  study_timeline, verified_speedup)
from knobtune.analysis import speedup
from knobtune.knobs import Value, load_catalog
from knobtune.units import parse_duration_s
from knobtune.targets import Machine, RunFailure
from knobtune.systems import heuristic_config, resolve_driver
from knobtune.tuning import attrs, build_space
from knobtune.tuning.document import OPTIONS
from knobtune.workloads import load_workload
from peer_harness import DEFAULTS, Bench, OutOfTime, harness, tool_record
from peer_smac import import_smac, run_smac

TOOLS = ("knobtune", "knobtune-basins", "knobtune-alone", "rules-random", "smac", "smac-starts",
         "optuna")  # every arm, the table's order
DEFAULT_TOOLS = ("knobtune", "smac", "optuna")  # issue 17's three arms
NAMES = {"knobtune": "knobtune", "knobtune-basins": "knobtune, a fifth of its trials in the second basin",
         "knobtune-alone": "knobtune, search alone (--no-rules)",
         "rules-random": "knobtune's rules, then random search", "smac": "SMAC3",
         "smac-starts": "SMAC3 with the rules' starts", "optuna": "hand-written Optuna"}
# an arm of knobtune is a partial experiment document beside the bench's own options (docs/experiment.md)
ARMS = Path(__file__).resolve().parent / "arms"
KNOBTUNE_ARMS: dict[str, Path | None] = {"knobtune": None, "knobtune-basins": ARMS / "knobtune-basins.toml",
                                         "knobtune-alone": ARMS / "knobtune-alone.toml",
                                         "rules-random": ARMS / "rules-random.toml"}


# ---------------------------------------------------------------- knobtune


def run_knobtune(bench: Bench, seed: int, tool: str = "knobtune") -> dict[str, Any]:
    """One ``knobtune tune`` as a user runs it, with the arm's document (``KNOBTUNE_ARMS``); its winner is its
    verified result (the default when it keeps it)."""
    study = f"{tool}-s{seed}"
    arm = KNOBTUNE_ARMS[tool]
    arm_args = ("--experiment", str(arm)) if arm else ()
    started = time.monotonic()
    summary = knobtune_json("tune", bench.catalog.system, *bench.workload_args(), "--time", f"{bench.budget_s:g}s",
                            "--seed", str(seed), "--study", study, *bench.knobtune_args, *arm_args,
                            *(["--allow-unsafe"] if bench.space.allow_unsafe else []), home=bench.home)
    wall_s = time.monotonic() - started
    stored = optuna.load_study(study_name=study, storage=f"sqlite:///{bench.home / 'studies.db'}")
    sampled = [t for t in stored.get_trials(deepcopy=False) if not attrs.is_default(t.user_attrs)]
    runs = sum(key.startswith(attrs.RUNG_PREFIX) for t in sampled for key in t.user_attrs)  # reused rungs counted too
    verified = verified_speedup(summary)
    won = bool(verified and verified["won"])
    claim = {"ratio": verified["ratio"] if won else None, "text": summary["verdict"]}
    record = tool_record(bench, tool, seed, wall_s=wall_s, default_value=summary["default_value"],
                         trials=len(sampled), runs=runs, outcomes={"trials": summary["counts"]},
                         timeline=study_timeline(bench.home, study, bench.maximize),
                         winner=bench.catalog.config(summary["result_config"]), claim=claim,
                         no_winner=None if won else "it keeps the default (measured again as an A/A check)")
    started_from = [t.user_attrs[attrs.STARTED_FROM] for t in sampled if attrs.STARTED_FROM in t.user_attrs]
    return record | {"study": study, "tune_args": [*bench.knobtune_args, *arm_args], "started_from": started_from,
                     "time_spent": summary.get("time_spent")}


# ---------------------------------------------------------------- the hand-written Optuna script


def run_optuna(bench: Bench, seed: int) -> dict[str, Any]:
    """The hand-written script's search (random sampling, successive halving) over knobtune's space and runs."""
    with harness(bench, "optuna", seed) as h:
        h.measure_default()

        def run(config: dict[str, Value], step: int) -> float:
            try:
                return h.run(config, h.rungs[step])
            except RunFailure:
                raise handwritten_optuna.RunFailed() from None
            except OutOfTime:
                raise handwritten_optuna.OutOfTime() from None

        study = handwritten_optuna.search(lambda trial: h.space.suggest(trial)[0], run, len(h.rungs),
                                          h.time_left_s(), seed, "maximize" if bench.maximize else "minimize")
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not complete:
            return h.record(len(study.trials), None, None, "no trial reached full size")
        best = study.best_trial
        return h.record(len(study.trials), h.config_of(best.params), best.value)


# ---------------------------------------------------------------- verification of the winners, side by side


def verify(bench: Bench, seed: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``knobtune compare`` of the default and every tool's winner, interleaved; each record gets its figures."""
    folder = bench.home / f"winners-s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for record in records:
        if record.get("winner") is not None:
            files[record["tool"]] = folder / f"{record['tool'].replace('@', '-')}.json"
            files[record["tool"]].write_text(json.dumps(record["winner"], indent=1) + "\n")
    if not files:
        return {"seed": seed, "note": "no tool has a winner to verify"}
    configs = [arg for path in files.values() for arg in ("--config", str(path))]
    try:
        comparison = knobtune_json("compare", bench.catalog.system, *bench.workload_args(), "--repeats",
                                   str(bench.repeats), "--seed", str(seed), "--config", "default", *configs,
                                   home=bench.home)
    except SystemExit as exc:
        return {"seed": seed, "error": str(exc)}
    measured = {c["label"]: c for c in comparison["candidates"]}
    values = {tool: measured[str(path)] for tool, path in files.items()}
    for record in records:
        candidate = values.get(record["tool"])
        if candidate is None:
            continue
        record["verified"] = compared_speedup(candidate)
    pairs = {}
    order = sorted(values, key=_rank)  # the arms in TOOLS' order, then earlier winners and known configs
    for better, other in [(a, b) for i, a in enumerate(order) for b in order[i + 1:]]:
        a, b = values.get(better), values.get(other)
        if a and b and a["values"] and b["values"] and not a["failure"] and not b["failure"]:
            pairs[f"{better} over {other}"] = vars(speedup(b["values"], a["values"], bench.maximize, seed=seed))
    default = measured["default"]
    return {"seed": seed, "repeats": bench.repeats, "noise_cv": comparison["noise_cv"],
            "default_median": default["median"], "files": {k: str(v) for k, v in files.items()}, "pairwise": pairs,
            "verified": {r["tool"]: r["verified"] for r in records if "verified" in r}}  # earlier winners' too


# ---------------------------------------------------------------- the table and the plot


def _rank(tool: str) -> int:
    return TOOLS.index(tool) if tool in TOOLS else len(TOOLS)


def _shown(tool: str) -> str:
    """An arm's name as the table writes it; an earlier result's winner as ``NAME (earlier)``."""
    name, at, source = tool.partition("@")
    return NAMES.get(name, name) + (f" ({source})" if at else "")


def table(data: dict[str, Any]) -> str:
    """A result as a Markdown table: per tool the median over seeds, then each seed's figures."""
    rows = ["| tool | verified speedup vs the default: median (per seed, 95% CI; n.s.: within the noise) | "
            "its own claim per seed | "
            "trials / runs per seed | time to 95% of its final best: median (per seed) | unsafe values in its winner |",
            "|---|---|---|---|---|---|"]
    known = [r["tool"] for r in data["results"] if r["tool"] not in TOOLS]
    for tool in [*TOOLS, *dict.fromkeys(known)]:  # the tools, then known configs verified beside them
        records = [r for r in data["results"] if r["tool"] == tool]
        if not records:
            continue
        verified = [v for r in records if "ratio" in (v := r.get("verified") or {})]
        median = f"**{statistics.median(v['ratio'] for v in verified):.2f}x**" if verified else "none"
        if verified and len(verified) < len(records):
            median += f" of {len(verified)} seeds"
        per_seed = "; ".join(_verified(r) for r in records)
        claims = "; ".join(_claim(r) for r in records)
        counts = "; ".join(f"{r['trials']} / {r['runs']}" if "trials" in r else "-" for r in records)
        reached = [r["reached_s"] for r in records if r.get("reached_s") is not None]
        times = "; ".join(f"{r['reached_s']:.0f} s" if r.get("reached_s") is not None else "-" for r in records)
        unsafe = "; ".join((", ".join(f"{k} ({v})" for k, v in r["unsafe"].items()) or "none") if "unsafe" in r
                           else "-" for r in records)
        rows.append(f"| {NAMES.get(tool, tool)} | {median} ({per_seed}) | {claims} | {counts} | "
                    f"{f'{statistics.median(reached):.0f} s' if reached else '-'} ({times}) | {unsafe} |")
    again: dict[str, list[dict]] = {}  # winners of an earlier result, measured again beside this run's (--beside)
    for seed in data["verification"]:
        for tool, v in (seed.get("verified") or {}).items():
            if "@" in tool:
                again.setdefault(tool, []).append(v | {"seed": seed["seed"]})
    for tool, measured in again.items():
        ratios = [v["ratio"] for v in measured if "ratio" in v]
        name, _, source = tool.partition("@")
        rows.append(f"| {NAMES.get(name, name)}, {source} winners measured again here | "
                    f"{f'**{statistics.median(ratios):.2f}x**' if ratios else 'none'} ("
                    + "; ".join(f"seed {v['seed']}: " + _verified({"verified": v}) for v in measured) + ") | - | - | - "
                                                                                                        "| - |")
    pairs: dict[str, list[str]] = {}
    for seed in data["verification"]:
        for name, s in (seed.get("pairwise") or {}).items():
            pairs.setdefault(name, []).append(
                f"seed {seed['seed']}: {interval(s)}")
    lines = [f"- {' over '.join(map(_shown, name.split(' over ')))}: {'; '.join(v)}" for name, v in pairs.items()]
    starts = [line for r in data["results"] if (line := _starts(r))]
    return "\n".join(rows + ([""] + ["Side by side, same interleaved runs:"] + lines if lines else [])
                     + ([""] + ["Starts from the rules:"] + starts if starts else []))


def _starts(record: dict[str, Any]) -> str | None:
    """One line saying which starts an arm was given (knobtune's arms: what its study tried first)."""
    where = f"- {_shown(record['tool'])}, seed {record['seed']}: "
    if "started_from" in record:
        return where + f"tried first: {', '.join(record['started_from']) or 'none'}"
    if "smac_starts" in record:
        given = record["smac_starts"]
        asked = given.get("rungs_asked", {})
        return (where + f"rules fired: {', '.join(given['fired']) or 'none'}; given: "
                + (", ".join(f"{s['label']} (asked at rungs {asked.get(s['label'], [])})" for s in given["given"])
                   or "none")
                + "".join(f"; left out {s['label']}: {s['why']}" for s in given["left_out"]))
    return None


def _claim(record: dict[str, Any]) -> str:
    claim = record.get("claim")
    if not claim:
        return "none"
    if claim["ratio"] is None:
        return "keeps the default"
    return f"{claim['ratio']:.2f}x" + (" verified" if record["tool"] in KNOBTUNE_ARMS else " single run")


def _verified(record: dict[str, Any]) -> str:
    verified = record.get("verified")
    if record.get("error"):
        return f"seed {record['seed']}: error"
    if not verified:
        return f"seed {record['seed']}: {record.get('no_winner') or 'not verified'}"
    if "failure" in verified:
        return f"seed {record['seed']}: failed ({verified['failure'][:60]})"
    mark = "" if verified["significant"] else (" worse" if verified["ci_high"] < 1 else " n.s.")
    kept = ", the default again (A/A)" if record.get("winner") == {} else ""
    return f"{interval(verified)}{mark}{kept}"


def plot(path: Path, out: Path) -> None:
    """Each tool's best full-size single run over its own default's, over time; its verified speedup (95% CI)
    at its end."""
    from _plot import plot_best_over_time

    data = json.loads(path.read_text())
    lines = []
    for record in data["results"]:
        if "timeline" not in record:
            continue
        verified = record.get("verified") or {}
        end = ((record["wall_s"], verified["ratio"], verified["ci_low"], verified["ci_high"]) if "ratio" in verified
               else None)
        lines.append({"arm": NAMES[record["tool"]], "end": end,
                      "points": as_speedups(record["timeline"], record["default_value"], record["maximize"])})
    plot_best_over_time(lines, out, ylabel="best full-size speedup so far (dot: verified, 95% CI)",
                        title=f"{data['system']} {data['workload']}, {data['records']:,} records, {data['budget']} "
                              f"per tool, {len(data['seeds'])} seed(s)")
    print(f"wrote {out}")


# ---------------------------------------------------------------- main


RUNNERS: dict[str, Callable[[Bench, int], dict[str, Any]]] = {
    "knobtune": run_knobtune, "knobtune-basins": functools.partial(run_knobtune, tool="knobtune-basins"),
    "knobtune-alone": functools.partial(run_knobtune, tool="knobtune-alone"),
    "rules-random": functools.partial(run_knobtune, tool="rules-random"), "smac": run_smac,
    "smac-starts": functools.partial(run_smac, tool="smac-starts"), "optuna": run_optuna}


def earlier_winners(path: Path, seed: int) -> list[dict[str, Any]]:
    """The winners an earlier result found at ``seed``, as records named ``TOOL@earlier`` (verified again beside
    this run's, never searched again)."""
    data = json.loads(path.read_text())
    return [{"tool": f"{r['tool']}@earlier", "seed": seed, "winner": r["winner"], "from": str(path)}
            for r in data["results"] if r.get("seed") == seed and r.get("winner") is not None]


def known_config(system: str, name: str, seed: int) -> dict[str, Any]:
    """A known config of the system (``knobtune baseline SYSTEM --name NAME``) as a record named ``NAME``: verified
    beside the winners, never searched."""
    known = heuristic_config(system, Machine.from_host(), None, name)
    return {"tool": name, "seed": seed, "winner": dict(known.config), "from": "knobtune baseline"}


def make_bench(args: argparse.Namespace, home: Path) -> Bench:
    catalog = load_catalog(args.system)
    workload = load_workload(args.workload)
    workload = workload.scaled(args.records) if args.records else workload
    driver = resolve_driver(catalog.system, args.driver)
    space = build_space(catalog, allow_unsafe=args.allow_unsafe, driver=driver)
    return Bench(catalog, workload, args.workload, driver, space, parse_duration_s(args.budget), args.repeats, home,
                 tuple(shlex.split(args.knobtune_args)), args.peers_scaled_rungs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--driver", help="benchmark driver (default: the system's)")
    parser.add_argument("--records", type=int, help="the workload's full size (default: its own)")
    parser.add_argument("--budget", default="10m", help="wall-clock budget of each tool, e.g. 90s, 10m")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(DEFAULT_TOOLS),
                        help="the arms to run, each its own search (default: knobtune smac optuna; see above)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per winner when verifying")
    parser.add_argument("--allow-unsafe", action="store_true", help="every tool also searches unsafe values")
    parser.add_argument("--knobtune-args", default="",
                        help="more options for knobtune's `tune`, e.g. '--sampler random'; one starting with -- "
                             "needs '=': --knobtune-args=--allow-operational")
    parser.add_argument("--peers-scaled-rungs", action="store_true",
                        help="SMAC3 and the script run small rungs with data-sized knobs scaled, as knobtune does")
    parser.add_argument("--beside", type=Path, action="append", default=[], metavar="RESULT",
                        help="an earlier result: its winners at each seed are verified again beside this run's")
    parser.add_argument("--known", nargs="+", default=[], metavar="NAME",
                        help="known configs verified beside the winners, e.g. rocksdb-guide db-bench-universal")
    parser.add_argument("--dir", type=Path, help="studies folder (default: a new temporary one)")
    parser.add_argument("--out", type=Path, help="write the result as JSON here (after every step)")
    parser.add_argument("--table", type=Path, metavar="RESULT", help="print a result file's Markdown table")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RESULT",
                        help="join result files of the same bench run at other seeds into --out")
    parser.add_argument("--plot", nargs=2, type=Path, metavar=("RESULT", "PNG"),
                        help="draw a result file's best speedup over time into a PNG")
    args = parser.parse_args()
    if args.merge:
        emit(merge([json.loads(p.read_text()) for p in args.merge]), args.out)
        return
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if args.plot:
        plot(*args.plot)
        return
    refuse_conflicts(args.tools, shlex.split(args.knobtune_args))
    if {"smac", "smac-starts"} & set(args.tools):
        import_smac()  # before anything runs: a missing SMAC3 is said at once
    home = named_folder(args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-peers-")))
    bench = make_bench(args, home)
    result: dict[str, Any] = {
        "system": bench.catalog.system, "workload": bench.workload.name, "records": bench.workload.records,
        "driver": bench.driver, "budget": args.budget, "seeds": args.seeds, "repeats": args.repeats,
        "allow_unsafe": args.allow_unsafe, "knobtune_args": args.knobtune_args,
        "peers_scaled_rungs": args.peers_scaled_rungs,
        "beside": [str(p) for p in args.beside], "known": args.known, "searched_knobs": list(bench.space.knobs),
        "home": str(home),
        "smac_budgets": {DEFAULTS.search.reduction_factor ** r.index: r.records for r in bench.workload.rungs},
        "results": [], "verification": []}
    chosen = [t for t in TOOLS if t in args.tools]
    for turn, seed in enumerate(args.seeds):
        tools = chosen[turn % len(chosen):] + chosen[:turn % len(chosen)]
        seed_records = []
        for tool in tools:
            print(f"== {NAMES[tool]}, seed {seed}, {args.budget}", flush=True)
            try:
                record = RUNNERS[tool](bench, seed)
            except (Exception, SystemExit) as exc:  # one tool's failure leaves the others to run; it is recorded
                record = {"tool": tool, "seed": seed, "error": f"{type(exc).__name__}: {exc}"}
            seed_records.append(record)
            result["results"].append(record)
            save_so_far(result, args.out)
        earlier = [r for path in args.beside for r in earlier_winners(path, seed)]
        known = [known_config(bench.catalog.system, name, seed) for name in args.known]
        result["verification"].append(verify(bench, seed, seed_records + earlier + known))
        result["results"] += known  # with their verified figures: rows of the table
        save_so_far(result, args.out)
    emit(result, args.out)


def refuse_conflicts(tools: list[str], knobtune_args: list[str]) -> None:
    """Refuse ``--knobtune-args`` that undo a knobtune arm's own options (the arm would not be what it is named).

    Raises:
        SystemExit: names the arm and the option.
    """
    for tool in tools:
        arm = KNOBTUNE_ARMS.get(tool)
        if arm is None:
            continue
        fields = {f"{section}.{name}" for section, values in tomllib.loads(arm.read_text()).items()
                  for name in values}
        setting = {option for option, (field, _rule) in OPTIONS.items() if field in fields} | {"--experiment"}
        for option in setting:
            if any(arg == option or arg.startswith(option + "=") for arg in knobtune_args):
                raise SystemExit(f"--knobtune-args gives {option}, which arm {tool} sets itself "
                                 f"({arm.relative_to(ARMS.parent.parent)}: {', '.join(sorted(fields))}). "
                                 f"Fix: drop it from --knobtune-args, or leave {tool} out of --tools")


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Results of one bench at different seeds as one (their settings must agree).

    Raises:
        SystemExit: the parts differ in system, workload, size, budget, repeats or knobtune's options, or a seed
            appears twice.
    """
    same = ("system", "workload", "records", "driver", "budget", "repeats", "allow_unsafe", "knobtune_args")
    first = parts[0]
    for part in parts[1:]:
        differing = [k for k in same if part.get(k, "") != first.get(k, "")]
        if differing:
            raise SystemExit(f"cannot merge: the results differ in {', '.join(differing)}")
    seeds = [s for part in parts for s in part["seeds"]]
    if len(seeds) != len(set(seeds)):
        raise SystemExit(f"cannot merge: a seed appears twice ({seeds})")
    return {**first, "seeds": seeds, "home": [p["home"] for p in parts],
            "results": [r for p in parts for r in p["results"]],
            "verification": [v for p in parts for v in p["verification"]]}


if __name__ == "__main__":
    main()
