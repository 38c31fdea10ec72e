"""A study's summary as typed sections: what the study is, its proof, what it replayed, how the search went, the
default, the result, the costs, the bottleneck, rankings and the risks. ``report.summary.summarize`` builds them
from what a study stores; ``report.summary_text`` renders each; ``StudySummary.to_dict`` is `show --json`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from knobtune.workloads import Objective
from knobtune.workloads.capture import CaptureSummary


@dataclass(frozen=True)
class Heading:
    """What the study is: its name, system, workload and objective, what it ran on, the formats it exports to."""

    study: str
    system: str
    workload: str
    objective: Objective
    experiment: dict[str, Any] = field(default_factory=dict)  # versions, machine, stored workload, driver, document
    export_formats: tuple[str, ...] = ("json",)


@dataclass(frozen=True)
class Proof:
    """The verdict, and the interleaved repeats behind it (``tuning.proof.finish``)."""

    verdict: str
    verified: bool  # the result won interleaved repeats beyond the noise
    verification: dict[str, Any] | None = None


@dataclass(frozen=True)
class Replay:
    """What a capture study replayed: what the capture holds, never its data (None: not a capture)."""

    capture: CaptureSummary | None = None


@dataclass(frozen=True)
class TimeSpent:
    """Where the latest ``tune``'s time went: the search, then the verification, and the budget's reserve."""

    search_s: float
    verification_s: float
    reserved_s: float | None = None  # kept back for the verification
    budget_s: float | None = None  # --time (None: --trials only)
    reserve_searched: bool = False  # the reserve went to the search: no config had reached full size
    trials: int | None = None  # trials this `tune` ran, its default included (None: stored before it was)

    @property
    def trials_a_minute(self) -> float | None:
        """The search's pace: trials this `tune` ran per minute of its search."""
        return self.trials / (self.search_s / 60) if self.trials and self.search_s > 0 else None

    @classmethod
    def from_record(cls, data: dict[str, Any] | None) -> TimeSpent | None:
        if not data or data.get("search_s") is None:
            return None
        return cls(search_s=float(data["search_s"]), verification_s=float(data.get("verification_s") or 0.0),
                   reserved_s=data.get("reserved_s"), budget_s=data.get("budget_s"),
                   reserve_searched=bool(data.get("reserve_searched")), trials=data.get("trials"))


@dataclass(frozen=True)
class Trials:
    """How the search went: trials by outcome, where their time went, how well small rungs ranked configs."""

    counts: dict[str, int]
    time_s: dict[str, float] = field(default_factory=dict)  # outcome -> seconds its trials took (and "all")
    time_spent: TimeSpent | None = None  # the latest `tune` (None: none recorded)
    rung_agreement: list[dict[str, float]] = field(default_factory=list)  # Spearman's rho of each rung with the next
    rungs_run_scaled: bool = False  # small rungs ran configs with their data-sized knobs scaled to the rung's share
    earlier_studies: list[str] = field(default_factory=list)  # earlier studies alike it tried the best configs of
    earlier_trials: int = 0  # their trials offered to its sampler, those that fit its space shown (0: none)
    # each config tried first from them, in the order tried: its full-size speedup over the default here (None: it
    # did not complete); how far what they found carries to this workload
    earlier_gains: list[float | None] = field(default_factory=list)


@dataclass(frozen=True)
class MachineRuns:
    """One machine of a study: the sampled trials it ran, its latest full-size default (raw), its facts."""

    trials: int = 0
    default_value: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Default:
    """The default config over the study: its full-size value, its warm-up, its controls, its counters, and the
    machines that measured it."""

    default_value: float | None = None
    default_warm_up: float | None = None  # the full-size warm-up run, not counted (None: no warm-up)
    default_runs: list[float] = field(default_factory=list)  # its full-size value, its first run then controls
    default_counters: dict[str, float] = field(default_factory=dict)  # the system's counters over its full run
    machines: dict[str, MachineRuns] = field(default_factory=dict)
    units_machine: str | None = None  # the machine whose default gives the values' units (docs/workers.md)

    @property
    def drift(self) -> float | None:
        """Relative change of the default from its first to its latest run (0.05 = 5% higher)."""
        runs = self.default_runs
        return runs[-1] / runs[0] - 1 if len(runs) >= 2 and runs[0] else None


