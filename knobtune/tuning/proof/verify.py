"""Prove configs against each other: repeated, interleaved runs at one rung (A B C A B C ...).

Interleaving spreads the machine's drift over every config alike. ``run_interleaved`` runs a fixed number of
rounds and gives each config, against the first (the one the others are measured against), a speedup with a 95%
bootstrap interval; ``run_sequential`` (a study's verification) adds rounds while a candidate's interval straddles
1 and the time budget holds them, judged by ``knobtune.analysis.sequential``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from enum import Enum
from typing import Any

from knobtune.analysis import Speedup, noise, speedup
from knobtune.analysis.sequential import Decision, SequentialPlan, SequentialTest, judge, stored_verdict
from knobtune.knobs import Value
from knobtune.targets import CounterDoc, FailureKind, Measurement, RunFailure, Target
from knobtune.tuning.document import relative_limit_s
from knobtune.tuning.search import counter_meanings
from knobtune.workloads import Objective, Rung


@dataclass(frozen=True)
class Candidate:
    label: str
    config: Mapping[str, Value]
    # a known config users run instead (PGTune, the guide): measured beside, never the winner
    known_config: bool = False
    tried_first: str = ""  # the known config the study tried first that this is (its label), or "" for the search's
    trial: int | None = None  # the study's trial whose config this is (None: the default, a known config, a file)

    @property
    def named(self) -> str:
        """The label, and which known config it is when the study tried it first."""
        return f"{self.label} ({self.tried_first}, tried first)" if self.tried_first else self.label


@dataclass(frozen=True)
class RunProblem:
    """Why a candidate's run gave no value: its kind (only TOOL is the machine's or knobtune's) and the reason."""

    kind: FailureKind
    reason: str

    @property
    def config_fault(self) -> bool:
        return self.kind is not FailureKind.TOOL

    def __str__(self) -> str:
        return self.reason


MACHINE_RETRIES = 2  # a run the machine or knobtune failed is run again this many times before it stops a candidate


