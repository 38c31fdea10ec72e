"""Benchmark: what a RocksDB replay loses without scan lengths, on a scan-heavy workload, and how its rungs rank.

An inbox (bench/workloads/inbox-pages.toml, or --workload: 35% of its operations
a SeekForPrev and 20 Prev calls) is captured once (`knobtune capture rocksdb
--workload`, which records its scan lengths beside the trace), and the same
capture is copied without them. Under each config, interleaved, `--repeats` times:
- the application's own run: kvbench runs the workload's measured phases;
- the replay with scan lengths, and the replay without them (seeks alone);
- with --rungs, the capture's smaller rungs (with scan lengths) as its first
  records, and with --slices K also as K slices spread over the capture (a copy
  whose `[drivers.replay] slices` is K).
The configs: the default, two designed changes (larger blocks; a small cache of
small blocks), then random samples of the space a study of the capture searches
(`--seed`; `inplace_update_support` and `memtablerep` held at their defaults:
see HELD), drawn until `--samples` of them ran on the application (at most 4
times as many: a sample the application refuses, or cannot finish in 5 times
the default's time, is replayed once with scan lengths, to see whether the
replay refuses it too, and is not one of the N). No
settle (`settle=False`): each figure is the measured phases alone (the run
phases; the replay), so all sides count the same operations. It prints and
stores (`--out`) the median seconds of each, each replay's time as a fraction
of the application's under the same config, each config's time against the
default on every side, how each replay ranks the configs against the
application (bench/_fidelity.py: Spearman's rho, the pairs the application
tells apart that the replay orders the same, the share of the replay's best
gain the application keeps), and how each smaller rung ranks them.

    .venv/bin/python bench/scan_lengths.py --records 50000 --operations 300000 --repeats 3 \
        --samples 5 --seed 1 --rungs --slices 4 --out bench/results/scan-lengths/
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import optuna

from _cli import emit
from _fidelity import fidelity, held_text, pairs_text, rank_agreement

from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.systems.rocksdb.capture import from_workload
from knobtune.systems.rocksdb.replay import RocksdbReplayTarget
from knobtune.tuning import build_space
from knobtune.workloads import load_workload

WORKLOAD = Path(__file__).parent / "workloads" / "inbox-pages.toml"
DESIGNED = {"default": {}, "block_size=64KiB": {"block_size": "64KiB"},
            "cache=1MiB,block_size=1KiB": {"cache_size": "1MiB", "block_size": "1KiB"}}
SAMPLE_DRAWS = 4  # --samples N draws at most 4N samples to find N the application runs
# Held at their defaults in the samples: the inbox pages backwards, which RocksDB refuses under in-place updates
# ("Backward iteration not supported if underlying iterator's value cannot be pinned") and which the vector and hash
# memtables make a scan of the whole memtable or refuse; in 4ef67da's run every sample that set them failed the
# application, and a ranking needs configs that run.
HELD = ("inplace_update_support", "memtablerep")
PLANNED_MEMORY_BYTES = 4 * 2**30  # a sample's caches and buffers scaled to fit, as a study's under --memory-limit
TIMEOUT_FACTOR = 5  # a run longer than this many times the default's first run on its side is cut (and dropped)


def designed(catalog) -> dict[str, dict]:
    """The default and the designed configs, by name."""
    return {name: catalog.config(changes) for name, changes in DESIGNED.items()}


def samples(catalog, seed: int) -> Iterator[dict]:
    """Random samples of the space a study of the capture searches (the knobs both the replay and kvbench set, none
    that trades durability, none of ``HELD``), one after another."""
    both = set(build_space(catalog, driver="kvbench").knobs) - set(HELD)
    space = build_space(catalog, [k for k in build_space(catalog, driver=RocksdbReplayTarget.driver).knobs
                                  if k in both]).capped_under(PLANNED_MEMORY_BYTES)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    while True:
        yield space.suggest(study.ask())[0]


def without_scans(capture: Path, copy: Path) -> Path:
    """The capture as a trace alone: its scans file and the section's line naming it left out."""
    shutil.copytree(capture, copy)
    (copy / "scans").unlink()
    lines = (copy / "capture.toml").read_text().splitlines()
    (copy / "capture.toml").write_text("\n".join(line for line in lines if line != 'scans = "scans"') + "\n")
    return copy


