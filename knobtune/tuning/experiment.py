"""The experiment: what a study is asked to do, written on the study once and read back from it.

``knobtune tune`` and ``rank`` build an ``Experiment`` from the command line;
the study's process writes it on the study (``write``); ``worker``,
``explain`` and ``sweep --around`` read it back (``read_experiment``), so
each of them runs the same system, driver, workload at the same size, knobs,
objective, settle and limits as the study did. The stored keys are those of
``tuning.attrs``: studies written by earlier releases read the same way.
"""

from __future__ import annotations

import os
import socket
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

import knobtune
from knobtune.errors import UsageError
from knobtune.knobs import Catalog, load_catalog
from knobtune.storage import StudyStore
from knobtune.targets import know_system, user_system_file
from knobtune.tuning import attrs
from knobtune.tuning.space import SearchSpace, build_space
from knobtune.tuning.verify import DEFAULT_TIMEOUT_FACTOR, MIN_TIMEOUT_S
from knobtune.workloads import Objective, Rung, Workload, available_workloads, load_workload


@dataclass(frozen=True)
class Experiment:
    study_name: str
    catalog: Catalog
    workload: Workload
    space: SearchSpace
    objective: Objective
    driver: str | None = None
    sampler: str = "tpe"
    seed: int = 42
    trials: int | None = None  # the study's total of sampled trials (the default not counted)
    time_budget_s: float | None = None  # wall-clock budget of this invocation
    timeout_factor: float = DEFAULT_TIMEOUT_FACTOR
    min_timeout_s: float = MIN_TIMEOUT_S
    reduction_factor: int = 3
    verify_top: int = 3
    verify_repeats: int = 5
    verify_known: bool = True  # the known configs users run instead (PGTune, the guide) are verified beside the result
    control_every: int = 10  # re-run the default after every N trials that reached full size (0: never)
    warm_up: bool = True  # the first default on a machine runs once at full size, not counted, before its ladder
    settle: bool = True  # a run's time includes settling the store afterwards (False: the raw window)
    scale_rungs: bool = True  # a small rung runs the config's data-sized knobs scaled to its share of the data
    memory_limit_bytes: int | None = None  # configs planned or measured above it are infeasible
    max_recovery_s: float | None = None  # full-size runs whose reopen after a crash takes longer are infeasible
    only_rung: int | None = None  # every config runs at this rung of the ladder only, none climbs (ranking samples)
    ranking: dict | None = None  # the ranking the searched knobs came from: {"study", "top_k", "knobs"} (--ranking)
    machine: str | None = None  # this machine's name in the study (default: the host name)
    allow_mixed_machines: bool = False  # let machines of another kind work on the study
    joining: bool = False  # a worker joining a study: it searches, never verifies, and keeps the study's budget
    sampler_seed: int | None = None  # the sampler's seed when it is not ``seed`` (each worker draws its own configs)
    try_known_configs: bool = False  # a new study tries the target's known configs first (PGTune, the guide, ...)
    use_rules: bool = False  # read the system's diagnosis rules: starts and a narrowed first search (tuning.guide)
    start_configs: tuple[tuple[str, dict], ...] = ()  # (label, changed knobs) a new study tries first (--start-from)
    production: tuple[int, int] | None = None  # (data bytes, memory bytes) in production: the ratio trials are held to
    planned_limit_bytes: int | None = None  # the production ratio's planned memory for the benchmark (set on open)

    # what a worker joining the study needs besides the experiment's record
    SEARCH = ("sampler", "trials", "time_budget_s", "timeout_factor", "min_timeout_s", "reduction_factor",
              "verify_top", "verify_repeats", "control_every", "warm_up")

    def planned_memory_limit(self) -> int | None:
        """The planned memory (caches, buffers) a config may hold: the lower of --memory-limit and the production
        ratio's share of the benchmark's data (None: neither)."""
        limits = [limit for limit in (self.memory_limit_bytes, self.planned_limit_bytes) if limit is not None]
        return min(limits) if limits else None

    @property
    def rungs(self) -> tuple[Rung, ...]:
        """The rungs a config climbs: the workload's ladder, or the one rung of ``only_rung``."""
        rungs = self.workload.rungs
        return rungs if self.only_rung is None else (rungs[self.only_rung],)

    @property
    def scaled_rungs(self) -> bool:
        """Whether small rungs run configs scaled to their share of the data (the catalog must say how). Not for a
        capture: its rungs replay its first operations onto all the data it started from."""
        return self.scale_rungs and self.catalog.scales_rungs and self.workload.capture is None

    def search_record(self) -> dict[str, Any]:
        """How the study searches: what ``write`` stores for workers, each run of ``tune`` anew."""
        return {key: getattr(self, key) for key in self.SEARCH}

    def record(self, driver: str, system_version: str, machine: dict[str, Any], units_machine: str) -> dict[str, Any]:
        """The study attributes that describe the experiment, written once when the study is new."""
        w = self.workload
        return {
            attrs.TOOL_VERSION: knobtune.__version__,
            **({attrs.TOOL_COMMIT: commit} if (commit := knobtune.source_commit()) else {}),
            attrs.SYSTEM: self.catalog.system,
            **({attrs.SYSTEM_FILE: str(f)} if (f := user_system_file(self.catalog.system)) else {}),
            attrs.SYSTEM_VERSION: system_version,
            attrs.DRIVER: driver,
            attrs.MACHINE: machine,
            attrs.UNITS_MACHINE: units_machine,
            attrs.WORKLOAD: {"name": w.name, "records": w.records, "ladder": list(w.ladder), "key_size": w.key_size,
                             "value_size": w.value_size, "source": str(w.source)},
            **({attrs.CAPTURE: w.capture.record()} if w.capture is not None else {}),
            attrs.OBJECTIVE: self.objective.value,
            attrs.SEARCHED_KNOBS: list(self.space.knobs),
            attrs.ALLOW_UNSAFE: self.space.allow_unsafe,
            attrs.ALLOW_OPERATIONAL: self.space.allow_operational,
            attrs.LEFT_OUT: {k: v.value for k, v in self.space.left_out.items()},
            attrs.SEED: self.seed,
            attrs.SETTLED: self.settle,
            attrs.SCALED_RUNGS: self.scaled_rungs,
            attrs.MEMORY_LIMIT: self.memory_limit_bytes,
            attrs.MAX_RECOVERY: self.max_recovery_s,
            **({attrs.PRODUCTION: self.production_record()} if self.production is not None else {}),
            **({attrs.ONLY_RUNG: self.only_rung} if self.only_rung is not None else {}),
            **({attrs.RANKED_BY: self.ranking} if self.ranking is not None else {}),
        }

    def production_record(self) -> dict[str, Any]:
        """The production ratio a study holds its trials to, as stored (``show`` prints it)."""
        data, memory = self.production  # type: ignore[misc]
        return {"data_bytes": data, "memory_bytes": memory, "planned_limit_bytes": self.planned_limit_bytes}

    def check_matches(self, recorded: dict[str, Any]) -> None:
        """Refuse to go on with a study created for another experiment: its values would not compare.

        Raises:
            UsageError: the system, objective, workload, its size, settling, scaling or kind of study differ.
        """
        name = self.study_name
        for key, given in ((attrs.SYSTEM, self.catalog.system), (attrs.OBJECTIVE, self.objective.value),
                           (attrs.WORKLOAD, self.workload.name)):
            stored = recorded.get(key)
            stored = stored.get("name") if isinstance(stored, dict) else stored
            if stored is not None and stored != given:
                raise UsageError(f"study '{name}' was created with {key} '{stored}', not '{given}'. "
                                 f"Fix: use the same {key}, or another --study name")
        _same_flag(name, recorded.get(attrs.SETTLED), self.settle, "settled", "unsettled", "--unsettled",
                   "runs: their times would not compare")
        _same_flag(name, recorded.get(attrs.SCALED_RUNGS), self.scaled_rungs, "scaled", "unscaled",
                   "--unscaled-rungs", "small rungs: their values would not compare")
        if attrs.SYSTEM in recorded and recorded.get(attrs.ONLY_RUNG) != self.only_rung:
            raise UsageError(f"study '{name}' is a " + ("ranking study: `knobtune rank` resumes it"
                             if recorded.get(attrs.ONLY_RUNG) is not None else "tuning study, not a ranking")
                             + ". Fix: use another --study name")
        records = (recorded.get(attrs.WORKLOAD) or {}).get("records")
        if records is not None and records != self.workload.records:
            raise UsageError(f"study '{name}' was created with {records:,} records, not {self.workload.records:,}: "
                             "its default's times would not compare. Fix: use the same --records, or another --study "
                             "name")


