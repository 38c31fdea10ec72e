"""Benchmark: how many trials per minute one PostgreSQL storage serves to N workers, and so how many workers it serves.

Issue 51, part 3. Each worker is a process running knobtune's own study loop
(``Tuner``: the first as `tune`, the others joining as `worker` from the
study's record), so every storage call a real worker makes is made: the stale-trial and interrupted-trial checks, its
default and its controls, ask, the config and owner written as user attrs,
the heartbeat, an intermediate value and a pruning check per rung, tell. Only
the database run is a stand-in (``storage_instruments.StandIn``): it sleeps ``--run-ms`` per rung
and returns a value drawn from the config, so the pruner prunes as it would.
The workers are processes of one machine (``--machine bench``): its default is
measured once and its controls are shared. As machines of their own, each would
first measure its own default, which with 16 workers on 2 cores did not end
inside a window (a late worker's default then fails the arm).

One PostgreSQL storage server is started as the bench's child (knobtune's
``StorageServer``: a Unix socket, its own scratch folder, removed at the end
even on failure). Per arm (N workers, a run time, direct or through Optuna's
``GrpcStorageProxy``) the loop runs for ``--window-s`` (the study's own time
budget), and the bench records: trials finished per minute in the steady part
of the window (from when every worker had begun its first trial to 2 s before
the budget's end), every storage call's latency by name (ask =
``create_new_trial``, tell = ``set_trial_state_values`` to a finished state,
heartbeat = ``record_heartbeat``), storage calls and their time per trial, the
CPU the PostgreSQL server (and the proxy) spent per trial, errors, and whether
every trial asked for was told exactly once with none left RUNNING.

The knee: the first N at which doubling the workers raised trials/min by less
than 10%, or at which a p99 of ask, tell or heartbeat passed ``--bound-ms``.
Everything runs on this one machine: the workers share its cores with the
server, so the figure is a floor of what a storage on a machine of its own
serves (the server's CPU per trial says how far). The proxy arm sends the
heartbeat calls to PostgreSQL directly: the proxy has none (docs/workers.md).

    .venv/bin/python bench/storage_load.py \
        --out bench/results/storage-load/$(date -u +%Y%m%d)-$(git rev-parse --short HEAD).json
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import datetime
import importlib.util
import json
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from _cli import emit
from knobtune.knobs import load_catalog
from knobtune.storage import HEARTBEAT_S
from knobtune.server.process import process_tree, spawn, stop_group
from knobtune.systems.postgresql.storage_server import StorageServer
from knobtune.tuning import Experiment, Tuner, attrs, build_space
from knobtune.tuning.document import read_experiment
from knobtune.workloads import load_workload
from storage_instruments import CALLS, STAND_IN, TimedStore, stand_in

MACHINE = "bench"  # every worker's machine name: one machine, one default
STEADY_END_S = 2.0  # the steady window ends this long before the budget's end (no trial starts that cannot finish)
KEY_CALLS = {"ask": "create_new_trial", "tell": "set_trial_state_values:finished", "heartbeat": "record_heartbeat"}


# ------------------------------------------------------------ one worker process


@dataclasses.dataclass(frozen=True)
class Plan:
    """One arm: N workers on a new study, a run time, direct or through the proxy, for a window."""

    url: str
    home: Path
    study_name: str
    workers: int
    run_s: float
    window_s: float
    max_trials: int
    system: str
    workload: str
    records: int
    sampler: str
    proxy_port: int | None = None

    @property
    def mode(self) -> str:
        return "direct" if self.proxy_port is None else "proxy"


def _die_with_parent(parent: int) -> None:
    """This process gets SIGKILL when the bench dies (Linux's parent-death signal), even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def experiment_of(plan: Plan) -> Experiment:
    """What the study's first process (`tune`) runs: the system's whole search space through the stand-in, within
    the window, no verification."""
    catalog = load_catalog(plan.system)
    workload = load_workload(plan.workload).scaled(plan.records)
    return Experiment.of(catalog, workload, build_space(catalog, driver=STAND_IN), study=plan.study_name,
                         driver=STAND_IN, search__sampler=plan.sampler, budget__trials=plan.max_trials,
                         budget__time_s=plan.window_s, proof__verify_top=0, proof__repeats=0,
                         research__warm_up=False, placement__machine=MACHINE, research__rules=False,
                         research__try_known_configs=False)


def _joined(plan: Plan, limit_s: float = 60.0) -> Experiment:
    """The experiment a worker reads back from the study once its first process has recorded it."""
    deadline, storage = time.monotonic() + limit_s, optuna.storages.RDBStorage(plan.url)
    while time.monotonic() < deadline:
        try:
            study = optuna.load_study(study_name=plan.study_name, storage=storage)
            # its record is whole once it asked for its first trial (the record's keys are written one by one)
            if study.get_trials(deepcopy=False):
                return read_experiment(study, machine=MACHINE, joining=True)
        except KeyError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"study {plan.study_name} was not started within {limit_s:.0f} s")