def edited(capture: Path, copy: Path | None, field: str, value: str) -> Path:
    """The capture (a copy of it at ``copy``; None: itself) whose ``[drivers.replay]`` sets ``field`` to ``value``
    (``slices`` 4: its smaller rungs made of 4 slices spread over it, 1: its first records; ``rewrite`` true: its
    tables rewritten under each config before the replay)."""
    if copy is not None:
        shutil.copytree(capture, copy)
        capture = copy
    toml = capture / "capture.toml"
    lines = [line for line in toml.read_text().splitlines() if not line.startswith(f"{field} =")]
    at = lines.index("[drivers.replay]") + 1
    toml.write_text("\n".join([*lines[:at], f"{field} = {value}", *lines[at:]]) + "\n")
    return capture


def table(result: dict) -> str:
    """A result file as a Markdown table: each config's time against the default's, on the application and on
    each replay (bench/RESULTS.md shows it)."""
    over = result["over_default"]
    arms = [arm for arm in ARMS if arm in result["median_s"]]
    scans = result["scans"]
    rows = [f"{result['workload']}: {result['operations']:,} operations, {scans['scans']:,} scans "
            f"({scans['matched']:,} matched, {scans['next'] + scans['prev']:,} steps), median of {result['repeats']} "
            "interleaved runs, "
            "measured phase alone", "",
            "| config | " + " | ".join(ARMS[arm] for arm in arms) + " |", "|---" * (len(arms) + 1) + "|"]
    for name in over["application"]:
        rows.append("| " + " | ".join([name] + [_cell(result, arm, name) for arm in arms]) + " |")
    if "configs" in result:
        refused = {arm: {name for name, runs in result["seconds"][arm].items() if not runs} for arm in arms}
        drawn = len(result["configs"]) - len(DESIGNED)
        until = (f", drawn until {result['samples']} ran on the application" if "samples" in result else "")
        until += f"; {' and '.join(result['held'])} held at their defaults" if result.get("held") else ""
        by_app = refused["application"]
        rows += ["", f"Configs: {len(result['configs'])} (the default, {len(DESIGNED) - 1} designed, {drawn} random "
                 f"samples of the space, seed {result['seed']}{until}). Refused by the application: "
                 f"{len(by_app)}; of those, refused by the replay with scan lengths too "
                 f"{len(by_app & refused['replay_with_scans'])}; refused by a replay alone: "
                 f"{len((refused['replay_with_scans'] | refused['replay_seeks_only']) - by_app)}."]
    if "fidelity" in result:
        rows += ["", "| replay | rho (replay vs application) | pairs the application tells apart: ordered the same "
                 "by the replay | replay's best: gain on the replay | on the application | held |",
                 "|---|---|---|---|---|---|"]
        for arm, figure in result["fidelity"].items():
            rows.append(f"| {arm.replace('_', ' ')} | {figure.get('rho')} | {pairs_text(figure)} "
                        f"| {figure.get('replay_gain')}x | {figure.get('application_gain')}x | {held_text(figure)} |")
    if result.get("slice_rho"):
        rows += ["", f"The capture's smaller rungs (replayed with scan lengths), as its first records and as "
                 f"{result['slices']} slices spread over it: Spearman's rho of each rung's ranking of the configs",
                 "", "| rung | first records: rho with the full replay | with the application | slices: rho with the "
                 "full replay | with the application |", "|---|---|---|---|---|"]
        for index, prefix in result["rung_rho"].items():
            sliced = result["slice_rho"][index]
            rows.append(f"| {index} | {prefix['full replay']} | {prefix['application']} | {sliced['full replay']} "
                        f"| {sliced['application']} |")
        return "\n".join(rows)
    for index, rho in (result.get("rung_rho") or {}).items():
        rows.append(f"\nRung {index} of the capture (replayed with scan lengths) ranks the configs with rho "
                    f"{rho['full replay']} against the full replay, {rho['application']} against the application.")
    return "\n".join(rows)