@dataclass(frozen=True)
class Result:
    """The config the study gives: its trial, its single full-size run and what it changes."""

    result_trial: int | None = None  # the trial whose config is the result (None: keep the default)
    result_value: float | None = None
    result_config: dict[str, Any] = field(default_factory=dict)
    result_tried_first: str = ""  # the known config the study tried first that the result is (its label), if it is
    single_run_speedup: float | None = None


@dataclass(frozen=True)
class Production:
    """Production's memory-to-data ratio a study capped its configs at, and the memory it planned from it."""

    data_bytes: int
    memory_bytes: int
    planned_limit_bytes: int | None = None


@dataclass(frozen=True)
class Limits:
    """What a config was allowed to cost (None: no limit given)."""

    memory_limit_bytes: int | None = None
    max_recovery_s: float | None = None
    production: Production | None = None


@dataclass(frozen=True)
class Costs:
    """What the default and the result cost besides the objective, how runs were timed, and the limits."""

    settled: bool = True  # run times include settling the store (False: the raw window, research.settle = false)
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)  # "default" / "result" -> settle, recovery, memory
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Bottleneck:
    """The system's rules over the default's and the result's full-size runs (``tuning.search.guide``; {}: none)."""

    diagnosis: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RankedBy:
    """The knob ranking a top-k study searched the top of."""

    study: str
    top_k: int
    knobs: list[str]


@dataclass(frozen=True)
class Ranked:
    """Rankings: the one a top-k study searched from, or a ranking study's own (``analysis.ranking``)."""

    ranked_by: RankedBy | None = None
    ranking: dict[str, Any] | None = None  # analysis.ranking.Ranking.to_dict


@dataclass(frozen=True)
class Safety:
    """What the result risks, and what the search was allowed or kept from."""

    warnings: list[str] = field(default_factory=list)
    unsafe_in_result: dict[str, str] = field(default_factory=dict)  # knob -> safety class
    allow_unsafe: bool = False
    allow_operational: bool = False  # operational values (auto-compaction off) were searched
    left_out: dict[str, str] = field(default_factory=dict)  # knob -> the safety class kept out
    kept_out: dict[str, str] = field(default_factory=dict)  # what was kept out as said (compaction_style=fifo) -> class


@dataclass(frozen=True)
class StudySummary:
    """What a study found, in sections; each has its renderer in ``report.summary_text``."""

    heading: Heading
    proof: Proof
    replay: Replay
    trials: Trials
    default: Default
    result: Result
    cost: Costs
    bottleneck: Bottleneck
    ranked: Ranked
    safety: Safety

    # what nearly every reader of a summary asks for
    @property
    def study(self) -> str:
        return self.heading.study

    @property
    def system(self) -> str:
        return self.heading.system

    @property
    def objective(self) -> Objective:
        return self.heading.objective

    @property
    def verdict(self) -> str:
        return self.proof.verdict

    @property
    def verified(self) -> bool:
        return self.proof.verified

    @property
    def result_trial(self) -> int | None:
        return self.result.result_trial

    @property
    def result_config(self) -> dict[str, Any]:
        return self.result.result_config

    def to_dict(self) -> dict[str, Any]:
        """Every section's fields as one flat table (the JSON of `show --json` and the report's data)."""
        data: dict[str, Any] = {}
        for section in (getattr(self, f.name) for f in dataclasses.fields(self)):
            data |= {f.name: _plain(getattr(section, f.name)) for f in dataclasses.fields(section)}
        data["objective"] = self.objective.value
        data["time_spent"] = data["time_spent"] or {}  # none recorded: an empty table, as before the sections
        data["drift"] = self.default.drift
        return data


def _plain(value: Any) -> Any:
    """A section's value as plain data: a typed record as its table (a capture's summary stays as it is)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, (type, CaptureSummary)):
        return dataclasses.asdict(value)
    return value
