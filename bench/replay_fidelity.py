"""Benchmark: does a capture's replay rank configs as the application itself does?

The figure a user needs before trusting a replay, which no tuner publishes. For
each application of `--apps` (tests/apps/shop.py: the same shop written with
SQLAlchemy's ORM and with psycopg 3 by hand, `--clients` concurrent clients,
ids read back and used again):
1. capture it as docs/replay.md says (a server logging every statement, a dump
   when logging began, the application run, `capture postgresql --from --state`);
2. take `--configs` configs: the default, five designed changes that keep the
   data safe (small and large buffers, group commit, jit and parallel workers
   off, planner costs), then random samples of the space a study of the
   capture searches (`--seed`); `--history` gives the shop a past (shipped
   orders made before the capture) so that reads meet tables larger than a
   small server's buffers;
3. measure every config `--repeats` times three ways, interleaved (config by
   config, round after round): the replay of the capture at `pace = "think"`
   (each session keeps its captured think times) and at `pace = "fast"` (back
   to back), objective elapsed_s (replay + settle), and the application itself
   on the same restored dump under the same config, timed the same way (its
   run + the same settle: kill, recovery, checkpoint);
4. report, per pace, how the replay ranks the configs against the application
   (bench/_fidelity.py): Spearman's rho of the two rankings (medians), the
   pairs the application tells apart that the replay orders the same, and the
   share of the replay's best gain the application sees;
5. with `--rungs`, replay each config at the capture's smaller rungs too (its
   first 10% and 30%, think pace) and report each rung's rho with the full
   replay, as `show` reports a study's ladder.

    .venv/bin/python bench/replay_fidelity.py --apps orm psycopg --orders 60 --history 100000 --configs 9 \
        --repeats 3 --rungs --out bench/results/replay-fidelity/
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import optuna

from _cli import emit, printed_table, result_arguments
from _fidelity import fidelity, held_text, pairs_text, rank_agreement
from replay_transfer import _commit, _machine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the applications the tests capture too
from apps import shop  # noqa: E402
from apps.capturing import capture_application  # noqa: E402

from knobtune.knobs import Catalog, Value, load_catalog  # noqa: E402
from knobtune.server.life import Benchmarked  # noqa: E402
from knobtune.systems.postgresql.replay import PostgresReplayTarget  # noqa: E402
from knobtune.systems.postgresql.server import DB_NAME, DB_USER  # noqa: E402
from knobtune.targets import Phase  # noqa: E402
from knobtune.tuning import build_space  # noqa: E402
from knobtune.workloads import Objective, Rung, load_workload  # noqa: E402

class ApplicationTarget(PostgresReplayTarget):
    """The capture's server life (the dump restored, started under the config, settled), running the application
    itself in place of the replayer."""

    def __init__(self, *args: object, app: str, clients: int, orders: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.app, self.app_clients, self.orders = app, clients, orders

    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int):
        return super(PostgresReplayTarget, self).run_at(config, rung, timeout_s=timeout_s, log_path=log_path,
                                                        seed=seed)

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        dsn = f"host={self._home} user={DB_USER} dbname={self.database or DB_NAME}"
        started = time.monotonic()
        shop.run(dsn, self.app, clients=self.app_clients, orders=self.orders, seed=1)
        elapsed = time.monotonic() - started
        return Benchmarked(phases=(Phase("application", rung.records, elapsed, rung.records / elapsed),),
                           measured=("application",), elapsed_s=elapsed, verified=True)

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        return None


# Configs that change what matters to a shop, better and worse than the default, each keeping the data safe (the
# replay's crash check fails a config that loses commits: synchronous_commit off is not one of them); random samples
# of the space a study of the capture searches follow them.
DESIGNED: tuple[dict[str, Value], ...] = (
    {"shared_buffers": 16 * 2**20},
    {"commit_delay": 2000, "commit_siblings": 1},
    {"jit": False, "max_parallel_workers_per_gather": 0},
    {"shared_buffers": 1 * 2**30, "max_wal_size": 4 * 2**30, "checkpoint_timeout": 900.0},
    {"work_mem": 64 * 2**10, "random_page_cost": 1.1},
)


def configs(catalog: Catalog, count: int, seed: int) -> list[dict[str, Value]]:
    """The default, then the designed configs, then random samples of the space a study of a capture searches (every
    tunable knob the replay driver sets, none that trades durability), ``count`` in all."""
    space = build_space(catalog, driver=PostgresReplayTarget.driver)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out: list[dict[str, Value]] = [catalog.defaults()]
    out += [catalog.config(changes) for changes in DESIGNED[:max(0, count - 1)]]
    while len(out) < count:
        config, _ = space.suggest(study.ask())
        out.append(config)
    return out


PACES = ("think", "fast")  # the replays measured beside the application (docs/replay.md, "pace")


def one_app(app: str, args: argparse.Namespace, home: Path) -> dict:
    catalog = load_catalog("postgresql")
    summary = capture_application(lambda dsn: shop.create(dsn, history=args.history),
                                  lambda dsn: shop.run(dsn, app, clients=args.clients, orders=args.orders, seed=1),
                                  home / app, f"shop-{app}", shop.NONDETERMINISTIC)
    captured = load_workload(home / app / f"shop-{app}.capture")
    paced = {pace: dataclasses.replace(captured, objective=Objective.ELAPSED_S,
                                       drivers={"replay": {**captured.drivers["replay"], "pace": pace}})
             for pace in PACES}
    chosen = configs(catalog, args.configs, args.seed)
    sides = (*PACES, "application")
    times: dict[str, list[list[float]]] = {side: [[] for _ in chosen] for side in sides}
    work: dict[str, list[list[float]]] = {side: [[] for _ in chosen] for side in sides}
    failures: list[str] = []
    rungs: dict[int, list[list[float]]] = {}  # the first pace's smaller rungs
    with contextlib.ExitStack() as stack:
        targets = {pace: stack.enter_context(PostgresReplayTarget(catalog, paced[pace], home / app / pace))
                   for pace in PACES}
        targets["application"] = stack.enter_context(ApplicationTarget(
            catalog, paced[PACES[0]], home / app / "app", app=app, clients=args.clients, orders=args.orders))
        for round_ in range(args.repeats):
            for number, config in enumerate(chosen):
                for rung in paced[PACES[0]].rungs[:-1] if args.rungs else ():
                    log = home / app / f"rung{rung.index}-c{number}-r{round_}.log"
                    try:
                        measured = targets[PACES[0]].run(config, rung, timeout_s=600, log_path=log, seed=round_)
                        rungs.setdefault(rung.index, [[] for _ in chosen])[number].append(round(measured.elapsed_s, 4))
                    except Exception as exc:  # noqa: BLE001 - kept with its reason
                        failures.append(f"rung {rung.index} config {number} round {round_}: {exc}"[:300])
                for side in sides:
                    log = home / app / f"{side}-c{number}-r{round_}.log"
                    try:
                        measured = targets[side].run(config, paced[PACES[0]].full, timeout_s=600, log_path=log,
                                                     seed=round_)
                        times[side][number].append(round(measured.elapsed_s, 4))
                        work[side][number].append(round(measured.workload_s, 4))
                    except Exception as exc:  # noqa: BLE001 - a config the server refuses, kept with its reason
                        failures.append(f"{side} config {number} round {round_}: {exc}"[:300])
    return {"app": app, "statements": summary.operations, "sessions": summary.sessions,
            "notes": [n for n in summary.notes if "generate keys" in n], "configs": [
                {k: v for k, v in c.items() if v != catalog.defaults().get(k)} for c in chosen],
            "times_s": times, "work_s": work, "failures": failures,
            "fidelity": {pace: fidelity(times[pace], times["application"]) for pace in PACES},
            "rung_rho": {str(index): rank_agreement(by_config, times[PACES[0]]) for index, by_config in rungs.items()}}


def table(result: dict) -> str:
    """A result file as a Markdown table, one row per application and replay pace (bench/RESULTS.md shows it)."""
    rows = [f"{result['clients']} clients x {result['orders']} orders, {result['configs']} configs (seed "
            f"{result['seed']}), {result['repeats']} interleaved runs a side, commit {result['commit']}", "",
            "| application | statements | replay pace | rho (replay vs application) | pairs the application tells "
            "apart: ordered the same by the replay | replay's best: gain on the replay | on the application | held "
            "| rungs' rho with the full replay | runs failed |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for app in result["apps"]:
        ladder = ", ".join(f"rung {k}: {v}" for k, v in (app.get("rung_rho") or {}).items()) or "-"
        by_pace = app.get("fidelity") or {"fast": app}  # results before the think pace measured fast alone
        for number, (pace, figure) in enumerate(by_pace.items()):
            rows.append(f"| {app['app']} | {app['statements']:,} | {pace} | {figure.get('rho')} | {pairs_text(figure)} "
                        f"| {figure.get('replay_gain')}x | {figure.get('application_gain')}x | {held_text(figure)} "
                        f"| {ladder if number == 0 else ''} | {len(app['failures']) if number == 0 else ''} |")
    return "\n".join(rows) + ("" if "history" not in result else f"\n\nThe shop had {result['history']:,} shipped "
                                                                 "orders (3 items each) before the capture.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apps", nargs="+", default=["orm", "psycopg"], choices=sorted(shop.CLIENTS))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--orders", type=int, default=40, help="orders per client")
    parser.add_argument("--configs", type=int, default=7, help="configs measured (the default and samples)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per config, on each side")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--history", type=int, default=0,
                        help="shipped orders in the shop before the capture (3 items each)")
    parser.add_argument("--rungs", action="store_true", help="replay the capture's smaller rungs too")
    result_arguments(parser)
    args = parser.parse_args()
    if printed_table(args, table):
        return
    commit = _commit()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="knobtune-fidelity-") as tmp:
        os.environ.setdefault("KNOBTUNE_CACHE", str(Path(tmp) / "cache"))
        apps = [one_app(app, args, Path(tmp)) for app in args.apps]
    emit({"question": "does a capture's replay rank configs as the application does?", "clients": args.clients,
          "orders": args.orders, "history": args.history, "configs": args.configs, "repeats": args.repeats,
          "seed": args.seed,
          "commit": commit, "machine": _machine(), "apps": apps}, args.out)


if __name__ == "__main__":
    main()