ARMS = {"application": "application", "replay_with_scans": "replay with scan lengths",
        "replay_seeks_only": "replay of seeks only", "replay_rewritten": "replay with scan lengths, tables rewritten"}


def _cell(result: dict, arm: str, name: str) -> str:
    median = result["median_s"][arm].get(name)
    return "-" if median is None else f"{median} s ({result['over_default'][arm][name]}x)"


def _measured(target, side: str, config: dict, rung, log: Path, failures: list[str],
              limits: dict[str, float]) -> tuple[float, dict] | None:
    """The measured phase's seconds of one run of ``side`` and its counters, or None (a config the side refuses or
    cannot finish in TIMEOUT_FACTOR times the default's first run there: kept in ``failures`` with its reason)."""
    key = f"{side} {rung.index}"
    started = time.monotonic()
    try:
        run = target.run(config, rung, timeout_s=limits.get(key), log_path=log, seed=1)
    except Exception as exc:  # noqa: BLE001 - kept with its reason
        failures.append(f"{log.stem}: {exc}"[:300])
        return None
    limits.setdefault(key, max(10.0, TIMEOUT_FACTOR * (time.monotonic() - started)))  # the default runs first
    return sum(p.seconds for p in run.phases if p.name in run.measured), dict(run.counters)


def _rho(by: dict[str, list[float]], seconds: dict[str, dict[str, list[float]]], names: list[str]) -> dict:
    """How one rung's runs rank the configs against the full replay's and the application's."""
    runs = [by.get(n, []) for n in names]  # a sample the application refused has no rung runs
    return {"full replay": rank_agreement(runs, [seconds["replay_with_scans"][n] for n in names]),
            "application": rank_agreement(runs, [seconds["application"][n] for n in names])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", type=Path, default=WORKLOAD, help="the application's workload file")
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--operations", type=int, help="the run phase's operations (default: the file's, scaled)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=0,
                        help="random samples of the space beside the designed configs: drawn until this many ran on "
                             f"the application, at most {SAMPLE_DRAWS} times as many")
    parser.add_argument("--seed", type=int, default=1, help="the samples' seed")
    parser.add_argument("--rungs", action="store_true",
                        help="replay the capture's smaller rungs too (with scan lengths) and rank the configs there")
    parser.add_argument("--slices", type=int, default=0,
                        help="with --rungs: replay the smaller rungs also as this many slices spread over the capture")
    parser.add_argument("--rewrite", action="store_true",
                        help="replay also with the checkpoint's tables rewritten under each config ([drivers.replay] "
                             "rewrite = true)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    catalog = load_catalog("rocksdb")
    workload = load_workload(args.workload).scaled(args.records)
    if args.operations:
        workload = dataclasses.replace(workload, operations=args.operations)
    chosen = designed(catalog)
    drawn = samples(catalog, args.seed)
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="knobtune-scan-lengths-") as tmp:
        home = Path(tmp)
        summary = from_workload(workload, home / "with.capture", "inbox", None)
        edited(home / "with.capture", None, "slices", "1")  # its smaller rungs: its first records
        arms = {"application": workload, "replay_with_scans": load_workload(home / "with.capture"),
                "replay_seeks_only": load_workload(without_scans(home / "with.capture", home / "seeks.capture"))}
        if args.rewrite:
            arms["replay_rewritten"] = load_workload(edited(home / "with.capture", home / "rewritten.capture",
                                                            "rewrite", "true"))
        sides = dict(arms)  # every side a target runs: the arms, and the capture whose rungs are slices
        ladders = {"replay_with_scans": arms["replay_with_scans"].rungs[:-1] if args.rungs else ()}
        if args.rungs and args.slices > 1:
            sides["replay_sliced"] = load_workload(edited(home / "with.capture", home / "sliced.capture",
                                                          "slices", str(args.slices)))
            ladders["replay_sliced"] = sides["replay_sliced"].rungs[:-1]
        seconds: dict[str, dict[str, list[float]]] = {arm: {} for arm in arms}
        rungs: dict[str, dict[str, dict[str, list[float]]]] = {
            side: {str(r.index): {} for r in ladder} for side, ladder in ladders.items()}
        steps: dict[str, float] = {}
        with contextlib.ExitStack() as stack:  # one target a side, as a study has: the replay's reference runs once
            targets = {side: stack.enter_context(make_target(catalog, side_workload, home / "scratch" / side,
                                                             "kvbench" if side == "application" else None,
                                                             settle=False))
                       for side, side_workload in sides.items()}
            limits: dict[str, float] = {}

            def ran(arm: str, name: str, config: dict, repeat: int) -> bool:
                """One run of ``arm`` at full size under ``config``, kept in ``seconds``; whether it ran."""
                run = _measured(targets[arm], arm, config, arms[arm].full,
                                home / "logs" / f"{arm}-{name}-{repeat}.log", failures, limits)
                print(f"repeat {repeat} {name:28} {arm:18} {'failed' if run is None else f'{run[0]:.3f} s'}",
                      flush=True)
                seconds[arm].setdefault(name, []).extend([run[0]] if run else [])
                if run is not None and arm == "replay_with_scans":
                    steps[name] = run[1].get("replay_scan_steps", 0.0)
                return run is not None

            def measure(name: str, config: dict, repeat: int, done: tuple[str, ...] = ()) -> None:
                """One config's runs of one round: each smaller rung, then each side at full size (but ``done``)."""
                for side, ladder in ladders.items():
                    for rung in ladder:
                        log = home / "logs" / f"{side}-rung{rung.index}-{name}-{repeat}.log"
                        run = _measured(targets[side], side, config, rung, log, failures, limits)
                        rungs[side][str(rung.index)].setdefault(name, []).extend([run[0]] if run else [])
                for arm in arms:
                    if arm not in done:
                        ran(arm, name, config, repeat)

            for name, config in chosen.items():
                measure(name, config, 0)
            kept = 0
            for number in range(SAMPLE_DRAWS * args.samples):  # a sample the application refuses: the replay once
                if kept == args.samples:
                    break
                name = f"sample {number + 1}"
                chosen[name] = next(drawn)
                if ran("application", name, chosen[name], 0):
                    measure(name, chosen[name], 0, done=("application",))
                    kept += 1
                else:
                    ran("replay_with_scans", name, chosen[name], 0)
            measured = [name for name in chosen if seconds["application"][name] or name in DESIGNED]
            for repeat in range(1, args.repeats):
                for name in measured:
                    measure(name, chosen[name], repeat)
    median = {arm: {name: round(statistics.median(values), 4) for name, values in by.items() if values}
              for arm, by in seconds.items()}
    names = list(chosen)
    emit({"question": "what a replay loses without scan lengths", "workload": workload.name,
          "records": workload.records, "operations": summary.operations, "mix": dict(summary.mix),
          "scans": dict(summary.scans), "replayed_steps": steps, "repeats": args.repeats, "seed": args.seed,
          "samples": args.samples, "slices": args.slices,
          "configs": {name: {k: v for k, v in config.items() if v != catalog.defaults().get(k)}
                      for name, config in chosen.items()},
          "seconds": seconds, "median_s": median, "failures": failures,
          "replay_over_application": {arm: {name: round(median[arm][name] / median["application"][name], 3)
                                            for name in names if name in median[arm] and name in median["application"]}
                                      for arm in arms if arm != "application"},
          "over_default": {arm: {name: round(median[arm][name] / median[arm]["default"], 3) for name in median[arm]}
                           for arm in arms},
          "held": list(HELD),
          "rung_rho": {index: _rho(by, seconds, names) for index, by in rungs["replay_with_scans"].items()},
          "slice_rho": {index: _rho(by, seconds, names) for index, by in rungs.get("replay_sliced", {}).items()},
          "fidelity": {arm: fidelity([seconds[arm].get(n, []) for n in names],
                                     [seconds["application"][n] for n in names])
                       for arm in arms if arm != "application"}}, args.out)


if __name__ == "__main__":
    main()
