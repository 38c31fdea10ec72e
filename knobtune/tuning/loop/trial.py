"""One trial: one config run up the fidelity ladder until it completes, is pruned or fails.

Each rung is one ``target.run(config, rung)``: the target scales the config to
the rung where the study scales rungs, so nothing here applies or scales. It
runs at the smallest rung first; Optuna's successive-halving pruner decides
whether it climbs to the next. A run that takes longer than ``timeout_factor``
times the default's time at that rung is stopped (outcome ``timeout``). The
same config is never measured twice at the same rung: its result is reused
(``runs``: a rung's run, measured or reused).
The default and the known configs a new study tries first are never pruned.
How each trial ended is told to Optuna in one place (``finish``), through
``tuning.records.outcomes``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from knobtune.errors import KnobtuneError, StorageError, UsageError
from knobtune.interrupts import after_a_stop
from knobtune.storage import GRACE_S, StudyStore
from knobtune.targets import RunFailure, Target
from knobtune.tuning.records import Outcome, RungRun, attrs, record_of
from knobtune.tuning.loop.budget import Budget
from knobtune.tuning.search import Guide, config_hash
from knobtune.tuning.loop.progress import Reporter
from knobtune.tuning.loop.resume import Queue
from knobtune.tuning.loop.runs import Runs
from knobtune.tuning.loop.workers import Workers
from knobtune.workloads import Rung


class TrialRunner:
    """Runs the trials Optuna asks for through one target, and tells Optuna how each ended."""

    def __init__(self, workers: Workers, budget: Budget, queue: Queue, reporter: Reporter, store: StudyStore,
                 guide: Guide | None = None) -> None:
        self.workers, self.budget, self.queue, self.reporter, self.store = workers, budget, queue, reporter, store
        self.guide = guide
        self.runs = Runs(workers, budget, store)
        self.experiment = workers.experiment
        self.study = workers.study
        self.trials_run = 0  # trials this process ran (the default's included)

    def run(self, target: Target, trial: optuna.Trial, owned: Callable[[], None] = lambda: None) -> None:
        """Run ``trial`` to its end; a failure of the machine or of knobtune queues its config again. ``owned`` is
        called once the trial's worker and config are recorded (``InterruptsDeferred.release``: a Ctrl-C deferred
        while it was asked for lands here, where it is handled).

        Raises:
            UsageError: the default itself does not fit the time budget or the memory limit.
            KnobtuneError: the default failed, or the machine or knobtune did (the config is queued again).
        """
        is_default = attrs.is_default(trial.user_attrs)  # never pruned, never reused
        self.trials_run += 1
        try:
            with self.workers.heartbeat(trial):  # its first beat is stored before the trial names its worker
                config = self._record_config(trial)
                owned()
                outcome = self._start(target, trial, config, is_default)
        except StorageError:  # the storage is gone: the trial stays running there, and is run again when the next
            raise  # process on this host finds its pid gone, or another machine finds its heartbeat stopped
        except BaseException as exc:  # Ctrl-C or a failure of ours: keep the trial, queue the config again
            after_a_stop(exc)  # a stop that cut a storage write may have left its lock held
            if self.workers.still_running(trial.number):  # Ctrl-C may land after Optuna recorded its end
                trial.set_user_attr(attrs.OUTCOME, Outcome.INTERRUPTED.value)
                # queued before it is failed: a write that fails here (a loaded machine's storage) leaves the trial
                # running, and the next process on this host marks it and queues it (once) when it finds it so
                self.queue.requeue(trial.params, trial.user_attrs, trial.number)
                self.study.tell(trial, state=TrialState.FAIL)
            elif _refused_as_finished(exc):
                self._taken_over(trial)
                return
            raise
        reason = str(trial.user_attrs.get(attrs.REASON, outcome.value))
        if outcome is Outcome.TOOL:  # the machine's failure (a full disk): the study stops, the config is not blamed
            self.queue.requeue(trial.params, trial.user_attrs, trial.number)  # (a default is measured afresh)
            fix = trial.user_attrs.get(attrs.FIX) or "fix the machine"
            raise KnobtuneError(f"{_label(trial)} failed for a reason that is not the config's: {reason}. Finished "
                                f"trials are kept{'' if is_default else ' and its config is queued again'}. Fix: "
                                f"{fix}, then run the same command to resume")
        if is_default:
            self._after_default(trial, outcome, reason)

    def _taken_over(self, trial: optuna.Trial) -> None:
        """Say in one line that ``trial`` ended elsewhere while this process ran it: its heartbeat did not reach the
        storage for the grace period (a cut link, a partition), so another worker failed it and queued its config
        again. The storage refused this process's late result; the process goes on with the next trial."""
        retry = self.queue.retry_of(trial.number)
        again = f", its config queued again as trial {retry}" if retry is not None else ""
        self.reporter.note(f"{_label(trial)}: its result here is not recorded: the storage heard no heartbeat from "
                           f"this worker for over {GRACE_S} s and another worker ended the trial as lost{again}; "
                           "going on with the next trial")

    def _record_config(self, trial: optuna.Trial) -> dict:
        """Draw the trial's config and store what it changes, its hash, its repairs, unsafe values, memory plan."""
        e = self.experiment
        self._name_owner(trial)
        fixed = attrs.is_fixed(trial.user_attrs)  # a known config, the default or a retry runs as it is (or is refused)
        focus = None if fixed or self.guide is None else self.guide.focus()
        config, repairs = e.space.suggest(trial, focus, capped=not fixed)
        if focus is not None:
            trial.set_user_attr(attrs.FOCUSED, sorted(focus))
        changed = e.catalog.changed(config)
        trial.set_user_attr(attrs.CONFIG, changed)
        trial.set_user_attr(attrs.CONFIG_HASH, config_hash(changed))
        if repairs:
            trial.set_user_attr(attrs.REPAIRED, repairs)
        if unsafe := e.catalog.unsafe_in(config):
            trial.set_user_attr(attrs.UNSAFE, {k: v.value for k, v in unsafe.items()})
        trial.set_user_attr(attrs.PLANNED_MEMORY, e.catalog.memory.planned_bytes(config))
        return config

    def _after_default(self, trial: optuna.Trial, outcome: Outcome, reason: str) -> None:
        """Keep the default's full-size value for the drift record. A first default that did not complete stops the
        study; a control that did not is noted, and the study goes on."""
        e = self.experiment
        if outcome is Outcome.COMPLETE:
            full = record_of(self.study.get_trials(deepcopy=False)[trial.number]).run_at(e.rungs[-1].index)
            controls = list(self.study.user_attrs.get(attrs.CONTROLS, []))
            controls.append({"trial": trial.number, "at_s": round(self.reporter.elapsed_s(), 1),
                             "value": full.value if full else None, "role": attrs.role_of(trial.user_attrs)})
            self.study.set_user_attr(attrs.CONTROLS, controls)
            warm = trial.user_attrs.get(attrs.WARM_UP)
            if warm and full and full.value and warm.get("value"):
                self.reporter.note(f"the default's warm-up ran {e.objective.show(warm['value'])}: "
                                   f"{e.objective.speedup(warm['value'], full.value):.2f}x its counted run")
            return
        if attrs.role_of(trial.user_attrs) == attrs.ROLE_CONTROL:  # the default ran to its end before, here: what
            # failed now is not the config nor the budget (seen: a LevelDB settle that never saw its last
            # compaction end); the earlier default's runs stay the reference, and the next control is due as usual
            self.reporter.note(f"{_label(trial)} ended {outcome.value}: {reason}; the study goes on, measured "
                               "against the default's earlier runs")
            return
        if outcome is Outcome.TIMEOUT and e.joining and e.budget.time_s is not None:  # its limit: the study's time left
            raise UsageError("the study's time ran out before this machine's default finished; a worker "
                             "measures its own machine's default first. Fix: start workers early in the study, or "
                             "give the study more --time")
        if outcome is Outcome.TIMEOUT and e.budget.time_s is not None:
            raise UsageError(f"--time is too short: the default config alone did not finish within it ({reason}). "
                             "Fix: give more time, or a smaller --records")
        if outcome is Outcome.MEMORY:
            raise UsageError(f"--memory-limit is too low for the default config: {reason}. Fix: raise --memory-limit")
        raise KnobtuneError(f"the default config failed ({reason}). Fix: check the workload and the system with "
                            f"`knobtune systems`; raw output is in {self.store.artifacts(e.study_name)}")

    def _start(self, target: Target, trial: optuna.Trial, config: dict, is_default: bool) -> Outcome:
        """Climb with ``config`` unless its memory plan is over the limit."""
        e = self.experiment
        if over := e.catalog.memory.over_limit(config, e.planned_memory_limit()):
            return self._fail(trial, Outcome.MEMORY, over, e.rungs[0], is_default)
        return self._climb(target, trial, config, is_default)

    def _climb(self, target: Target, trial: optuna.Trial, config: dict, is_default: bool) -> Outcome:
        """Run ``trial`` (``config``) up the ladder; tell Optuna how it ended and return the outcome. Each rung is
        one ``target.run(config, rung)`` (the target scales the config to the rung when the study scales rungs); a
        config the system refuses fails the trial at the rung where it was refused, the first one.

        The default and a known config a new study tries first (``started_from``: a heuristic, a previous
        study's best) are never pruned: they climb to full size unless they fail or time out. A known config is
        worth its full-size run, and a small rung's noise must not throw it away (docs/tuning.md).
        """
        e, rungs = self.experiment, self.experiment.rungs
        if self._warms_up(trial) and (failed := self._warm_up(target, trial, config)) is not None:
            return failed
        for rung in rungs:
            if not is_default and not self.budget.fits(rung):
                return self.finish(trial, Outcome.BUDGET, "the time budget ended before this rung")
            run = None if is_default else self.runs.reused(trial, rung)
            run = run or self.runs.measure(target, trial, config, rung, is_default)
            if run.failure is not None:
                return self._fail(trial, run.failure, run.reason, rung, is_default)
            trial.set_user_attr(attrs.REACHED_RUNG, rung.index)
            value = run.in_study_units
            if is_default:
                self.workers.keep_units_default(rung, run)
            self.reporter.rung(f"{_label(trial)} {rung}: {e.objective.show(value)}", trial.number, rung.index, value)
            if rung is rungs[-1]:
                self._read_rules(trial, run, config, is_default)
                if self._feasible(trial, run, is_default):
                    best = self.reporter.best
                    self.reporter.best = value if best is None or e.objective.better(value, best) else best
                return self.finish(trial, Outcome.COMPLETE, "", value)
            trial.report(value, step=self.step(rung))
            if trial.should_prune() and not is_default and attrs.STARTED_FROM not in trial.user_attrs:
                return self.finish(trial, Outcome.PRUNED, f"successive halving stopped it after {rung}")
        raise KnobtuneError(f"workload '{e.workload.name}' has an empty fidelity ladder. Fix: give it a ladder")

    def _warms_up(self, trial: optuna.Trial) -> bool:
        """Whether this is the first default of this machine in the study (not a control), which warms up."""
        return self.experiment.research.warm_up and attrs.role_of(trial.user_attrs) == attrs.ROLE_DEFAULT \
            and self.workers.own_default(self.experiment.rungs[-1]) is None

    def _warm_up(self, target: Target, trial: optuna.Trial, config: dict) -> Outcome | None:
        """Run the default once at full size before its ladder, not counted: the first heavy run on a fresh machine
        or freshly loaded data ran up to 35% slow here (TPC-C; RocksDB right after set-up), and every trial is
        compared and pruned against the default's runs. Stored as ``warm_up``; a failure ends the default."""
        e, full = self.experiment, self.experiment.rungs[-1]
        log = self.store.artifacts(e.study_name) / f"trial-{trial.number:04d}" / "warm-up.log"
        self.reporter.note(f"warming up: the default once at {full}, not counted")
        try:
            measurement = target.run(config, full, timeout_s=self.budget.time_left_s(), log_path=log,
                                     seed=e.search.seed)
        except RunFailure as failure:
            return self._fail(trial, Outcome.of_failure(failure.kind), f"its warm-up run failed: {failure.reason}",
                              full, True)
        trial.set_user_attr(attrs.WARM_UP, {"value": measurement.value(e.objective),
                                            "elapsed_s": round(measurement.elapsed_s, 3)})
        return None

    def _read_rules(self, trial: optuna.Trial, run: RungRun, config: dict, is_default: bool) -> None:
        """The diagnosis over a full-size run: the starts it suggests are queued (``tuning.search.guide``)."""
        if self.guide is None:
            return
        left = self.budget.time_left_s()
        search_end = None if left is None else time.time() + left
        starts = self.guide.after_full_run(trial, run, config, is_default=is_default, search_end=search_end)
        self.queue.plan(starts)

    def _fail(self, trial: optuna.Trial, outcome: Outcome, reason: str, rung: Rung, is_default: bool) -> Outcome:
        """End a trial that failed at ``rung``; a failure the config caused first reports a pessimistic value there."""
        if outcome.config_fault and not is_default and self.workers.own_default(rung) is not None:
            trial.report(self._pessimistic(rung), step=self.step(rung))
            trial.should_prune()  # records the rung so later trials compete with it
        return self.finish(trial, outcome, reason)

    def give_way(self, trial: optuna.Trial, reason: str) -> Outcome:
        """End a trial this process asked for but may not run (the budget went to other workers' trials), naming
        the worker and machine that asked, as every trial does."""
        self._name_owner(trial)
        return self.finish(trial, Outcome.BUDGET, reason)

    def _name_owner(self, trial: optuna.Trial) -> None:
        """Store the worker and the machine that run (or asked for) ``trial``."""
        trial.set_user_attr(attrs.WORKER, self.workers.worker)
        trial.set_user_attr(attrs.TRIAL_MACHINE, self.workers.machine)

    def finish(self, trial: optuna.Trial, outcome: Outcome, reason: str, value: float | None = None) -> Outcome:
        """Tell Optuna how ``trial`` ended (its state from ``outcome``) and store why."""
        trial.set_user_attr(attrs.OUTCOME, outcome.value)
        if reason:
            trial.set_user_attr(attrs.REASON, reason)
        self.study.tell(trial, value if outcome is Outcome.COMPLETE else None, state=outcome.state)
        shown = self.experiment.objective.show(value) if value is not None else reason
        self.reporter.trial(f"{_label(trial)} {outcome.value}: {shown}", trial.number, value)
        return outcome

    def _feasible(self, trial: optuna.Trial, run: RungRun, is_default: bool) -> bool:
        """Check a full-size run against --max-recovery-time; record why it is infeasible if it is not."""
        limit, recovery = self.experiment.limits.max_recovery_s, run.recovery_s
        if limit is None:
            return True
        over = recovery - limit if recovery is not None else 0.0
        trial.set_user_attr(attrs.RECOVERY_OVER_S, over)
        trial.set_constraint(attrs.RECOVERY_OVER_S, over)  # TPE and GP steer away from values > 0 (Optuna 5)
        if over <= 0:
            return True
        reason = f"recovery after a crash took {recovery:.2f} s, over --max-recovery-time {limit:g} s"
        trial.set_user_attr(attrs.INFEASIBLE, reason)
        self.reporter.note(f"{'the default' if is_default else _label(trial)} is infeasible: {reason}")
        return False

    def step(self, rung: Rung) -> int:
        return self.experiment.search.reduction_factor ** rung.index

    def _pessimistic(self, rung: Rung) -> float:
        """What a run that failed at ``rung`` counts as: no better than one that used up its time limit there,
        the default's value scaled by limit / default's time."""
        base = self.workers.own_default(rung)
        if base is None or base.value is None:
            raise KnobtuneError("a failure was scored before this machine's default ran at its rung. Fix: report "
                                "this as a bug of knobtune")
        ratio = max((self.budget.limit_s(rung) or 0.0) / base.elapsed_s, 1.0)
        raw = base.value / ratio if self.experiment.objective.maximize else base.value * ratio
        return self.workers.in_study_units(rung, raw)


def _refused_as_finished(exc: BaseException) -> bool:
    """Whether ``exc`` is Optuna refusing to update a trial that has already finished."""
    return isinstance(exc, optuna.exceptions.UpdateFinishedTrialError) or (
        isinstance(exc, ValueError) and str(exc).startswith("Cannot tell a "))


def _label(trial: optuna.Trial) -> str:
    role = trial.user_attrs.get(attrs.ROLE)
    if role == attrs.ROLE_CONTROL:
        return f"trial {trial.number} (the default, a control)"
    return f"trial {trial.number} (the default)" if role else f"trial {trial.number}"