@dataclass
class CandidateRuns:
    """Every repeat of one candidate: values, per-run summaries, and the first failure if any."""

    candidate: Candidate
    values: list[float] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    failure: RunProblem | None = None
    retries: int = 0  # runs repeated because the machine or knobtune failed them
    cost_counters: Mapping[str, CounterDoc] = field(default_factory=dict)  # the system's counters that are costs
    carried: Mapping[str, Any] = field(default_factory=dict)  # a resumed verification's stored latency_us and costs

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def latency_us(self) -> dict[str, dict[str, float]]:
        """Per phase, the median over runs of each latency the driver printed (µs: percentiles, mean, max) and of
        the phase's own time (``seconds``): what reconciles latency with the objective (docs/report.md). In a
        resumed verification, over this invocation's runs; the stored ones' when it ran none."""
        if not self.measurements and self.carried:
            return dict(self.carried.get("latency_us") or {})
        table: dict[str, dict[str, list[float]]] = {}
        for measurement in self.measurements:
            for phase in measurement.phases:
                for name, value in (("p50", phase.p50_us), ("p99", phase.p99_us), ("p99.9", phase.p999_us),
                                    ("mean", phase.mean_us), ("max", phase.max_us), ("seconds", phase.seconds)):
                    if value is not None:
                        table.setdefault(phase.name, {}).setdefault(name, []).append(value)
        return {phase: {k: statistics.median(v) for k, v in values.items()} for phase, values in table.items()}

    def measured_phases(self) -> frozenset[str] | None:
        """The phases the objective counts (``Measurement.measured``: kvbench's run phase, not its load); None when
        not known (a resumed verification whose stored runs, of an earlier release, did not say)."""
        if not self.measurements:
            stored = self.carried.get("measured_phases")
            return None if stored is None else frozenset(stored)
        return frozenset(name for measurement in self.measurements for name in measurement.measured)

    def costs(self) -> dict[str, Any]:
        """Medians over runs of what the runs cost besides the objective: settle, recovery, peak memory, and the
        system's counters that are costs (``cost`` in its counters.toml: Cassandra's GC pauses), each with its
        name and unit. In a resumed verification, as ``latency_us``."""
        if not self.measurements and self.carried:
            return dict(self.carried.get("costs") or {})
        def median_of(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return statistics.median(known) if known else None

        runs = self.measurements
        counters = {name: {"name": doc.cost, "unit": doc.unit, "median": median}
                    for name, doc in self.cost_counters.items()
                    if (median := median_of([m.counters.get(name) for m in runs])) is not None}
        return {
            "workload_s": median_of([m.workload_s for m in runs]),
            "settle_s": median_of([m.settle.settle_s if m.settle else None for m in runs]),
            "recovery_s": median_of([m.recovery_s for m in runs]),
            "peak_rss_bytes": median_of([m.peak_rss_bytes for m in runs]),
            **({"counters": counters} if counters else {}),
        }


class Stop(str, Enum):
    """Why a sequential comparison added no more rounds."""

    SETTLED = "settled"  # no candidate's interval straddles 1 with its estimate above 1
    FUTILE = "futile"  # those still open would show a gain too rarely in the rounds within reach (given up)
    MOST = "most"  # the planned maximum of rounds ran
    BUDGET = "budget"  # another round would not fit in the time budget
    BROKEN = "broken"  # the machine failed a run for good, or the first candidate failed


@dataclass(frozen=True)
class Comparison:
    """The outcome of interleaved repeats: the first candidate is what the others are measured against."""

    objective: Objective
    rung: Rung
    repeats: int
    runs: tuple[CandidateRuns, ...]
    speedups: Mapping[str, Speedup]  # label -> speedup over the first candidate
    noise: float  # the first candidate's relative spread
    plan: SequentialPlan | None = None  # the looks of a sequential comparison (None: ``repeats`` rounds, fixed)
    rounds: int | None = None  # the rounds a sequential comparison ran (the first candidate's)
    stopped: Stop | None = None  # why a sequential comparison added no more rounds

    @property
    def first(self) -> CandidateRuns:
        return self.runs[0]

    @property
    def machine_failure(self) -> RunProblem | None:
        """The failure of the machine or of knobtune that stopped a candidate (after retries), if one did: the
        comparison is then incomplete, and says nothing against that candidate."""
        return next((r.failure for r in self.runs if r.failure is not None and not r.failure.config_fault), None)

    def winner(self) -> CandidateRuns | None:
        """The candidate with the best median among those significantly better than the first; none when the
        machine failed a run for good (the comparison is incomplete)."""
        if self.machine_failure is not None:
            return None
        better = [r for r in self.runs[1:] if r.failure is None and r.candidate.label in self.speedups
                  and self.speedups[r.candidate.label].significant and not r.candidate.known_config]
        return max(better, key=lambda r: self.speedups[r.candidate.label].ratio, default=None)

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "objective": self.objective.value,
            "rung": {"index": self.rung.index, "records": self.rung.records},
            "repeats": self.repeats,
            **({"rounds": self.rounds, "max_rounds": plan.most, "error": plan.error, "looks": list(plan.looks()),
                "stopped": self.stopped.value if self.stopped else None} if plan is not None else {}),
            "noise_cv": self.noise,
            "candidates": [
                {
                    "label": r.candidate.label,
                    "reference": r.candidate.known_config,  # the stored spelling of earlier releases
                    **({"trial": r.candidate.trial} if r.candidate.trial is not None else {}),
                    **({"tried_first": r.candidate.tried_first} if r.candidate.tried_first else {}),
                    "config": dict(r.candidate.config),
                    "values": r.values,
                    "median": r.median,
                    "failure": None if r.failure is None else r.failure.reason,
                    **({"failure_kind": r.failure.kind.value} if r.failure is not None else {}),
                    **({"retries": r.retries} if r.retries else {}),
                    "latency_us": r.latency_us(),
                    **({"measured_phases": sorted(phases)} if (phases := r.measured_phases()) is not None else {}),
                    "costs": r.costs(),
                    **({"speedup": vars(self.speedups[r.candidate.label]),
                        "significant": self.speedups[r.candidate.label].significant}
                       if r.candidate.label in self.speedups else {}),
                }
                for r in self.runs
            ],
            "winner": (w.candidate.label if (w := self.winner()) else None),
            "winner_trial": (w.candidate.trial if (w := self.winner()) else None),
        }


