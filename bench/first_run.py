"""Benchmark: how long a newcomer waits from a fresh clone to the demo's verdict.

Clones this checkout's commit into a temporary folder, points knobtune's cache
(`KNOBTUNE_CACHE`: the RocksDB release build, Debian's source package) at an
empty temporary folder, and runs `scripts/demo` there as the README says, timing
each stage from its output: the set-up (apt, `.venv`, the RocksDB release build,
kvbench), then the tuning up to its verdict. What this cannot start from: a
machine without the apt packages (they are this machine's; the result says how
many the demo's part would install and how many bytes apt would fetch for them),
and a PyPI download (pip's own cache is this machine's).

    .venv/bin/python bench/first_run.py --demo-time 5m --out bench/results/first-run/
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from _cli import emit, printed_table, result_arguments

HERE = Path(__file__).resolve().parents[1]
STAGES = (  # the set-up's lines -> the stage that starts there; the first line of knobtune's own starts "tune"
    ("setup: installing python", "venv"), ("setup: creating .venv", "venv"), ("setup: installing", "apt"),
    ("debian-source:", "rocksdb source"), ("rocksdb-release: building", "rocksdb build"),
    ("rocksdb-release: built", "native build"), ("rocksdb-release: up to date", "native build"))
SETUP_PREFIXES = ("setup:", "debian-source:", "rocksdb-release:", "leveldb-tunable:", "cassandra-fetch:", " ", "!!",
                  "*")


def run_demo(clone: Path, cache: Path, demo_time: str, log: Path) -> tuple[list[tuple[float, str]], float, int]:
    """Run the clone's scripts/demo; every output line with its time from the start, the whole time, the status."""
    env = {**os.environ, "KNOBTUNE_CACHE": str(cache), "KNOBTUNE_DEMO_TIME": demo_time}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    with log.open("w") as out, subprocess.Popen(["bash", "scripts/demo"], cwd=clone, env=env, text=True,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as demo:
        for line in demo.stdout or ():
            at = time.monotonic() - started
            lines.append((round(at, 1), line.rstrip()))
            out.write(f"{at:8.1f} {line}")
            out.flush()
    return lines, round(time.monotonic() - started, 1), demo.returncode


def stages(lines: list[tuple[float, str]], total_s: float) -> dict[str, float]:
    """Seconds in each stage: from the first line that starts it to the first line of the next."""
    starts: list[tuple[float, str]] = [(0.0, "start")]
    for at, line in lines:
        if starts[-1][1] == "tune":
            break
        found = next((stage for prefix, stage in STAGES if line.lower().startswith(prefix)), None)
        if found is None and line and not line.startswith(SETUP_PREFIXES):
            found = "tune"
        if found is not None and found != starts[-1][1]:
            starts.append((at, found))
    out: dict[str, float] = {}
    for (at, stage), (end, _) in zip(starts, [*starts[1:], (total_s, "end")]):
        out[stage] = round(out.get(stage, 0.0) + end - at, 1)
    return out


def apt_plan(clone: Path) -> dict[str, object]:
    """What the demo's part would install with apt on a minimal machine, as `scripts/setup --dry-run` lists it."""
    plan = subprocess.run(["bash", "scripts/setup", "--dry-run", "rocksdb"], cwd=clone, capture_output=True,
                          text=True, check=False).stdout
    packages = next((line.split(":", 1)[1].split() for line in plan.splitlines() if line.startswith("apt:")), [])
    return {"packages": packages}


def table(result: dict) -> str:
    """A result file as a Markdown table (bench/RESULTS.md shows it)."""
    rows = [f"scripts/demo from a fresh clone of {result['commit']} with an empty cache, "
            f"KNOBTUNE_DEMO_TIME={result['demo_time']}; apt packages already installed (see the note)", "",
            "| stage | seconds |", "|---|---|"]
    rows += [f"| {stage} | {seconds} |" for stage, seconds in result["stages_s"].items()]
    rows += [f"| **to the verdict** | **{result['total_s']}** ({result['total_s'] / 60:.1f} min) |", "",
             f"verdict: {result.get('verdict') or '(none: status ' + str(result['status']) + ')'}"]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo-time", default="5m", help="KNOBTUNE_DEMO_TIME (the demo's default is 5m)")
    result_arguments(parser)
    args = parser.parse_args()
    if printed_table(args, table):
        return
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="knobtune-first-run-") as tmp:
        home = Path(tmp)
        clone = home / "main"
        subprocess.run(["git", "clone", "-q", str(HERE), str(clone)], check=True)
        lines, total_s, status = run_demo(clone, home / "cache", args.demo_time, home / "demo.log")
        plan = apt_plan(clone)
    verdict = next((re.sub(r"\s+", " ", line) for _, line in reversed(lines) if "verdict" in line.lower()), None)
    emit({"question": "how long from a fresh clone to the demo's verdict?", "commit": commit,
          "demo_time": args.demo_time, "status": status, "total_s": total_s, "stages_s": stages(lines, total_s),
          "verdict": verdict, "apt": plan,
          "note": "the machine's apt packages were installed already: a fresh machine adds their download and "
                  "install"}, args.out)


if __name__ == "__main__":
    main()
