"""The harness bench/peers.py's peers search through: knobtune's own target and time rules, and a record of every run.

SMAC3 (``peer_smac.py``) and the hand-written Optuna script (``handwritten_optuna.search``) run every config
through ``Harness.run``: the same settled measurement as knobtune's, a time limit of a multiple of the default's
time at the rung, and no run started that cannot end inside the budget. ``tool_record`` keeps any arm's result,
knobtune's or a peer's, as the same plain data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna

from _cli import best_so_far, first_reached_s
from knobtune.errors import KnobtuneError
from knobtune.knobs import Catalog, Value
from knobtune.storage import open_store
from knobtune.systems import make_target
from knobtune.targets import FailureKind, Measurement, RunFailure, Target
from knobtune.tuning import ExperimentDoc
from knobtune.tuning.search import SearchSpace
from knobtune.workloads import Rung, Workload

# knobtune's own time rules and halving, as `tune` uses them by default
DEFAULTS = ExperimentDoc()
REACHED = 0.95  # "reached its final best": came within 5% of it


@dataclasses.dataclass(frozen=True)
class Bench:
    """What every tool is given: the system, the workload at its size, the search space, the budget."""

    catalog: Catalog
    workload: Workload
    workload_arg: str  # as given on the command line: a shipped workload's name or a workload file
    driver: str
    space: SearchSpace
    budget_s: float
    repeats: int
    home: Path  # the studies folder: knobtune's studies, every run's log, the winners' files
    knobtune_args: tuple[str, ...] = ()  # more options for knobtune's `tune` (--knobtune-args)
    # SMAC3 and the script also run small rungs scaled, as knobtune does (--peers-scaled-rungs)
    peers_scaled: bool = False

    @property
    def maximize(self) -> bool:
        return self.workload.objective.maximize

    def workload_args(self) -> list[str]:
        """The options that give knobtune's commands this bench's workload, size and driver."""
        return ["--workload", self.workload_arg, "--records", str(self.workload.records), "--driver", self.driver]



class OutOfTime(Exception):
    """The budget has no room left for the next run: it was not started."""


class Harness:
    """A peer's way to the system: knobtune's own target and time rules, and a record of every run.

    The budget's clock starts with the default's first run. The default runs first at every rung, inside the
    budget (as knobtune's does); then a run may take ``timeout_factor`` times the default's time at its rung, and
    none starts that could not end inside the budget.
    """

    def __init__(self, bench: Bench, tool: str, seed: int, target: Target) -> None:
        self.bench, self.tool, self.seed, self.target = bench, tool, seed, target
        self.started = time.monotonic()
        self.rungs = bench.workload.rungs
        self.space = bench.space.excluding({k: v for k, v in target.impossible_values().items()
                                            if k in bench.space.knobs})
        self.log_dir = bench.home / "artifacts" / f"{tool}-s{seed}"
        self.default: dict[int, Measurement] = {}  # rung index -> the default's run there
        self.runs: list[dict[str, Any]] = []  # each searched config's run: when it ended, its rung, value or failure

    def measure_default(self) -> None:
        """Start the budget's clock and run the default at every rung (the time limits and costs are relative to it).

        Raises:
            RunFailure: the default itself failed (the machine or the workload is at fault).
        """
        self.started = time.monotonic()
        for rung in self.rungs:
            self.default[rung.index] = self.target.run(self.bench.catalog.defaults(), rung,
                                                       timeout_s=self.time_left_s(),
                                                       log_path=self.log_dir / f"default-rung-{rung.index}.log",
                                                       seed=self.seed)

    @contextlib.contextmanager
    def clock_stopped(self) -> Iterator[None]:
        """The time spent inside is not the budget's: a peer's own setup (SMAC's facade, built once the default's
        runs are known), kept out of the budget as it was when it was built before the default ran."""
        stopped = time.monotonic()
        try:
            yield
        finally:
            self.started += time.monotonic() - stopped

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def time_left_s(self) -> float:
        return self.bench.budget_s - self.elapsed_s()

    def limit_s(self, rung: Rung) -> float:
        """How long a run at ``rung`` may take: knobtune's rule, a multiple of the default's time there."""
        measurement = DEFAULTS.measurement
        return max(measurement.timeout_factor * self.default[rung.index].elapsed_s, measurement.min_timeout_s)

    def fits(self, rung: Rung) -> bool:
        return self.time_left_s() >= self.limit_s(rung)

    def config_of(self, params: dict[str, object]) -> dict[str, Value]:
        """The full config knobtune's own ``suggest`` makes of these params (relations mended as knobtune does)."""
        config, _ = self.space.suggest(optuna.trial.FixedTrial(params))
        return config

    def run(self, config: dict[str, Value], rung: Rung) -> float:
        """The objective's value of ``config`` at ``rung``.

        Raises:
            RunFailure: the run failed for the config's sake (refused, crash, timeout, data loss, memory).
            OutOfTime: the run could not end inside the budget; it was not started.
            KnobtuneError: the machine or knobtune failed, never the config's fault.
        """
        if not self.fits(rung):
            raise OutOfTime()
        log = self.log_dir / f"run-{len(self.runs):04d}-rung-{rung.index}.log"
        try:
            as_run = self.bench.catalog.at_fraction(config, rung.fraction) if self.bench.peers_scaled else config
            value = self.target.run(as_run, rung, timeout_s=self.limit_s(rung), log_path=log, seed=self.seed).value(
                self.bench.workload.objective)
        except RunFailure as failure:
            self.runs.append({"at_s": self.elapsed_s(), "rung": rung.index, "failure": failure.kind.value})
            if failure.kind is FailureKind.TOOL:
                raise KnobtuneError(f"{self.tool}: a run failed for a reason that is not the config's: "
                                    f"{failure.reason} (log: {failure.log_path or log})") from None
            raise
        self.runs.append({"at_s": self.elapsed_s(), "rung": rung.index, "value": value})
        return value

    def cost(self, value: float, rung: Rung) -> float:
        """A value as a cost relative to the default at the same rung (1: as good; lower is better)."""
        return 1.0 / self.bench.workload.objective.speedup(value, self.default[rung.index].value(
            self.bench.workload.objective))

    def failed_cost(self, rung: Rung) -> float:
        """The cost of a failed run: knobtune's, no better than a run that used its whole time limit."""
        return max(self.limit_s(rung) / self.default[rung.index].elapsed_s, 1.0)

    def record(self, trials: int, winner: dict[str, Value] | None, claim_value: float | None,
               no_winner: str | None = None) -> dict[str, Any]:
        """What the bench keeps of a peer's search (the same fields as knobtune's record)."""
        objective, full = self.bench.workload.objective, self.rungs[-1]
        default = self.default[full.index].value(objective)
        full_runs = [(r["at_s"], r["value"]) for r in self.runs if r["rung"] == full.index and "value" in r]
        claim = None
        if claim_value is not None:
            ratio = objective.speedup(claim_value, default)
            claim = {"ratio": ratio, "text": f"best single run {objective.show(claim_value)} vs the default's "
                                             f"{objective.show(default)}: {ratio:.2f}x"}
        return tool_record(self.bench, self.tool, self.seed, wall_s=self.elapsed_s(), default_value=default,
                           trials=trials, runs=len(self.runs),
                           outcomes={"runs": dict(Counter(r.get("failure", "ran") for r in self.runs))},
                           timeline=best_so_far(full_runs, self.bench.maximize), winner=winner, claim=claim,
                           no_winner=no_winner)


@contextlib.contextmanager
def harness(bench: Bench, tool: str, seed: int) -> Iterator[Harness]:
    """A Harness around knobtune's target for the bench's system, in the studies folder's scratch; closed after."""
    store = open_store(bench.home)
    with make_target(bench.catalog, bench.workload, store.worker_scratch(), bench.driver) as target:
        yield Harness(bench, tool, seed, target)


def tool_record(bench: Bench, tool: str, seed: int, *, wall_s: float, default_value: float, trials: int, runs: int,
                outcomes: dict[str, int], timeline: list[tuple[float, float]], winner: dict[str, Value] | None,
                claim: dict[str, Any] | None, no_winner: str | None) -> dict[str, Any]:
    """One tool's result for one seed, as plain data; ``outcomes`` counts knobtune's trials or a peer's runs."""
    catalog = bench.catalog
    return {"tool": tool, "seed": seed, "wall_s": round(wall_s, 1), "default_value": default_value,
            "maximize": bench.maximize, "trials": trials, "runs": runs, "outcomes": outcomes,
            "timeline": timeline, "reached_s": first_reached_s(timeline, REACHED, bench.maximize),
            "claim": claim, "winner": catalog.changed(winner) if winner is not None else None,
            "no_winner": no_winner,
            "unsafe": {k: v.value for k, v in catalog.unsafe_in(winner).items()} if winner is not None else {}}