def run_interleaved(target: Target, candidates: Sequence[tuple[Candidate, Mapping[str, Value]]], rung: Rung, *,
                    repeats: int, objective: Objective, seed: int, log_dir: Path,
                    timeout_s: float | None = None, timeout_factor: float | None = None,
                    on_run: Callable[[int, CandidateRuns, float | None], None] | None = None) -> Comparison:
    """Run each candidate ``repeats`` times, round-robin; the others are measured against the first.

    ``candidates`` pairs each Candidate with its full config. A candidate whose
    run fails (refused, data loss, timeout, memory) is dropped from later
    rounds with the reason kept; one planned above the target's memory limit
    is never run. Every run may take ``timeout_s``; without it, with
    ``timeout_factor``, every run after the first candidate's first may take
    that factor times that run (at least 2 s).
    """
    runs = _planned(target, candidates)
    rounds = _Rounds(target, candidates, runs, rung, objective, seed, log_dir, timeout_s, timeout_factor, on_run)
    for _ in range(repeats):
        rounds.run(range(len(runs)))
    base = runs[0]
    speedups = {r.candidate.label: speedup(base.values, r.values, objective.maximize)
                for r in runs[1:] if r.values and base.values and r.failure is None}
    return Comparison(objective, rung, repeats, tuple(runs), speedups, noise(base.values))


def stopped_open(verification: Mapping[str, Any]) -> str | None:
    """The candidate a stored verification left open when the time budget stopped it (its interval straddling 1,
    its estimate above 1), the likeliest to settle first; None when it settled, or stopped for another reason."""
    if verification.get("stopped") != Stop.BUDGET.value:
        return None
    open_ones = [(c["speedup"].get("ratio", 0.0), str(c["label"])) for c in verification.get("candidates") or []
                 if isinstance(c, dict) and not c.get("reference") and isinstance(c.get("speedup"), dict)
                 and c["speedup"].get("decision") == Decision.OPEN.value]
    return max(open_ones)[1] if open_ones else None


@dataclass(frozen=True)
class Resumed:
    """A verification the time budget stopped while a candidate's interval still straddled 1 with its estimate
    above 1, as the study stored it (``Comparison.to_dict``): a later one of the same candidates goes on with its
    rounds and looks instead of starting again (``run_sequential``). Going on is the plan the verification had: a
    round is added while a candidate is open, up to ``--max-rounds``; each round still pairs runs made side by side,
    so the time between the two invocations does not enter the test."""

    rounds: int  # the rounds it ran
    stored: Mapping[str, Mapping[str, Any]]  # label -> its stored record: values, failure, speedup, latency, costs

    @classmethod
    def of(cls, verification: Mapping[str, Any], labels: Sequence[str], plan: SequentialPlan) -> Resumed | None:
        """``verification`` (what a study stored) to go on with, or None: unless the time budget stopped it with a
        candidate open, it ran the candidates ``labels`` (the default first) under ``plan``'s rounds and each
        candidate's share of the error, and kept each candidate's looks (a study of an earlier version did not), it
        starts again."""
        records = verification.get("candidates") or []
        rounds = verification.get("rounds")
        held = [c.get("label") for c in records]
        if stopped_open(verification) is None or held[:1] != list(labels[:1]) \
                or sorted(map(str, held)) != sorted(labels) or not isinstance(rounds, int) or rounds >= plan.most \
                or verification.get("max_rounds") != plan.most or verification.get("error") != plan.error \
                or len(records[0].get("values") or []) != rounds:
            return None
        judged = [stored_verdict(c["speedup"]) if c.get("speedup") else None
                  for c in records[1:] if not c.get("reference") and not c.get("failure")]
        if any(v is None or v.alpha != plan.alpha for v in judged):
            return None
        return cls(rounds, {c["label"]: c for c in records})

    def take_up(self, runs: Sequence[CandidateRuns], test: SequentialTest) -> None:
        """Give ``runs`` their stored values, failures, latency and costs, and ``test`` each candidate's looks."""
        for record in runs:
            stored = self.stored[record.candidate.label]
            record.values = [float(v) for v in stored.get("values") or []]
            record.carried = {"latency_us": stored.get("latency_us") or {}, "costs": stored.get("costs") or {},
                              **({"measured_phases": stored["measured_phases"]} if "measured_phases" in stored else {})}
            if stored.get("failure") and record.failure is None:
                record.failure = RunProblem(FailureKind(stored.get("failure_kind", FailureKind.REFUSED.value)),
                                            str(stored["failure"]))
            if record.candidate.label in test.looked and (verdict := stored_verdict(stored.get("speedup") or {})):
                test.resume(record.candidate.label, verdict)


