"""Typed records over what a study stores: a run at a rung, a trial, the verification's winner, the best
trials (what verifying and a new study's ``--start-from`` take).

Optuna keeps a trial's user attributes as plain JSON. This module is the only
code that knows the shape of a stored run (``rung_N``: a measurement's summary
with its value, or a failure with its kind), and reads a trial's attributes
into a ``TrialRecord``: the rest of knobtune asks ``record.is_default`` and
``run.failure``, never a key. Studies written by earlier releases read the same
way: the stored shapes have not changed, and what they lack reads as None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from knobtune.errors import UsageError
from knobtune.targets import Measurement
from knobtune.tuning.records import attrs
from knobtune.tuning.records.outcomes import Outcome

COST_KEYS = ("workload_s", "settle_s", "recovery_s", "peak_rss_bytes")  # what a run cost besides its value


@dataclass(frozen=True)
class RungRun:
    """One trial's run at one rung, as stored: a measurement (``failure`` None) or a failure with its kind.

    ``value`` is the objective on the machine that ran it; ``study_value`` the same in the study's units (the first
    machine's: docs/workers.md); ``ratio`` its ratio to that machine's default at the rung (above 1: better).
    """

    failure: Outcome | None = None
    reason: str = ""
    log: str = ""
    value: float | None = None
    study_value: float | None = None
    ratio: float | None = None
    machine: str | None = None
    summary: Mapping[str, Any] = field(default_factory=dict)  # the measurement's own figures (Measurement.summary)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def in_study_units(self) -> float:
        """The value the study compares (its units); a failure has none."""
        if self.value is None:
            raise ValueError("a failed run has no value")
        return self.value if self.study_value is None else self.study_value

    @property
    def elapsed_s(self) -> float:
        """The measured time (a settled run's crash-and-reopen and settle inside it)."""
        return float(self.summary["elapsed_s"])

    @property
    def recovery_s(self) -> float | None:
        recovery = self.summary.get("recovery_s")
        return None if recovery is None else float(recovery)

    @property
    def counters(self) -> Mapping[str, float]:
        """The system's own counters over the run (checkpoints, stalls, cache hits, ...), as its target read them."""
        return self.summary.get("counters") or {}

    def costs(self) -> dict[str, Any]:
        """What the run cost besides its value: workload and settle time, recovery, peak memory."""
        return {key: self.summary.get(key) for key in COST_KEYS}

    def reusable(self) -> bool:
        """Whether another trial of the same config may take this run as its own (a failure of the machine or of
        knobtune says nothing about the config and is not)."""
        return self.failure is None or self.failure.config_fault

    def to_stored(self) -> dict[str, Any]:
        if self.failure is not None:
            return {"failure": self.failure.value, "reason": self.reason, "log": self.log}
        stored: dict[str, Any] = {**self.summary, "value": self.value}
        if self.machine is not None:
            stored["machine"] = self.machine
        if self.ratio is not None:
            stored |= {"ratio": self.ratio, "study_value": self.study_value}
        return stored

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> RungRun:
        if "failure" in stored:
            return cls(failure=Outcome(stored["failure"]), reason=str(stored.get("reason", "")),
                       log=str(stored.get("log", "")))
        own = {"value", "study_value", "ratio", "machine"}
        value = stored.get("value")
        return cls(value=None if value is None else float(value), study_value=stored.get("study_value"),
                   ratio=stored.get("ratio"),
                   machine=stored.get("machine"), log=str(stored.get("log", "")),
                   summary={k: v for k, v in stored.items() if k not in own})

    @classmethod
    def measured(cls, measurement: Measurement, value: float) -> RungRun:
        """A run that measured ``value`` (before the machine's ratio is known)."""
        summary = measurement.summary()
        return cls(value=value, log=str(summary.get("log", "")), summary=summary)

    @classmethod
    def failed(cls, outcome: Outcome, reason: str, log: str) -> RungRun:
        return cls(failure=outcome, reason=reason, log=log)


@dataclass(frozen=True)
class TrialRecord:
    """What a study stored about one trial, typed: its role, config, runs by rung, outcome and origin."""

    number: int
    state: optuna.trial.TrialState
    value: float | None
    role: str | None  # attrs.ROLE_DEFAULT (the default, first), attrs.ROLE_CONTROL (the default again) or None
    config: Mapping[str, Any]  # the knobs it changed
    config_hash: str | None
    outcome: Outcome | None
    reason: str
    runs: Mapping[int, RungRun]  # rung index -> its run (measured or reused)
    reached_rung: int | None
    machine: str | None  # the machine it ran on (None: a study from before workers)
    worker: str | None
    started_from: str | None  # the known config (its label) a new study tried first, or "study S trial N"
    reused_from: int | None
    infeasible: str | None  # why a complete run breaks a limit
    seconds: float | None  # start to end, when it ended
    warm_up_s: float | None = None  # the default's uncounted warm-up run (its elapsed time), when it had one
    warm_up_value: float | None = None  # that run's objective value
    claim: Mapping[str, Any] | None = None  # attrs.CLAIM: the rung it is about to measure and whether it does

    @property
    def is_default(self) -> bool:
        """Whether the trial runs the default config (the first run, or a control)."""
        return self.role in (attrs.ROLE_DEFAULT, attrs.ROLE_CONTROL)

    @property
    def taken_over(self) -> bool:
        """Whether another worker ended the trial as lost after it stored how it ended: its heartbeat did not reach
        the storage in time (``Workers.fail_stale``), between its outcome and telling Optuna. The trial is failed, its
        stored outcome disagrees, and its config was queued again: the retry, not this trial, counts."""
        return self.outcome is not None and self.state.is_finished() and self.state != self.outcome.state

    def run_at(self, rung: int) -> RungRun | None:
        return self.runs.get(rung)

    @property
    def reached_run(self) -> RungRun | None:
        """Its run at the highest rung it reached (None: it reached none)."""
        return self.run_at(self.reached_rung) if self.reached_rung is not None else None

    @property
    def reached_ratio(self) -> float | None:
        """Its ratio to its machine's default at the highest rung it reached (above 1: better; None: not stored)."""
        return run.ratio if (run := self.reached_run) is not None else None

    def claim_at(self, rung: int) -> str | None:
        """What the trial said of its run at ``rung`` (an ``attrs.CLAIM_*`` state), None when it said nothing."""
        claim = self.claim or {}
        return str(claim.get("state")) if claim.get("rung") == rung else None


def value_of(trial: FrozenTrial) -> float:
    """A complete trial's value (Optuna types it optional: a running, pruned or failed trial has none).

    Raises:
        ValueError: the trial has no value.
    """
    if trial.value is None:
        raise ValueError(f"trial {trial.number} has no value")
    return trial.value


def record_of(trial: FrozenTrial) -> TrialRecord:
    """The typed record of a stored trial."""
    user = trial.user_attrs
    outcome = user.get(attrs.OUTCOME)
    runs = {int(key.removeprefix(attrs.RUNG_PREFIX)): RungRun.from_stored(stored) for key, stored in user.items()
            if key.startswith(attrs.RUNG_PREFIX) and isinstance(stored, dict)}
    seconds = ((trial.datetime_complete - trial.datetime_start).total_seconds()
               if trial.datetime_start and trial.datetime_complete else None)
    warm_up = user.get(attrs.WARM_UP) or {}
    return TrialRecord(
        number=trial.number, state=trial.state, value=trial.value, role=attrs.role_of(user),
        config=dict(user.get(attrs.CONFIG, {})), config_hash=user.get(attrs.CONFIG_HASH),
        outcome=Outcome(outcome) if outcome else None, reason=str(user.get(attrs.REASON, "")), runs=runs,
        reached_rung=user.get(attrs.REACHED_RUNG), machine=user.get(attrs.TRIAL_MACHINE), worker=user.get(attrs.WORKER),
        started_from=user.get(attrs.STARTED_FROM), reused_from=user.get(attrs.REUSED_FROM),
        infeasible=user.get(attrs.INFEASIBLE), seconds=seconds,
        warm_up_s=float(warm_up["elapsed_s"]) if warm_up.get("elapsed_s") is not None else None,
        warm_up_value=float(warm_up["value"]) if warm_up.get("value") is not None else None,
        claim=user.get(attrs.CLAIM))


def records(study: optuna.Study, states: tuple[optuna.trial.TrialState, ...] | None = None) -> list[TrialRecord]:
    """Every trial of ``study`` (of ``states``), typed, by number."""
    return [record_of(t) for t in study.get_trials(deepcopy=False, states=states)]


def store_run(trial: optuna.Trial, rung: int, run: RungRun) -> None:
    trial.set_user_attr(attrs.rung_key(rung), run.to_stored())


def winner_trial(study: optuna.Study) -> int | None:
    """The trial number of the verified winner, or None (no verification, or it kept the default).

    Releases before the number was stored named the winner only by its label ("trial 12"): it is found among the
    verification's candidates, matched against the labels of the study's own trials.
    """
    verification = study.user_attrs.get(attrs.VERIFICATION) or {}
    if verification.get(attrs.WINNER_TRIAL) is not None:
        return int(verification[attrs.WINNER_TRIAL])
    label = verification.get("winner")
    if not label:
        return None
    return next((t.number for t in study.get_trials(deepcopy=False) if f"trial {t.number}" == label), None)


def top_trials(study: optuna.Study, k: int) -> list[optuna.trial.FrozenTrial]:
    """The ``k`` best complete and feasible trials with distinct configs, the default excluded."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if not attrs.is_default(t.user_attrs) and t.user_attrs.get(attrs.CONFIG)
                and attrs.INFEASIBLE not in t.user_attrs]
    complete.sort(key=value_of, reverse=study.direction == optuna.study.StudyDirection.MAXIMIZE)
    chosen, seen = [], set()
    for trial in complete:
        digest = trial.user_attrs.get(attrs.CONFIG_HASH)
        if digest not in seen:
            seen.add(digest)
            chosen.append(trial)
    return chosen[:k]


def starting_configs(study: optuna.Study, system: str, k: int = 3) -> tuple[tuple[str, dict], ...]:
    """What a new study may try first from ``study`` (--start-from): its verified winner, then its best complete
    configs, ``k`` at most, as (label, changed knobs).

    Raises:
        UsageError: ``study`` tuned another system, or has no complete config to start from.
    """
    tuned = study.user_attrs.get(attrs.SYSTEM)
    if tuned != system:
        raise UsageError(f"study '{study.study_name}' tuned {tuned}, not {system}. Fix: --start-from a {system} study")
    winner = winner_trial(study)
    chosen = sorted(top_trials(study, k), key=lambda t: t.number != winner)  # the winner first
    if not chosen:
        raise UsageError(f"study '{study.study_name}' has no config that completed every rung to start from. "
                         "Fix: --start-from a study with complete trials (`knobtune show` lists them)")
    return tuple((f"study {study.study_name} trial {t.number}", dict(t.user_attrs[attrs.CONFIG])) for t in chosen)
