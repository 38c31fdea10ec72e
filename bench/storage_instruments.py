"""bench/storage_load.py's instruments: a stand-in for the database run, and every storage call timed.

``StandIn`` sleeps a given time per rung and returns a value drawn from the config, so knobtune's study loop around
it (ask, the pruning checks, tell, the heartbeat) is the real one while the database is not there. ``TimedStorage``
passes every call of Optuna's storage interface on and times it into this process's ``CALLS`` (each worker is a
fresh fork: its own); ``TimedStore`` is knobtune's store of studies with that storage, direct or through Optuna's
gRPC proxy.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.trial import TrialState

from knobtune.reconnecting import _CALLS as STORAGE_CALLS  # every call of Optuna's storage interface
from knobtune.storage import StudyStore
from knobtune.systems import SYSTEMS, TARGETS, spelling_of
from knobtune.targets import FailureKind, Measurement, Phase, RunFailure, Target
from knobtune.workloads import Rung, Workload

STAND_IN = "stand-in"  # the driver name the stand-in target is registered under
HEARTBEAT_CALLS = ("record_heartbeat", "_get_stale_trial_ids", "get_heartbeat_interval",
                   "get_heartbeat_stale_trial_callback")


# ------------------------------------------------------------ the stand-in for a database run


class StandIn(Target):
    """A target whose run sleeps ``run_s`` and measures a time drawn from the config and rung (0.5-1.5 x ``run_s``,
    at least 1 ms): the study loop around it is knobtune's own, the database is not there."""

    system = "rocksdb"  # replaced per catalog when registered (``register_stand_in``)
    driver = STAND_IN
    run_s = 0.0

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        return {}

    def preflight(self) -> None:
        pass

    def run_at(self, config: Mapping[str, Any], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        if timeout_s is not None and self.run_s > timeout_s:
            time.sleep(max(0.0, timeout_s))
            raise RunFailure(FailureKind.TIMEOUT, f"the stand-in run did not end within {timeout_s:.2f} s", log_path)
        time.sleep(self.run_s)
        shown = json.dumps(sorted((k, str(v)) for k, v in config.items()))
        digest = hashlib.sha256(f"{shown}|{rung.index}".encode()).digest()
        elapsed_s = max(self.run_s, 0.001) * (0.5 + int.from_bytes(digest[:4], "big") / 2**32)
        phase = Phase("run", rung.records, elapsed_s, rung.records / elapsed_s)
        return Measurement(elapsed_s=elapsed_s, phases=(phase,), measured=("run",), log_path=log_path, verified=True)

    def version(self) -> str:
        return "stand-in"


@contextlib.contextmanager
def stand_in(system: str, run_s: float) -> Iterator[None]:
    """While the block runs, driver ``stand-in`` of ``system`` runs ``StandIn`` sleeping ``run_s`` per rung, in this
    process and the workers it forks; it takes the knob names of the system's default driver, so the space is a
    real study's."""
    spelling = spelling_of(system, SYSTEMS[system].default_driver)
    TARGETS[(system, STAND_IN)] = type("StandInRun", (StandIn,), {"system": system, "run_s": run_s,
                                                                  "spelling": spelling})
    try:
        yield
    finally:
        TARGETS.pop((system, STAND_IN), None)


# ------------------------------------------------------------ every storage call, timed


class Calls:
    """What one worker process asked of the storage: each call's latency by name, the calls that raised, the trials
    it asked for (created running or took from the queue) and those it told to a finished state."""

    def __init__(self) -> None:
        self.latency_ms: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        self.asked: list[int] = []
        self.told: list[int] = []

    def timed(self, name: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        key = name
        if name == "set_trial_state_values":
            state = kwargs.get("state", args[1] if len(args) > 1 else None)
            key = f"{name}:{'finished' if state is not None and state.is_finished() else 'running'}"
        started = time.perf_counter()
        try:
            result = call(*args, **kwargs)
        except Exception as exc:
            self.errors[f"{name}: {type(exc).__name__}"] += 1
            raise
        finally:
            self.latency_ms.setdefault(key, []).append((time.perf_counter() - started) * 1000)
        if name == "create_new_trial":
            template = kwargs.get("template_trial", args[1] if len(args) > 1 else None)
            if template is None or template.state == TrialState.RUNNING:  # a WAITING template is a queued config
                self.asked.append(result)
        elif key == "set_trial_state_values:running" and result:
            self.asked.append(args[0] if args else kwargs["trial_id"])  # a queued trial taken
        elif key == "set_trial_state_values:finished" and result:
            self.told.append(args[0] if args else kwargs["trial_id"])
        return result


CALLS = Calls()  # this process's (each worker is a fresh fork: its own)


class TimedStorage(BaseStorage, BaseHeartbeat):
    """Optuna's storage interface passed on to ``main``, the heartbeat's calls to ``heartbeats`` (the same storage,
    or PostgreSQL itself behind a proxy that has none), each call timed into ``CALLS``."""

    def __init__(self, main: BaseStorage, heartbeats: BaseStorage) -> None:
        self._main, self._heartbeats = main, heartbeats


def _passed_on(name: str) -> Callable[..., Any]:
    def call(self: TimedStorage, *args: Any, **kwargs: Any) -> Any:
        inner = self._heartbeats if name in HEARTBEAT_CALLS else self._main
        return CALLS.timed(name, getattr(inner, name), *args, **kwargs)
    call.__name__ = call.__qualname__ = name
    return call


for _name in STORAGE_CALLS:
    setattr(TimedStorage, _name, _passed_on(_name))
abc.update_abstractmethods(TimedStorage)  # each abstract call is now attached


@dataclasses.dataclass(frozen=True)
class TimedStore(StudyStore):
    """knobtune's store of studies whose storage is timed; through the gRPC proxy on ``proxy_port`` when given."""

    proxy_port: int | None = None

    def storage(self, on_stale: Any = None, on_note: Any = None) -> BaseStorage:
        direct = super().storage(on_stale, on_note)
        if self.proxy_port is None:
            return TimedStorage(direct, direct)
        proxy = optuna.storages.GrpcStorageProxy(host="127.0.0.1", port=self.proxy_port)
        proxy.wait_server_ready(timeout=30)
        return TimedStorage(proxy, direct)