def run_sequential(target: Target, candidates: Sequence[tuple[Candidate, Mapping[str, Value]]], rung: Rung, *,
                   plan: SequentialPlan, objective: Objective, seed: int, log_dir: Path,
                   timeout_s: float | None = None, room: Callable[[float], bool] | None = None,
                   on_run: Callable[[int, CandidateRuns, float | None], None] | None = None,
                   resumed: Resumed | None = None, run_s: float | None = None) -> Comparison:
    """Run ``plan.first`` interleaved rounds of every candidate, then, while a candidate (not a known config)
    straddles 1 with its estimate above 1, more rounds of the default and those candidates, looking after each
    ``plan.step`` up to ``plan.most`` (``knobtune.analysis.sequential``). At each look, a candidate that the rounds
    still within reach (the plan's, or fewer when the time budget holds fewer) would show to be a gain less than one
    time in fifty, at its estimate so far, is given up (``Decision.FUTILE``): it runs no more.

    A round past the first look starts only when ``room(seconds)`` says the time budget holds it (its seconds
    estimated from each of its candidates' latest run); None: no time budget. The known configs run the first
    look's rounds only (they inform, they decide nothing). Failures as in ``run_interleaved``; a machine that keeps
    failing, or a default that fails, ends the rounds.

    ``resumed``: an earlier verification of these candidates that the time budget stopped; its rounds and looks go
    on (``Resumed``), a round's seconds estimated from ``run_s`` per run until this invocation's runs time one.
    """
    runs = _planned(target, candidates)
    by_label = {r.candidate.label: i for i, r in enumerate(runs)}
    test = SequentialTest(plan, [r.candidate.label for r in runs[1:] if not r.candidate.known_config],
                          objective.maximize)
    rounds = _Rounds(target, candidates, runs, rung, objective, seed, log_dir, timeout_s, None, on_run)
    if resumed is not None:
        resumed.take_up(runs, test)
        rounds.done = resumed.rounds
        if run_s is not None:
            rounds.wall_s[0] = run_s

    def still_open() -> list[int]:
        return [by_label[label] for label in test.open() if runs[by_label[label]].failure is None]

    def reachable() -> int:
        """The most rounds the verification can still reach: the plan's, or fewer when the budget holds fewer
        rounds of the default and the candidates still open."""
        if room is None:
            return plan.most
        return rounds.done + rounds_that_fit(room, rounds.seconds([0] + still_open()), plan.most - rounds.done)

    stopped = Stop.MOST
    for look in plan.looks():
        while rounds.done < look:
            first_look = rounds.done < plan.first
            active = [0] + ([i for i in range(1, len(runs))] if first_look else still_open())
            if not first_look and room is not None and not room(rounds.seconds(active)):
                stopped = Stop.BUDGET
                break
            rounds.run(active)
        test.look(runs[0].values, {r.candidate.label: r.values for r in runs[1:] if r.failure is None},
                  reachable=reachable())
        if stopped is Stop.BUDGET:
            break
        if runs[0].failure is not None or any(r.failure is not None and not r.failure.config_fault for r in runs):
            stopped = Stop.BROKEN
            break
        if not still_open():
            futile = any(v.decision == Decision.FUTILE.value for v in test.verdicts.values())
            stopped = Stop.FUTILE if futile else Stop.SETTLED
            break
    base = runs[0]
    speedups: dict[str, Speedup] = {label: verdict for label, verdict in test.verdicts.items()
                                    if runs[by_label[label]].failure is None}
    for r in runs[1:]:
        paired = min(len(r.values), len(base.values))
        if r.candidate.known_config and r.failure is None and paired >= 2:
            speedups[r.candidate.label] = judge(base.values, r.values, objective.maximize, plan, [paired])
    return Comparison(objective, rung, plan.first, tuple(runs), speedups, noise(base.values), plan=plan,
                      rounds=rounds.done, stopped=stopped)


def rounds_that_fit(room: Callable[[float], bool], round_s: float, most: int) -> int:
    """How many more rounds of ``round_s`` seconds ``room`` holds, up to ``most``."""
    fit = 0
    while fit < most and room((fit + 1) * round_s):
        fit += 1
    return fit


