"""A config's run at one rung: measured through the target, or reused from an earlier trial of the same config.

The same config is never measured twice at the same rung: a run another trial of it made is reused, and one it is
making on another worker right now is waited for. A run's failure is stored with its kind, as the machine's when
the machine failed (a full disk), never the config's.
"""

from __future__ import annotations

import time

import optuna
from optuna.trial import TrialState

from knobtune.storage import HEARTBEAT_S, StudyStore
from knobtune.targets import RunFailure, Target, disk_full_of, is_disk_full
from knobtune.tuning.loop.budget import Budget
from knobtune.tuning.loop.workers import Workers
from knobtune.tuning.records import Outcome, RungRun, attrs, records, store_run
from knobtune.workloads import Rung


class Runs:
    """Runs a trial's config at a rung, or finds the run an earlier trial of the same config made there."""

    def __init__(self, workers: Workers, budget: Budget, store: StudyStore) -> None:
        self.workers, self.budget, self.store = workers, budget, store

    def measure(self, target: Target, trial: optuna.Trial, config: dict, rung: Rung, is_default: bool) -> RungRun:
        """Run ``config`` at ``rung``; the run (or its failure, with its kind) is stored on the trial."""
        e = self.workers.experiment
        log = self.store.artifacts(e.study_name) / f"trial-{trial.number:04d}" / f"rung-{rung.index}.log"
        limit = self.budget.limit_s(rung)  # the first default: the time left; a control: as any config's run
        cut = None if is_default else self.budget.cut_by_budget_s(rung)
        try:
            measurement = target.run(config, rung, timeout_s=limit, log_path=log, seed=e.search.seed)
            run = self.workers.on_this_machine(rung, RungRun.measured(measurement, measurement.value(e.objective)),
                                               is_default)
        except RunFailure as failure:
            outcome, reason = Outcome.of_failure(failure.kind), failure.reason
            if outcome is Outcome.TIMEOUT and cut is not None:  # stopped by the budget's end, not its own limit
                outcome, reason = Outcome.BUDGET, f"the time budget ended during {rung} (stopped after {cut:.1f} s)"
            if failure.fix:
                trial.set_user_attr(attrs.FIX, failure.fix)
            run = RungRun.failed(outcome, reason, str(failure.log_path or log))
        except OSError as exc:  # a folder removed, a disk full: the machine's or our failure, never the config's
            if is_disk_full(exc):
                full = disk_full_of(exc, self.store.scratch_root)
                trial.set_user_attr(attrs.FIX, full.fix)
                run = RungRun.failed(Outcome.TOOL, full.reason, str(log))
            else:
                run = RungRun.failed(Outcome.TOOL, f"the machine or knobtune failed: {exc}", str(log))
        store_run(trial, rung.index, run)
        return run

    def reused(self, trial: optuna.Trial, rung: Rung) -> RungRun | None:
        """The run of the same config at the same rung from another trial, if there is one; when another worker's
        trial of it measures it right now, or may reach it first, its run once it is in (None: measure it here).

        The trials of one config agree who measures it without a lock, over the storage: each says it is about to
        (``attrs.CLAIM`` pending) before it looks at the others, then says what it chose. A trial leaves a rung to
        a trial of its config with a lower number that is running and may still reach it, and waits on one with a
        higher number until that one has chosen, and, if it chose to measure, for its run. Of two trials that say
        and look at once, at least one sees the other: the lower then measures and the higher waits. A trial that
        drew its config after the other had looked (a queued trial has a lower number yet may run later) sees the
        other pending or measuring, and waits.
        """
        digest, me = trial.user_attrs.get(attrs.CONFIG_HASH), self.workers.worker
        state = self._claim(trial, rung, attrs.CLAIM_PENDING)
        while True:
            others = [other for other in records(self.workers.study, (TrialState.RUNNING,))
                      if other.number != trial.number and other.config_hash == digest and other.worker != me
                      and other.run_at(rung.index) is None]
            if any(o.number < trial.number and rung.index <= _next_rung(o.reached_rung) for o in others):
                state = self._claim(trial, rung, attrs.CLAIM_DEFERRED)
            elif state == attrs.CLAIM_DEFERRED:  # the lower one is gone: say pending again before the look that
                state = self._claim(trial, rung, attrs.CLAIM_PENDING)  # may let it measure
                continue
            elif not any(o.number > trial.number and o.claim_at(rung.index) in (attrs.CLAIM_PENDING,
                                                                                attrs.CLAIM_MEASURING) for o in others):
                break
            self.workers.fail_stale()  # a dead worker's trial would hold this one for ever: failed once it is stale
            time.sleep(HEARTBEAT_S / 5)
        for other in records(self.workers.study):
            run = other.run_at(rung.index)
            if other.number != trial.number and other.config_hash == digest and run is not None and run.reusable():
                store_run(trial, rung.index, run)
                trial.set_user_attr(attrs.REUSED_FROM, other.number)
                return run
        self._claim(trial, rung, attrs.CLAIM_MEASURING)
        return None

    @staticmethod
    def _claim(trial: optuna.Trial, rung: Rung, state: str) -> str:
        """Store what ``trial`` says of its run at ``rung`` (``attrs.CLAIM``), when it changed; the state."""
        if trial.user_attrs.get(attrs.CLAIM) != (claim := {"rung": rung.index, "state": state}):
            trial.set_user_attr(attrs.CLAIM, claim)
        return state


def _next_rung(reached: int | None) -> int:
    """The highest rung a running trial that has reached rung ``reached`` may measure next (0: none reached yet;
    rung 0 reached is a rung reached, not none)."""
    return 0 if reached is None else reached + 1
