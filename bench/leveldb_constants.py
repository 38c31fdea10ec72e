"""Benchmark: a LevelDB tuning notebook's experiment, then LevelDB's compile-time constants as knobs (issue 16).

1. write_buffer_size alone on fillrandom, as the notebook did: a 10-trial study
   (`tune --knobs write_buffer_size --trials 10`), then `sweep --around` it,
   which says whether the study's optimum lies within the noise of the
   sweep's best point.
2. Every runtime knob (driver kvbench, LevelDB's system library) and every
   knob plus dbformat.h's constants (driver kvbench-tunable, the patched
   build), each a study of the same --time; then both winners and the default
   side by side, interleaved, on the patched build (its defaults measure as
   the system library does: tests/test_leveldb_tunable.py).

    .venv/bin/python bench/leveldb_constants.py --time 5m --out bench/results/leveldb-constants/
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _cli import emit, interval, knobtune, knobtune_json, verified_speedup


def winner_file(home: Path, study: str) -> Path | None:
    """The study's result exported as a JSON config; None when it kept the default."""
    summary = knobtune_json("show", study, home=home)
    if summary.get("result_trial") is None:
        return None
    path = home / f"{study}.json"
    path.write_text(knobtune("export", study, "--format", "json", home=home))
    return path



def table(result: dict) -> str:
    """A result as a Markdown table: each study's own verdict, then the winners side by side."""
    side = result["side_by_side"]
    rows = [f"Side by side on the patched build, {len(side['labels'])} configs, noise {side['noise_cv']:.1%}:", "",
            "| config | median | vs the default (95% CI) | the study's own verified figure |", "|---|---|---|---|"]
    own = {"runtime": result["runtime"]["verified"], "constants": result["constants"]["verified"]}
    for row in side["speedups"]:
        label = row["config"]
        vs = "-" if label == "default" else interval(row if "ratio" in row else None, "none verified")
        its_own = interval(own[label], "none verified") if label in own else "-"
        rows.append(f"| {label} | {row['median']:,.0f} | {vs} | {its_own} |")
    notebook = result["notebook_study"]
    rows += ["", "write_buffer_size alone, 10 trials (the notebook's study): "
                 f"{interval(notebook['verified'], 'none verified')} ({notebook['verdict']})"]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, help="fillrandom's size (default: the workload's 1,000,000)")
    parser.add_argument("--time", default="6m", help="budget of each all-knob study")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="knobtune-bench-leveldb-"))
    size = ["--records", str(args.records)] if args.records else []
    common = ["--workload", "fillrandom", *size, "--seed", str(args.seed)]
    result: dict = {"args": vars(args) | {"out": str(args.out)}}

    notebook = knobtune_json("tune", "leveldb", *common, "--knobs", "write_buffer_size", "--trials", "10",
                             "--study", "wbs", home=home)
    result["notebook_study"] = {"verdict": notebook["verdict"], "verified": verified_speedup(notebook),
                                "config": notebook["result_config"], "counts": notebook["counts"]}
    sweep = knobtune_json("sweep", "leveldb", *common, "--knob", "write_buffer_size", "--repeats", "3",
                          *(["--around", "wbs"] if notebook.get("result_trial") is not None else []), home=home)
    result["sweep"] = sweep

    for study, driver in (("runtime", "kvbench"), ("constants", "kvbench-tunable")):
        summary = knobtune_json("tune", "leveldb", *common, "--driver", driver, "--time", args.time,
                                "--study", study, home=home)
        result[study] = {"verdict": summary["verdict"], "verified": verified_speedup(summary),
                         "config": summary["result_config"], "counts": summary["counts"]}
    configs = [("default", "default")] + [(study, str(path)) for study in ("runtime", "constants")
                                          if (path := winner_file(home, study))]
    compared = knobtune_json("compare", "leveldb", *common, "--driver", "kvbench-tunable",
                             *[arg for _, config in configs for arg in ("--config", config)],
                             "--repeats", str(args.repeats), home=home)
    result["side_by_side"] = {
        "labels": [label for label, _ in configs], "noise_cv": compared.get("noise_cv"),
        "speedups": [{"config": label, **(candidate.get("speedup") or {}), "median": candidate.get("median"),
                      "failure": candidate.get("failure")}
                     for (label, _), candidate in zip(configs, compared["candidates"])]}
    emit(result, args.out)


if __name__ == "__main__":
    main()