def work(plan: Plan, index: int, parent: int, out: Path) -> None:
    """One worker: knobtune's study loop through the stand-in on ``plan``'s study; what it asked of the storage
    is written to ``out`` (JSON), with the error that stopped it, if one did."""
    _die_with_parent(parent)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # the proxy: chosen knowingly
    store = TimedStore(home=plan.home, url=plan.url, proxy_port=plan.proxy_port)
    error = None
    started = os.times()
    try:
        experiment = experiment_of(plan) if index == 0 else _joined(plan)
        Tuner(experiment, store).run()
    except Exception as exc:  # recorded as the arm's error, with its first line
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        traceback.print_exc()
    ended = os.times()
    out.write_text(json.dumps({"index": index, "error": error, "latency_ms": CALLS.latency_ms,
                               "errors": dict(CALLS.errors), "asked": CALLS.asked, "told": CALLS.told,
                               "cpu_s": ended.user + ended.system - started.user - started.system}))


# ------------------------------------------------------------ CPU of the server, the proxy and the machine


def _ticks(pid: int, with_children: bool) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks + (int(fields[13]) + int(fields[14]) if with_children else 0)  # cutime, cstime: reaped children


def cpu_s_of(pid: int | None) -> float:
    """The CPU seconds a process and its children (live or reaped) have used (PostgreSQL: the postmaster and its
    backends)."""
    if pid is None:
        return 0.0
    ticks = _ticks(pid, True) + sum(_ticks(child, True) for child in process_tree(pid) if child != pid)
    return ticks / os.sysconf("SC_CLK_TCK")


def postmaster_pid(url: str) -> int | None:
    """The PostgreSQL server's pid from its data folder (``StorageServer`` keeps it under the socket's folder)."""
    host = make_url(url).query.get("host")
    try:
        return int((Path(str(host)) / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


# ------------------------------------------------------------ one arm


def run_arm(plan: Plan, proxy_pid: int | None = None) -> dict[str, Any]:
    """Run ``plan`` (N forked workers) to its window's end; its figures and checks."""
    folder = plan.home / "calls" / plan.study_name
    folder.mkdir(parents=True, exist_ok=True)
    server = postmaster_pid(plan.url)
    # Optuna's tables made before the workers start (processes creating them at once collide), and no pooled
    # connection kept here: the workers are forked from this process
    storage = optuna.storages.RDBStorage(plan.url, engine_kwargs={"poolclass": NullPool})
    before = (cpu_s_of(server), cpu_s_of(proxy_pid), machine_ticks())
    go = time.time()
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=work, args=(plan, i, os.getpid(), folder / f"worker-{i}.json"), daemon=True)
                 for i in range(plan.workers)]
    for process in processes:
        process.start()
    limit = time.monotonic() + plan.window_s + 90
    for process in processes:
        process.join(max(0.0, limit - time.monotonic()))
    killed = [i for i, p in enumerate(processes) if p.is_alive()]
    for i in killed:
        processes[i].kill()
        processes[i].join()
    after = (cpu_s_of(server), cpu_s_of(proxy_pid), machine_ticks())
    reports = [json.loads(path.read_text()) for i in range(plan.workers)
               if (path := folder / f"worker-{i}.json").exists()]
    study = optuna.load_study(study_name=plan.study_name, storage=storage)
    deadline = study.user_attrs.get(attrs.DEADLINE) or go + plan.window_s
    result = figures(plan, study, reports, go, deadline)
    busy, total = (a - b for a, b in zip(after[2], before[2], strict=True))
    trials = result["trials_finished"]
    result["cpu"] = {"postgresql_s": round(after[0] - before[0], 2), "proxy_s": round(after[1] - before[1], 2),
                     "workers_s": round(sum(r["cpu_s"] for r in reports), 2),
                     "workers_ms_per_trial": round(1000 * sum(r["cpu_s"] for r in reports) / trials, 2)
                     if trials else None,
                     "postgresql_ms_per_trial": round(1000 * (after[0] - before[0]) / trials, 2) if trials else None,
                     "proxy_ms_per_trial": round(1000 * (after[1] - before[1]) / trials, 2)
                     if trials and proxy_pid else None,
                     "machine_busy": round(busy / total, 3) if total else None}
    result["errors"]["workers_killed"] = killed
    result["errors"]["workers_without_report"] = plan.workers - len(reports)
    return result


