"""Benchmark: does a study of a minute-long application capture reach a verified verdict, with ten or more configs
at full size, within its `--time`?

Captures the psycopg shop (tests/apps/shop.py: `--clients` clients, each pausing
`--think-s` before each of its `--orders` orders, so the capture spans about a
minute, as a user's would) the way docs/replay.md says; sets its replay to the
pace a throughput objective allows (`pace = "fast"`, `objective = "elapsed_s"`:
the edit docs/replay.md describes); then runs `knobtune tune postgresql
--workload CAPTURE --time BUDGET` as a user would, and reads `show --json`: the
configs that reached full size, the verdict, its rounds, and how long the tune
took against its budget.

    .venv/bin/python bench/replay_budget.py --budget 20m --out bench/results/replay-budget/
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _cli import emit, printed_table, result_arguments, knobtune, knobtune_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the applications the tests capture too
from apps import shop  # noqa: E402
from apps.capturing import capture_application  # noqa: E402

from knobtune.units import parse_duration_s  # noqa: E402


def table(result: dict) -> str:
    """A result file as a Markdown table (bench/RESULTS.md shows it)."""
    capture = result["capture"]
    rows = [f"the psycopg shop: {capture['operations']:,} statements of {capture['sessions']} sessions over "
            f"{capture['span_s']:.0f} s, replayed at pace {result['pace']}; `tune --time {result['budget']}`, seed "
            f"{result['seed']}", "",
            "| budget | tune took | configs at full size besides the default | trials | verdict |",
            "|---|---|---|---|---|",
            f"| {result['budget']} | {result['tune_s']:.0f} s | {result['full_size_configs']} | "
            f"{', '.join(f'{n} {k}' for k, n in result['trials'].items() if n)} | {result['verdict']} |"]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--orders", type=int, default=900, help="orders per client")
    parser.add_argument("--think-s", type=float, default=0.05, help="each client's pause before an order")
    parser.add_argument("--budget", default="20m")
    parser.add_argument("--seed", type=int, default=1)
    result_arguments(parser)
    args = parser.parse_args()
    if printed_table(args, table):
        return
    with tempfile.TemporaryDirectory(prefix="knobtune-replay-budget-") as tmp:
        home = Path(tmp)
        summary = capture_application(shop.create, lambda dsn: shop.run(dsn, "psycopg", clients=args.clients,
                                                                         orders=args.orders, think_s=args.think_s),
                                      home, "shop", shop.NONDETERMINISTIC)
        capture = home / "shop.capture"
        toml = capture / "capture.toml"
        toml.write_text(toml.read_text().replace('objective = "p99_us"', 'objective = "elapsed_s"')
                        .replace('pace = "captured"', 'pace = "fast"'))
        started = time.monotonic()
        knobtune("tune", "postgresql", "--workload", str(capture), "--time", args.budget, "--study", "budget",
                 "--seed", str(args.seed), home=home / "studies")
        tune_s = time.monotonic() - started
        shown = knobtune_json("show", "budget", home=home / "studies")
    trials = shown.get("counts") or {}
    emit({"question": "a minute-long capture tuned to a verified verdict within its budget?", "pace": "fast",
          "budget": args.budget, "budget_s": parse_duration_s(args.budget), "seed": args.seed,
          "capture": {"operations": summary.operations, "sessions": summary.sessions, "span_s": summary.span_s},
          "tune_s": round(tune_s, 1), "full_size_configs": max(0, int(trials.get("complete", 0)) - 1),
          "trials": trials, "verdict": shown.get("verdict"), "time_spent": shown.get("time_spent"),
          "costs": shown.get("costs")}, args.out)


if __name__ == "__main__":
    main()
