"""Prove configs against each other: repeated, interleaved runs at one rung (A B C A B C ...).

Interleaving spreads the machine's drift over every config alike; the
repeats give each config a median and, against the first config (the
one the others are measured against), a speedup with a 95% bootstrap interval (knobtune.analysis).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knobtune.analysis import Speedup, noise, speedup
from knobtune.knobs import Value
from knobtune.targets import FailureKind, Measurement, RunFailure, Target
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

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def latency_us(self) -> dict[str, dict[str, float]]:
        """Per phase, the median over runs of each latency the driver printed (µs: percentiles, mean, max) and of
        the phase's own time (``seconds``): what reconciles latency with the objective (docs/report.md)."""
        table: dict[str, dict[str, list[float]]] = {}
        for measurement in self.measurements:
            for phase in measurement.phases:
                for name, value in (("p50", phase.p50_us), ("p99", phase.p99_us), ("p99.9", phase.p999_us),
                                    ("mean", phase.mean_us), ("max", phase.max_us), ("seconds", phase.seconds)):
                    if value is not None:
                        table.setdefault(phase.name, {}).setdefault(name, []).append(value)
        return {phase: {k: statistics.median(v) for k, v in values.items()} for phase, values in table.items()}

    def costs(self) -> dict[str, float | None]:
        """Medians over runs of what the runs cost besides the objective: settle, recovery, peak memory."""
        def median_of(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return statistics.median(known) if known else None

        runs = self.measurements
        return {
            "workload_s": median_of([m.workload_s for m in runs]),
            "settle_s": median_of([m.settle.settle_s if m.settle else None for m in runs]),
            "recovery_s": median_of([m.recovery_s for m in runs]),
            "peak_rss_bytes": median_of([m.peak_rss_bytes for m in runs]),
        }


@dataclass(frozen=True)
class Comparison:
    """The outcome of interleaved repeats: the first candidate is what the others are measured against."""

    objective: Objective
    rung: Rung
    repeats: int
    runs: tuple[CandidateRuns, ...]
    speedups: Mapping[str, Speedup]  # label -> speedup over the first candidate
    noise: float  # the first candidate's relative spread

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
        return {
            "objective": self.objective.value,
            "rung": {"index": self.rung.index, "records": self.rung.records},
            "repeats": self.repeats,
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


DEFAULT_TIMEOUT_FACTOR = 3.0  # a run may take this many times the default's time (--timeout-factor)
MIN_TIMEOUT_S = 2.0  # a limit relative to the default's time is never shorter than this


def relative_limit_s(base_s: float, factor: float, least_s: float = MIN_TIMEOUT_S) -> float:
    """The time a run may take: ``factor`` times the reference run's ``base_s``, at least ``least_s``."""
    return max(factor * base_s, least_s)


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
    runs = [CandidateRuns(candidate) for candidate, _ in candidates]
    for (_, config), record in zip(candidates, runs):
        over = target.catalog.memory.over_limit(config, target.memory_limit_bytes)
        record.failure = None if over is None else RunProblem(FailureKind.MEMORY, over)
    for repeat in range(repeats):
        for (candidate, config), record in zip(candidates, runs):
            if record.failure is not None:
                continue
            limit = timeout_s
            if limit is None and timeout_factor is not None and runs[0].measurements:
                limit = relative_limit_s(runs[0].measurements[0].elapsed_s, timeout_factor)
            measurement = _run_once(target, config, rung, limit, log_dir / f"{_slug(candidate.label)}-{repeat}.log",
                                    seed, record)
            if measurement is not None:
                record.measurements.append(measurement)
                record.values.append(measurement.value(objective))
            if on_run:
                on_run(repeat, record, record.values[-1] if measurement is not None else None)
    base = runs[0]
    speedups = {r.candidate.label: speedup(base.values, r.values, objective.maximize)
                for r in runs[1:] if r.values and base.values and r.failure is None}
    return Comparison(objective, rung, repeats, tuple(runs), speedups, noise(base.values))


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