def _planned(target: Target, candidates: Sequence[tuple[Candidate, Mapping[str, Value]]]) -> list[CandidateRuns]:
    """A record per candidate; one planned above the target's memory limit starts failed (it is never run)."""
    costs = {name: doc for name, doc in counter_meanings(target.catalog.system).items() if doc.cost}
    runs = [CandidateRuns(candidate, cost_counters=costs) for candidate, _ in candidates]
    for (_, config), record in zip(candidates, runs):
        over = target.catalog.memory.over_limit(config, target.memory_limit_bytes)
        record.failure = None if over is None else RunProblem(FailureKind.MEMORY, over)
    return runs


class _Rounds:
    """Runs rounds of some of the candidates, in their order, and keeps what each run took on the wall clock."""

    def __init__(self, target: Target, candidates: Sequence[tuple[Candidate, Mapping[str, Value]]],
                 runs: list[CandidateRuns], rung: Rung, objective: Objective, seed: int, log_dir: Path,
                 timeout_s: float | None, timeout_factor: float | None,
                 on_run: Callable[[int, CandidateRuns, float | None], None] | None) -> None:
        self.target, self.configs, self.runs, self.rung = target, [c for _, c in candidates], runs, rung
        self.objective, self.seed, self.log_dir = objective, seed, log_dir
        self.timeout_s, self.timeout_factor, self.on_run = timeout_s, timeout_factor, on_run
        self.logs = _log_names([candidate.label for candidate, _ in candidates])  # each candidate's own
        self.done = 0  # rounds run
        self.wall_s: dict[int, float] = {}  # candidate index -> its latest run's wall-clock seconds

    def seconds(self, active: Sequence[int]) -> float:
        """A round of ``active``'s wall-clock time, from each one's latest run (the first candidate's when unknown)."""
        return sum(self.wall_s.get(i, self.wall_s.get(0, 0.0)) for i in active)

    def run(self, active: Sequence[int]) -> None:
        """One round: each candidate in ``active`` that has not failed runs once."""
        runs, repeat = self.runs, self.done
        for i in active:
            record = runs[i]
            if record.failure is not None:
                continue
            limit = self.timeout_s
            if limit is None and self.timeout_factor is not None and runs[0].measurements:
                limit = relative_limit_s(runs[0].measurements[0].elapsed_s, self.timeout_factor)
            started = time.monotonic()
            measurement = _run_once(self.target, self.configs[i], self.rung, limit,
                                    self.log_dir / f"{self.logs[i]}-{repeat}.log", self.seed, record)
            self.wall_s[i] = time.monotonic() - started
            if measurement is not None:
                record.measurements.append(measurement)
                record.values.append(measurement.value(self.objective))
            if self.on_run:
                self.on_run(repeat, record, record.values[-1] if measurement is not None else None)
        self.done += 1


def _run_once(target: Target, config: Mapping[str, Value], rung: Rung, limit_s: float | None, log: Path, seed: int,
              record: CandidateRuns) -> Measurement | None:
    """One run of ``config``; a failure the machine or knobtune caused is run again (MACHINE_RETRIES times) before
    it is kept on ``record`` as what stopped it, so that it never counts against the candidate."""
    for attempt in range(MACHINE_RETRIES + 1):
        try:
            return target.run(config, rung, timeout_s=limit_s,
                              log_path=log.with_suffix(f".{attempt}.log") if attempt else log, seed=seed)
        except RunFailure as failure:
            if failure.kind is FailureKind.TOOL and attempt < MACHINE_RETRIES:
                record.retries += 1
                continue
            record.failure = RunProblem(failure.kind, failure.reason)
            return None
        except OSError as exc:  # a folder removed, a disk full: the machine's, never the config's
            if attempt < MACHINE_RETRIES:
                record.retries += 1
                continue
            record.failure = RunProblem(FailureKind.TOOL, f"the machine or knobtune failed: {exc}")
    return None


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:60]


def _log_names(labels: Sequence[str]) -> list[str]:
    """Each candidate's name for its runs' files: its label made safe for a file name and cut to 60 characters,
    then, where that leaves two alike (two configs' paths that share their first 60 characters), its place among
    the candidates (``-c1``), so that no candidate's runs overwrite another's."""
    slugs = [_slug(label) for label in labels]
    return [slug if slugs.count(slug) == 1 else f"{slug}-c{i}" for i, slug in enumerate(slugs)]
