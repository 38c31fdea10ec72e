"""What a study is asked to do: the experiment's spec, as the CLI builds it."""

from __future__ import annotations

from dataclasses import dataclass

from knobtune.knobs import Catalog
from knobtune.tuning.space import SearchSpace
from knobtune.tuning.verify import DEFAULT_TIMEOUT_FACTOR, MIN_TIMEOUT_S
from knobtune.workloads import Objective, Rung, Workload


@dataclass(frozen=True)
class TuneSettings:
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
    verify_references: bool = True  # the heuristic baselines are verified beside the candidates (not when tight)
    control_every: int = 10  # re-run the default after every N trials that reached full size (0: never)
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
    start_from_baselines: bool = False  # a new study tries the target's starting configs first (PGTune, the guide, ...)
    start_configs: tuple[tuple[str, dict], ...] = ()  # (label, changed knobs) a new study tries first (--start-from)

    # what a worker joining the study needs besides the experiment's record (tuning.worker)
    SHARED = ("sampler", "trials", "time_budget_s", "timeout_factor", "min_timeout_s", "reduction_factor",
              "verify_top", "verify_repeats", "control_every")

    @property
    def rungs(self) -> tuple[Rung, ...]:
        """The rungs a config climbs: the workload's ladder, or the one rung of ``only_rung``."""
        rungs = self.workload.rungs
        return rungs if self.only_rung is None else (rungs[self.only_rung],)