def _same_flag(study: str, stored: bool | None, given: bool, yes: str, no: str, option: str, why: str) -> None:
    if stored is not None and stored != given:
        raise UsageError(f"study '{study}' was created with {yes if stored else no} {why}. Fix: "
                         + (f"drop {option}" if stored else f"add {option}") + ", or use another --study name")


def study_workload(recorded: dict[str, Any]) -> Workload:
    """The workload a study ran (from its record), at the size it ran.

    Raises:
        UsageError: it was a file of the study's first machine that is not here.
    """
    workload = recorded.get(attrs.WORKLOAD) or {}
    source = Path(str(workload.get("source", "")))
    name = str(workload.get("name", "?"))
    if not source.is_file() and name not in available_workloads():
        raise UsageError(f"the study's workload '{name}' is a file of its first machine ({source}), not here. "
                         "Fix: copy it to the same path on this machine")
    spec = load_workload(source if source.is_file() else name)
    records = workload.get("records")
    return spec.scaled(records) if records and records != spec.records else spec


def read_experiment(study: optuna.Study, *, machine: str | None = None, joining: bool = False,
                    allow_mixed_machines: bool = False) -> Experiment:
    """The experiment a study recorded, to run more of it: a worker joining it (``joining``), an explanation, a
    sweep around its result.

    Raises:
        UsageError: the study was never started, or by a knobtune before it recorded its experiment; a worker
            cannot join a ranking; its workload file is not on this machine.
    """
    recorded = study.user_attrs
    name = study.study_name
    search = recorded.get(attrs.SETTINGS)
    if attrs.SYSTEM not in recorded or (joining and search is None):
        raise UsageError(f"study '{name}' has no record of how it searches (it was never started, or by a "
                         "knobtune before workers). Fix: start it with `knobtune tune` first")
    search = search or {}
    if joining and attrs.ONLY_RUNG in recorded:
        raise UsageError(f"study '{name}' is a knob ranking: its Latin hypercube is drawn by one process. "
                         "Fix: resume it with `knobtune rank`, or join a tuning study")
    know_system(recorded[attrs.SYSTEM], recorded.get(attrs.SYSTEM_FILE))
    catalog = load_catalog(recorded[attrs.SYSTEM])
    driver = recorded.get(attrs.DRIVER)
    space = build_space(catalog, recorded[attrs.SEARCHED_KNOBS], recorded.get(attrs.ALLOW_UNSAFE, False),
                        driver=driver, allow_operational=recorded.get(attrs.ALLOW_OPERATIONAL, False))
    seed = recorded.get(attrs.SEED, 42)
    worker = f"{machine or socket.gethostname()}:{socket.gethostname()}:{os.getpid()}"  # seeds differ per process
    return Experiment(
        study_name=name, catalog=catalog, workload=study_workload(recorded), space=space,
        objective=Objective(recorded[attrs.OBJECTIVE]), driver=driver, seed=seed,
        settle=recorded.get(attrs.SETTLED, True), scale_rungs=recorded.get(attrs.SCALED_RUNGS, False),
        memory_limit_bytes=recorded.get(attrs.MEMORY_LIMIT), max_recovery_s=recorded.get(attrs.MAX_RECOVERY),
        production=(production["data_bytes"], production["memory_bytes"]) if (
            production := recorded.get(attrs.PRODUCTION)) else None,
        planned_limit_bytes=production.get("planned_limit_bytes") if production else None,
        only_rung=recorded.get(attrs.ONLY_RUNG), ranking=recorded.get(attrs.RANKED_BY), machine=machine,
        allow_mixed_machines=allow_mixed_machines, joining=joining,
        sampler_seed=seed + zlib.crc32(worker.encode()) % 100_000 + 1 if joining else None,
        **{key: search[key] for key in Experiment.SEARCH if key in search})


def join_experiment(store: StudyStore, study_name: str, machine: str | None = None,
                    allow_mixed_machines: bool = False) -> Experiment:
    """The experiment of ``study_name`` for a worker on this machine: it draws its own configs (its sampler's seed
    is its own) and never verifies; the process that started the study does, once the others have stopped.

    Raises:
        StudyNotFoundError: no such study in the storage.
        UsageError: see ``read_experiment``.
    """
    return read_experiment(store.load(study_name), machine=machine, joining=True,
                           allow_mixed_machines=allow_mixed_machines)