def _percentiles(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    p50, p99 = np.percentile(values, [50, 99])
    return {"n": len(values), "p50_ms": round(float(p50), 2), "p99_ms": round(float(p99), 2)}


def figures(plan: Plan, study: optuna.Study, reports: list[dict], go: float, deadline: float) -> dict[str, Any]:
    """The arm's trials/min in its steady window, latencies, storage calls per trial, errors and checks."""
    trials = study.get_trials(deepcopy=False)
    at = datetime.datetime.fromtimestamp
    first_by_worker: dict[str, datetime.datetime] = {}  # each worker's first trial began
    for t in sorted((t for t in trials if t.datetime_start), key=lambda t: t.datetime_start):
        first_by_worker.setdefault(t.user_attrs.get(attrs.WORKER) or "", t.datetime_start)
    first_by_worker.pop("", None)
    steady_from = max(first_by_worker.values(), default=at(deadline))
    steady_to = at(deadline - STEADY_END_S)
    finished = [t for t in trials if t.state.is_finished() and t.datetime_complete is not None]
    in_steady = [t for t in finished if steady_from <= t.datetime_complete <= steady_to]
    steady_s = max(0.0, (steady_to - steady_from).total_seconds())
    latency: dict[str, list[float]] = {}
    for report in reports:
        for name, values in report["latency_ms"].items():
            latency.setdefault(name, []).extend(values)
    asked = [trial_id for r in reports for trial_id in r["asked"]]
    told = Counter(trial_id for r in reports for trial_id in r["told"])
    calls = sum(len(v) for v in latency.values())
    call_ms = sum(sum(v) for v in latency.values())
    states = Counter(t.state.name for t in trials)
    return {
        "mode": plan.mode, "run_ms": round(plan.run_s * 1000), "workers": plan.workers, "study": plan.study_name,
        "window_s": round(deadline - go, 1), "steady_s": round(steady_s, 1),
        "workers_started": len(first_by_worker),
        "trials_per_min": round(60 * len(in_steady) / steady_s, 1) if steady_s > 0 else None,
        "trials_finished": len(finished), "states": dict(states),
        "outcomes": dict(Counter(str(t.user_attrs.get(attrs.OUTCOME)) for t in finished)),
        "latency": {key: _percentiles(latency.get(name, [])) for key, name in KEY_CALLS.items()},
        "calls": {name: _percentiles(values) for name, values in sorted(latency.items())},
        "storage_calls_per_trial": round(calls / len(finished), 1) if finished else None,
        "storage_ms_per_trial": round(call_ms / len(finished), 2) if finished else None,
        "errors": {"workers": [r["error"] for r in reports if r["error"]],
                   "calls": dict(sum((Counter(r["errors"]) for r in reports), Counter()))},
        "checks": {"asked": len(asked), "asked_twice": len(asked) - len(set(asked)),
                   "told_twice": sum(1 for n in told.values() if n > 1),
                   "asked_never_told": len(set(asked) - set(told)), "told_not_asked": len(set(told) - set(asked)),
                   "running_left": states.get("RUNNING", 0)},
        "asked_ids": sorted(set(asked)), "told_ids": dict(sorted(told.items())),
    }


# ------------------------------------------------------------ the proxy


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


PROXY_CODE = ("import sys, optuna; optuna.logging.set_verbosity(optuna.logging.WARNING); "
              "optuna.storages.run_grpc_proxy_server(optuna.storages.get_storage(sys.argv[1]), host='127.0.0.1', "
              "port=int(sys.argv[2]))")


@contextlib.contextmanager
def grpc_proxy(url: str, folder: Path) -> Iterator[tuple[int, int]]:
    """Optuna's gRPC proxy in front of ``url``, on loopback, as this process's child: (its port, its pid).

    Raises:
        RuntimeError: it did not answer within 30 s (the message names its log).
    """
    port, log = free_port(), folder / "proxy.log"
    process = spawn([sys.executable, "-c", PROXY_CODE, url, str(port)], log_path=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gRPC proxy did not start. Fix: see {log}")
            time.sleep(0.2)
        yield port, process.pid
    finally:
        stop_group(process)


def grpc_missing() -> str | None:
    """Why the proxy arm cannot run here (None: it can). Looked for, not imported: gRPC must not be started in a
    process that forks (the workers import it after their fork)."""
    for module, package in (("grpc", "grpcio"), ("google.protobuf", "protobuf")):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"{package} is not installed (Fix: .venv/bin/pip install -e '.[bench]')"
    return None


# ------------------------------------------------------------ the knee and what it means for a user


def knee(arms: list[dict], bound_ms: float) -> dict[str, Any]:
    """Where more workers stop paying, for one series of arms (by N): the first N whose doubling raised trials/min
    by less than 10%, or whose p99 of ask, tell or heartbeat passed ``bound_ms``; and the peak trials/min."""
    arms = sorted(arms, key=lambda a: a["workers"])
    rates = [a["trials_per_min"] or 0.0 for a in arms]
    peak = max(range(len(arms)), key=lambda i: rates[i])
    why, at = "no knee up to the largest N measured", None
    for i, arm in enumerate(arms):
        slow = [k for k, v in arm["latency"].items() if v.get("p99_ms", 0) > bound_ms]
        if slow:
            why, at = f"p99 of {', '.join(slow)} over {bound_ms:g} ms", arm["workers"]
            break
        if i + 1 < len(arms) and rates[i + 1] < 1.1 * rates[i]:
            why, at = f"{arms[i + 1]['workers']} workers raised trials/min by {rates[i + 1] / rates[i] - 1:+.0%}" \
                if rates[i] else "no trials", arm["workers"]
            break
    return {"knee_workers": at, "why": why, "peak_trials_per_min": rates[peak],
            "peak_at_workers": arms[peak]["workers"]}


def workers_served(peak_per_min: float, postgresql_ms_per_trial: float | None, trial_s: float) -> dict[str, Any]:
    """How many workers running trials of ``trial_s`` one storage serves: each asks for 60 / trial_s trials a minute,
    so peak x trial_s / 60 of them at the measured peak; and, from the server's own CPU per trial, how many per core
    of a server on a machine of its own (trial_s / CPU s per trial)."""
    served = {"trial_s": trial_s, "at_measured_peak": int(peak_per_min * trial_s / 60)}
    if postgresql_ms_per_trial:
        served["per_server_core"] = int(trial_s / (postgresql_ms_per_trial / 1000))
    return served


# ------------------------------------------------------------ the table


def table(result: dict) -> str:
    """A result as Markdown: per series and worker count, trials/min, the p99 of ask, tell and heartbeat, the CPU
    per trial of the storage server and of the workers, and whether every trial was told once; then the knees
    and the workers one storage serves."""
    def p99(arm: dict, call: str) -> str:
        value = arm["latency"][call].get("p99_ms")
        return "-" if value is None else f"{value:.0f} ms"

    def ms(value: float | None) -> str:
        return "(not read)" if not value else f"{value:.0f} ms"

    lines = ["| series | workers | trials/min | ask p99 | tell p99 | heartbeat p99 | PostgreSQL CPU/trial "
             "| workers' CPU/trial | told once, none left running |", "|---|---|---|---|---|---|---|---|---|"]
    for name, arms in result["series"].items():
        for arm in arms:
            checks = arm["checks"]
            exact = not (checks["asked_twice"] or checks["told_twice"] or checks["asked_never_told"]
                         or checks["told_not_asked"] or checks["running_left"])
            cpu = arm["cpu"]
            lines.append(f"| {name} | {arm['workers']} | {arm['trials_per_min'] or '-'} | {p99(arm, 'ask')} "
                         f"| {p99(arm, 'tell')} | {p99(arm, 'heartbeat')} | {ms(cpu['postgresql_ms_per_trial'])} "
                         f"| {ms(cpu['workers_ms_per_trial'])} | {'yes' if exact else 'NO'} |")
    lines.append("")
    for name, knee_ in result.get("knees", {}).items():
        lines.append(f"- {name}: peak {knee_['peak_trials_per_min']} trials/min at {knee_['peak_at_workers']} "
                     f"workers; knee at {knee_['knee_workers']} ({knee_['why']})")
    for served in result.get("workers_served", []):
        lines.append(f"- trials of {served['trial_s']:.0f} s: {served['at_measured_peak']} workers at the measured "
                     f"peak, {served.get('per_server_core', '-')} per core the storage server spends")
    return "\n".join(lines)


# ------------------------------------------------------------ the bench


def series(args: argparse.Namespace, url: str, home: Path, run_ms: int, proxy: tuple[int, int] | None) -> list[dict]:
    arms = []
    for n in args.workers:
        plan = Plan(url=url, home=home, study_name=f"load-{'proxy' if proxy else 'direct'}-{run_ms}ms-{n}w",
                    workers=n, run_s=run_ms / 1000, window_s=args.window_s, max_trials=args.max_trials,
                    system=args.system, workload=args.workload, records=args.records, sampler=args.sampler,
                    proxy_port=proxy[0] if proxy else None)
        with stand_in(args.system, plan.run_s):
            arm = run_arm(plan, proxy[1] if proxy else None)
        arm.pop("asked_ids")
        arm.pop("told_ids")
        print(f"{plan.mode} {run_ms} ms x {n}: {arm['trials_per_min']} trials/min, ask p99 "
              f"{arm['latency']['ask'].get('p99_ms')} ms, tell p99 {arm['latency']['tell'].get('p99_ms')} ms, "
              f"postgresql {arm['cpu']['postgresql_ms_per_trial']} ms CPU/trial, errors {arm['errors']}", flush=True)
        arms.append(arm)
    return arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--run-ms", type=lambda s: [int(n) for n in s.split(",")], default=[0, 50],
                        help="the stand-in run's time per rung, one series each")
    parser.add_argument("--proxy-run-ms", type=lambda s: [int(n) for n in s.split(",") if n], default=[0],
                        help="the run times also measured through Optuna's gRPC proxy ('' for none)")
    parser.add_argument("--window-s", type=float, default=15.0, help="each arm's time budget")
    parser.add_argument("--max-trials", type=int, default=20000, help="each arm's trial budget (a bound)")
    parser.add_argument("--bound-ms", type=float, default=100.0, help="a p99 of ask, tell or heartbeat over it: knee")
    parser.add_argument("--trial-s", type=lambda s: [float(n) for n in s.split(",")], default=[10.0, 60.0, 300.0],
                        help="real trial times to turn the figure into workers served")
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--sampler", default="random",
                        help="random by default: a sampler's own CPU is the worker machine's, not the storage's")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.monotonic()
    result: dict[str, Any] = {"question": __doc__.splitlines()[0], "args": {k: str(v) for k, v in vars(args).items()},
                              "heartbeat_s": HEARTBEAT_S, "optuna": optuna.__version__, "cpus": os.cpu_count(),
                              "shared_machine": "other helpers' tests may run beside it: a capacity figure",
                              "series": {}}
    with tempfile.TemporaryDirectory(prefix="knobtune-bench-storage-load-") as folder, StorageServer() as url:
        home = Path(folder)
        for run_ms in args.run_ms:
            result["series"][f"direct-{run_ms}ms"] = series(args, url, home, run_ms, None)
        missing = grpc_missing()
        if args.proxy_run_ms and missing:
            result["proxy_skipped"] = missing
            print(f"the proxy arm is skipped: {missing}", flush=True)
        elif args.proxy_run_ms:
            with grpc_proxy(url, home) as proxy:
                for run_ms in args.proxy_run_ms:
                    result["series"][f"proxy-{run_ms}ms"] = series(args, url, home, run_ms, proxy)
    result["knees"] = {name: knee(arms, args.bound_ms) for name, arms in result["series"].items()}
    zero = result["knees"].get("direct-0ms")
    if zero:
        peak_arm = next(a for a in result["series"]["direct-0ms"] if a["workers"] == zero["peak_at_workers"])
        result["workers_served"] = [workers_served(zero["peak_trials_per_min"],
                                                   peak_arm["cpu"]["postgresql_ms_per_trial"], t) for t in args.trial_s]
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    result["load_average"] = {"before": [round(v, 2) for v in load_before],
                              "after": [round(v, 2) for v in os.getloadavg()]}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    emit(result, args.out)


if __name__ == "__main__":
    main()
