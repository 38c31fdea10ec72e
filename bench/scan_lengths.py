"""Benchmark: what a RocksDB replay loses without scan lengths, on a scan-heavy workload.

An inbox (bench/workloads/inbox-pages.toml: 35% of its operations a SeekForPrev
and 20 Prev calls) is captured once (`knobtune capture rocksdb --workload`, which
records its scan lengths beside the trace), and the same capture is copied
without them. Under each config, interleaved, `--repeats` times:
- the application's own run: kvbench runs the workload's measured phase;
- the replay with scan lengths, and the replay without them (seeks alone).
No settle (`settle=False`): each figure is the measured phase alone (the run
phase; the replay), so the three count the same operations. It prints and stores
(`--out`) the median seconds of each, each replay's time as a fraction of the
application's under the same config, and each config's time against the default
on all three (does the replay see what the application sees?).

    .venv/bin/python bench/scan_lengths.py --records 50000 --operations 300000 --repeats 5 \
        --out bench/results/scan-lengths/
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
from pathlib import Path

from _cli import emit

from knobtune.knobs import load_catalog
from knobtune.systems import make_target
from knobtune.systems.rocksdb.capture import from_workload
from knobtune.workloads import load_workload

WORKLOAD = Path(__file__).parent / "workloads" / "inbox-pages.toml"
CONFIGS = {"default": {}, "block_size=64KiB": {"block_size": "64KiB"},
           "cache=1MiB,block_size=1KiB": {"cache_size": "1MiB", "block_size": "1KiB"}}


def without_scans(capture: Path, copy: Path) -> Path:
    """The capture as a trace alone: its scans file and the section's line naming it left out."""
    shutil.copytree(capture, copy)
    (copy / "scans").unlink()
    lines = (copy / "capture.toml").read_text().splitlines()
    (copy / "capture.toml").write_text("\n".join(line for line in lines if line != 'scans = "scans"') + "\n")
    return copy


def table(result: dict) -> str:
    """A result file as a Markdown table: each config's time against the default's, on the application and on
    each replay (bench/RESULTS.md shows it)."""
    over = result["over_default"]
    scans = result["scans"]
    rows = [f"{result['workload']}: {result['operations']:,} operations, {scans['scans']:,} scans "
            f"({scans['matched']:,} matched, {scans['next'] + scans['prev']:,} steps), median of {result['repeats']} "
            "interleaved runs, "
            "measured phase alone", "",
            "| config | application | replay with scan lengths | replay of seeks only |", "|---|---|---|---|"]
    for name in over["application"]:
        rows.append(f"| {name} | {result['median_s']['application'][name]} s ({over['application'][name]}x) "
                    f"| {result['median_s']['replay_with_scans'][name]} s ({over['replay_with_scans'][name]}x) "
                    f"| {result['median_s']['replay_seeks_only'][name]} s ({over['replay_seeks_only'][name]}x) |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--operations", type=int, help="the run phase's operations (default: the file's, scaled)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    catalog = load_catalog("rocksdb")
    workload = load_workload(WORKLOAD).scaled(args.records)
    if args.operations:
        workload = dataclasses.replace(workload, operations=args.operations)
    with tempfile.TemporaryDirectory(prefix="knobtune-scan-lengths-") as tmp:
        home = Path(tmp)
        summary = from_workload(workload, home / "with.capture", "inbox", None)
        arms = {"application": workload, "replay_with_scans": load_workload(home / "with.capture"),
                "replay_seeks_only": load_workload(without_scans(home / "with.capture", home / "seeks.capture"))}
        seconds: dict[str, dict[str, list[float]]] = {arm: {name: [] for name in CONFIGS} for arm in arms}
        steps: dict[str, float] = {}
        for repeat in range(args.repeats):
            for name, changes in CONFIGS.items():
                for arm, arm_workload in arms.items():
                    driver = "kvbench" if arm == "application" else None
                    with make_target(catalog, arm_workload, home / "scratch", driver, settle=False) as target:
                        run = target.run(catalog.config(changes), arm_workload.full, timeout_s=None,
                                         log_path=home / "logs" / f"{arm}-{name}-{repeat}.log", seed=1)
                    measured = sum(p.seconds for p in run.phases if p.name in run.measured)
                    seconds[arm][name].append(measured)
                    if arm == "replay_with_scans":
                        steps[name] = run.counters.get("replay_scan_steps", 0.0)
                    print(f"repeat {repeat} {name:28} {arm:18} {measured:.3f} s", flush=True)
    median = {arm: {name: round(statistics.median(values), 4) for name, values in by.items()}
              for arm, by in seconds.items()}
    emit({"question": "what a replay loses without scan lengths", "workload": workload.name,
          "records": workload.records, "operations": summary.operations, "mix": dict(summary.mix),
          "scans": dict(summary.scans), "replayed_steps": steps, "repeats": args.repeats, "seconds": seconds,
          "median_s": median,
          "replay_over_application": {arm: {name: round(median[arm][name] / median["application"][name], 3)
                                            for name in CONFIGS} for arm in arms if arm != "application"},
          "over_default": {arm: {name: round(median[arm][name] / median[arm]["default"], 3) for name in CONFIGS}
                           for arm in arms}}, args.out)


if __name__ == "__main__":
    main()
