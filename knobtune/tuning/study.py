"""Run a study: the default first at every rung, then sampled configs up a fidelity ladder.

Each trial is one config. It runs at the smallest rung first; Optuna's
successive-halving pruner decides whether it climbs to the next. A run that
takes longer than ``timeout_factor`` times the default's time at that rung is
stopped (outcome ``timeout``). The same config is never measured twice at the
same rung: its result is reused. A study killed mid-trial is resumed by
running ``tune`` again: the interrupted trial is marked and its config queued
again. At the end the best candidates are proven against the default with
interleaved repeats (``tuning.verify``).

Several processes may work on one study (``knobtune worker``, docs/workers.md):
each machine measures the default first, every trial records the machine it
ran on and its ratio to that machine's latest default, and a trial on another
machine than the first is told to Optuna in the first machine's units (its
ratio times the first machine's default), so pruning and the best compare
like with like. A trial whose process stops sending heartbeats is run again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

import knobtune
from knobtune.errors import KnobtuneError, UsageError
from knobtune.storage import HEARTBEAT_S, StudyStore, pid_alive
from knobtune.targets import RunFailure, Target, make_target
from knobtune.tuning import attrs
from knobtune.tuning.finish import top_trials, verify_study
from knobtune.tuning.machine import differences, machine_facts
from knobtune.tuning.settings import TuneSettings
from knobtune.tuning.outcomes import Outcome
from knobtune.tuning.pruning import DefaultAwareHalvingPruner
from knobtune.tuning.samplers import make_sampler
from knobtune.tuning.space import config_hash
from knobtune.tuning.verify import relative_limit_s
from knobtune.workloads import Rung

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class Progress:
    """One event for a progress display."""

    kind: str  # "rung" (a run finished), "trial" (a trial ended), "note" (anything else worth saying)
    message: str
    trial: int | None = None
    rung: int | None = None
    value: float | None = None
    best: float | None = None
    elapsed_s: float = 0.0
    time_left_s: float | None = None


RESERVE_MARGIN = 1.05  # verification's estimate is kept back with this margin
MIN_RUN_OVERHEAD_S = 0.2  # per run, outside its measured time, at the least (db_bench here: ~0.2 s)


def _measured_s(measured: dict) -> float:
    """What a run's record accounts for: its measured time (a settled run's crash-and-reopen is inside it)."""
    return measured["elapsed_s"]


def fitting_verification(estimate_s: Callable[[int, bool], float], wanted: int, limit_s: float) -> tuple[int, bool]:
    """The verification that fits in ``limit_s``, as (candidates, beside the heuristic baselines or not).

    ``estimate_s(top, references)`` is its time. A time budget gives up the baselines' comparison first (it
    informs, it decides nothing), then candidates, down to one, rather than end late; each keeps its repeats.
    """
    options = [(wanted, True)] + [(top, False) for top in range(wanted, 0, -1)]
    return next((option for option in options if estimate_s(*option) <= limit_s), (min(wanted, 1), False))


def run_overhead_s(trial: optuna.trial.FrozenTrial) -> float | None:
    """A finished trial's wall-clock time per run beyond what its runs' records account for (starting the
    program or server, restoring or clearing its data); None while it runs or when it ran nothing."""
    if trial.datetime_start is None or trial.datetime_complete is None:
        return None
    runs = [r for key, r in trial.user_attrs.items()
            if key.startswith(attrs.RUNG_PREFIX) and isinstance(r, dict) and "elapsed_s" in r]
    if not runs:
        return None
    wall = (trial.datetime_complete - trial.datetime_start).total_seconds()
    return max(MIN_RUN_OVERHEAD_S, (wall - sum(map(_measured_s, runs))) / len(runs))


class Tuner:
    def __init__(self, settings: TuneSettings, store: StudyStore,
                 on_progress: Callable[[Progress], None] | None = None) -> None:
        if settings.trials is None and settings.time_budget_s is None:
            raise UsageError("no budget given. Fix: add --trials N or --time 20m")
        self.settings = settings
        self.store = store
        self._emit = on_progress or (lambda event: None)
        self._started = time.monotonic()
        # when the search ends (Unix time): a worker joining a study reads the study's before each trial
        self._deadline = (None if settings.time_budget_s is None or settings.joining
                          else time.time() + settings.time_budget_s)
        self._storage = store.storage(on_stale=self._requeue_stale)
        self._worker = f"{socket.gethostname()}:{os.getpid()}"
        self._machine = settings.machine or socket.gethostname()
        self._units_machine = self._machine  # the machine whose default gives the study's units (set on opening)
        self.trials_run = 0  # trials this process ran (the defaults included)
        self._best: float | None = None
        self._verification_reserve_s = 0.0
        self._verify_top = settings.verify_top  # candidates verified: fewer when a time budget cannot hold them all
        self._verify_references = settings.verify_references  # the heuristic baselines beside them (not when tight)
        self._verification_wanted_s = 0.0  # what verifying all of --verify-top and the baselines would take
        self._verification_fitted_s = 0.0  # what the verification that was fitted to the budget will take
        self._references: tuple[str, ...] = ()  # heuristic baselines the verification runs beside the candidates
        self._overhead_s = MIN_RUN_OVERHEAD_S  # per run beyond its record, as the default's trial measured it
        self._pending_starts: list[tuple[str, dict]] = []  # configs a new study tries first, once its default ran
        self._twins = False  # whether the verification first re-checks candidates with the workload's twin
        self._crash_check = False  # whether the verification ends with the winner's crash check

    # ------------------------------------------------------------ the whole study

    def run(self) -> optuna.Study:
        """Run the study to its budget, then verify. Finished trials are never lost.

        Raises:
            KnobtuneError: the default config cannot run, the machine failed, or a setting conflicts.
        """
        s = self.settings
        self.store.remove_stale_scratch()
        target = make_target(s.catalog, s.workload, self.store.worker_scratch(), s.driver, settle=s.settle,
                             memory_limit_bytes=s.memory_limit_bytes)
        with target:  # checks the tools before anything is stored
            impossible = {k: v for k, v in target.impossible_values().items() if k in s.space.knobs}
            if impossible:
                self.settings = s = dataclasses.replace(s, space=s.space.excluding(impossible))
                self._note("left out, this machine refuses them: "
                           + ", ".join(f"{k}={'/'.join(map(str, v))}" for k, v in impossible.items()))
            self._references = tuple(k.label for k in target.known_configs() if k.beside) if s.verify_references else ()
            self._twins = target.twin() is not None
            self._crash_check = target.has_crash_check()
            study = self._open_study()
            self._check_machine(study, target)
            self._recover_interrupted(study)
            self._record_experiment(study, target)
            self._queue_starting_configs(study, target)
            while True:
                while self._may_start_trial(study):
                    trial = self._ask(study)
                    if self._over_trial_budget(study, trial):
                        self._finish(study, trial, Outcome.BUDGET, "other workers' trials reached --trials first")
                        break
                    self._run_trial(study, target, trial)
                if s.joining or not self._await_other_workers(study) or not self._may_start_trial(study):
                    break  # a worker leaves verifying to the study's process; nothing (more) may run
            if s.verify_top > 0 and s.verify_repeats > 0 and not s.joining:
                searched_s = self._elapsed()
                verify_study(study, target, self._fitted_verification(), self.store.artifacts(s.study_name) / "verify",
                             self._note)
                study.set_user_attr(attrs.TIME_SPENT, {"search_s": searched_s, "reserved_s": self._verification_reserve_s,
                                                       "verification_s": self._elapsed() - searched_s,
                                                       "budget_s": s.time_budget_s})
        return study

    def _open_study(self) -> optuna.Study:
        s = self.settings
        sampler = make_sampler(s.sampler, s.seed if s.sampler_seed is None else s.sampler_seed, s.trials,
                               constraints=recovery_constraint if s.max_recovery_s is not None else None,
                               param_names=s.space.param_names(), full_step=self._step(s.rungs[-1]))
        pruner = DefaultAwareHalvingPruner(s.reduction_factor)
        with self._warnings_silenced():
            study = optuna.create_study(study_name=s.study_name, storage=self._storage, sampler=sampler,
                                        pruner=pruner, direction="maximize" if s.objective.maximize else "minimize",
                                        load_if_exists=True)
        recorded = study.user_attrs
        for key, given in ((attrs.SYSTEM, s.catalog.system), (attrs.OBJECTIVE, s.objective.value),
                           (attrs.WORKLOAD, s.workload.name)):
            stored = recorded.get(key)
            stored = stored.get("name") if isinstance(stored, dict) else stored
            if stored is not None and stored != given:
                raise UsageError(f"study '{s.study_name}' was created with {key} '{stored}', not '{given}'. "
                                 f"Fix: use the same {key}, or another --study name")
        settled = recorded.get(attrs.SETTLED)
        if settled is not None and settled != s.settle:
            raise UsageError(f"study '{s.study_name}' was created with {'settled' if settled else 'unsettled'} runs: "
                             "its times would not compare. Fix: " + ("drop --unsettled" if settled else "add --unsettled")
                             + ", or use another --study name")
        scaled = recorded.get(attrs.SCALED_RUNGS)
        if scaled is not None and scaled != (s.scale_rungs and s.catalog.scales_rungs):
            raise UsageError(f"study '{s.study_name}' was created with {'scaled' if scaled else 'unscaled'} small "
                             "rungs: their values would not compare. Fix: " + ("drop --unscaled-rungs" if scaled
                             else "add --unscaled-rungs") + ", or use another --study name")
        if attrs.SYSTEM in recorded and recorded.get(attrs.ONLY_RUNG) != s.only_rung:
            raise UsageError(f"study '{s.study_name}' is a " + ("ranking study: `knobtune rank` resumes it"
                             if recorded.get(attrs.ONLY_RUNG) is not None else "tuning study, not a ranking")
                             + ". Fix: use another --study name")
        records = (recorded.get(attrs.WORKLOAD) or {}).get("records")
        if records is not None and records != s.workload.records:
            raise UsageError(f"study '{s.study_name}' was created with {records:,} records, not "
                             f"{s.workload.records:,}: its default's times would not compare. "
                             "Fix: use the same --records, or another --study name")
        return study

    def _record_experiment(self, study: optuna.Study, target: Target) -> None:
        s = self.settings
        if not s.joining:  # how to search, for workers joining the study; a resumed run may change its budget
            study.set_user_attr(attrs.SETTINGS, {key: getattr(s, key) for key in TuneSettings.SHARED})
            study.set_user_attr(attrs.DEADLINE, self._deadline)
        if attrs.SYSTEM in study.user_attrs:
            self._units_machine = study.user_attrs.get(attrs.BASELINE_MACHINE) or self._units_machine
            return
        values = {
            attrs.TOOL_VERSION: knobtune.__version__,
            attrs.SYSTEM: s.catalog.system,
            attrs.SYSTEM_VERSION: target.version(),
            attrs.DRIVER: target.driver,
            attrs.MACHINE: machine_facts(self.store.scratch_root, self._machine, target.version()),
            attrs.BASELINE_MACHINE: self._machine,
            attrs.WORKLOAD: {"name": s.workload.name, "records": s.workload.records,
                             "ladder": list(s.workload.ladder), "key_size": s.workload.key_size,
                             "value_size": s.workload.value_size, "source": str(s.workload.source)},
            attrs.OBJECTIVE: s.objective.value,
            attrs.SEARCHED_KNOBS: list(s.space.knobs),
            attrs.ALLOW_UNSAFE: s.space.allow_unsafe,
            attrs.ALLOW_OPERATIONAL: s.space.allow_operational,
            attrs.LEFT_OUT: {k: v.value for k, v in s.space.left_out.items()},
            attrs.SEED: s.seed,
            attrs.SETTLED: s.settle,
            attrs.SCALED_RUNGS: s.scale_rungs and s.catalog.scales_rungs,
            attrs.MEMORY_LIMIT: s.memory_limit_bytes,
            attrs.MAX_RECOVERY: s.max_recovery_s,
            **({attrs.ONLY_RUNG: s.only_rung} if s.only_rung is not None else {}),
            **({attrs.RANKED_BY: s.ranking} if s.ranking is not None else {}),
        }
        for key, value in values.items():
            study.set_user_attr(key, value)

    # ------------------------------------------------------------ resume

    def _recover_interrupted(self, study: optuna.Study) -> None:
        """Trials left RUNNING by a dead process on this host: mark them and queue their configs again."""
        host = socket.gethostname()
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            worker = str(trial.user_attrs.get(attrs.WORKER, ""))
            worker_host, _, pid = worker.rpartition(":")
            if worker_host != host or not pid.isdigit() or pid_alive(int(pid)):
                continue  # another machine's or a live process's trial
            trial_id = self._trial_id(study, trial.number)
            try:
                self._storage.set_trial_user_attr(trial_id, attrs.OUTCOME, Outcome.INTERRUPTED.value)
                self._storage.set_trial_user_attr(trial_id, attrs.REASON, "knobtune was stopped during this trial")
                study.tell(trial.number, state=TrialState.FAIL)
            except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError):
                continue  # another worker (or the heartbeat check) ended it first and queued it again
            self._requeue(study, trial.params, trial.user_attrs, trial.number)
            self._note(f"trial {trial.number} was interrupted; its config is queued again")

    def _requeue_stale(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """Optuna found a running trial without a heartbeat (its process or machine died) and failed it: run it again."""
        self._requeue(study, trial.params, trial.user_attrs, trial.number)
        self._note(f"trial {trial.number} lost its worker ({trial.user_attrs.get(attrs.WORKER, 'unknown')}); "
                   "its config is queued again")

    def _trial_id(self, study: optuna.Study, number: int) -> int:
        return self._storage.get_trial_id_from_study_id_trial_number(
            self._storage.get_study_id_from_name(study.study_name), number)

    def _still_running(self, study: optuna.Study, number: int) -> bool:
        """Whether the storage still has trial ``number`` running (not yet told how it ended)."""
        return self._storage.get_trial(self._trial_id(study, number)).state == TrialState.RUNNING

    def _queue_starting_configs(self, study: optuna.Study, target: Target) -> None:
        """A new study tries known configs first, right after the default: the target's starting configs (its
        heuristic baselines and those the workload's shape suggests; with ``start_from_baselines``) and
        ``start_configs`` (--start-from), each as far as the search space holds it.
        They are queued when the default has run (``_ask``), so that trial 0 stays the default."""
        s = self.settings
        if s.joining or any(not attrs.is_reference(t.user_attrs) for t in study.get_trials(deepcopy=False)):
            return
        self._pending_starts = ([(k.label, dict(k.changed)) for k in target.known_configs()]
                               if s.start_from_baselines else [])
        self._pending_starts += list(s.start_configs)

    def _enqueue_starts(self, study: optuna.Study) -> None:
        s, starts = self.settings, self._pending_starts
        self._pending_starts = []
        queued = {json.dumps(s.space.params_of(s.catalog.defaults()), sort_keys=True, default=str)}  # the default ran
        for label, changed in starts:
            params = s.space.params_of(s.space.within(s.catalog.config(changed)))
            key = json.dumps(params, sort_keys=True, default=str)
            if key in queued:
                continue  # within this space it is the default, or queued already: nothing new to try
            queued.add(key)
            study.enqueue_trial(params, user_attrs={attrs.STARTED_FROM: label})
            self._note(f"queued first: {label}")

    def _requeue(self, study: optuna.Study, params: dict, user_attrs: dict, number: int) -> None:
        """Queue an interrupted trial's config again (a default is not: each machine re-runs its own when due); a
        known config the study tried first stays one (never pruned)."""
        if attrs.is_reference(user_attrs):
            return
        known = {attrs.STARTED_FROM: user_attrs[attrs.STARTED_FROM]} if attrs.STARTED_FROM in user_attrs else {}
        study.enqueue_trial(params, user_attrs={attrs.RETRY_OF: number, **known}, skip_if_exists=False)

    # ------------------------------------------------------------ machines and workers

    def _check_machine(self, study: optuna.Study, target: Target) -> None:
        """Record this machine's facts on the study; refuse a machine of another kind unless mixing is allowed.

        Raises:
            UsageError: this machine differs from the study's first one and --allow-mixed-machines is missing.
        """
        facts = machine_facts(self.store.scratch_root, self._machine, target.version())
        first = study.user_attrs.get(attrs.MACHINE) or {}
        if first and (differ := differences(facts, first)) and not self.settings.allow_mixed_machines:
            raise UsageError(f"this machine ({self._machine}) is not of the kind study '{study.study_name}' runs on "
                             f"({first.get('name', first.get('host'))}): {'; '.join(differ)}. Fix: run it on a "
                             "machine like the first, or add --allow-mixed-machines (each trial is still compared "
                             "with its own machine's default)")
        study.set_user_attr(attrs.MACHINE_PREFIX + self._machine, facts)

    def _machine_of(self, user_attrs: dict) -> str:
        return str(user_attrs.get(attrs.TRIAL_MACHINE) or self._units_machine)  # trials before workers: the first

    def _own_default(self, study: optuna.Study, rung: Rung) -> dict | None:
        """The latest measurement of the default at ``rung`` on this machine (None before there is one)."""
        key = attrs.rung_key(rung.index)
        for trial in reversed(study.get_trials(deepcopy=False)):
            if attrs.is_reference(trial.user_attrs) and self._machine_of(trial.user_attrs) == self._machine:
                result = trial.user_attrs.get(key)
                if result is not None and "failure" not in result:
                    return result
        return None

    def _default_running_elsewhere(self, study: optuna.Study) -> bool:
        """Whether another live process on this machine is measuring its default right now."""
        return any(attrs.is_reference(t.user_attrs) and self._machine_of(t.user_attrs) == self._machine
                   and t.user_attrs.get(attrs.WORKER) != self._worker
                   for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))

    def _ask(self, study: optuna.Study) -> optuna.Trial:
        """The next trial: this machine's default when it has none or a control is due, else the sampler's (or
        the queue's) next config. Stale trials of dead workers are failed and queued again first."""
        with self._warnings_silenced():
            optuna.storages.fail_stale_trials(study)
        self._recover_interrupted(study)  # a dead process on this host is seen at once, without waiting for staleness
        while (default := self._own_default(study, self.settings.rungs[-1])) is None \
                and self._default_running_elsewhere(study):
            time.sleep(HEARTBEAT_S / 5)  # the default of this machine is being measured by a sibling process
        if default is None:
            return self._ask_default(study, attrs.ROLE_BASELINE)
        if self._pending_starts:
            self._enqueue_starts(study)
        trials = [t for t in study.get_trials(deepcopy=False) if self._machine_of(t.user_attrs) == self._machine]
        if self._control_due(trials) and self._fits(study, self.settings.rungs[-1]):
            self._note("re-running the default as a control (drift check)")
            return self._ask_default(study, attrs.ROLE_CONTROL)
        with self._warnings_silenced():
            return study.ask()

    def _ask_default(self, study: optuna.Study, role: str) -> optuna.Trial:
        """A new trial of the default config for this machine, started now rather than queued: another worker
        must not take it. Its params are fixed the way Optuna's own ``enqueue_trial`` fixes them."""
        params = self.settings.space.params_of(self.settings.catalog.defaults())
        template = optuna.trial.create_trial(state=TrialState.RUNNING, system_attrs={"fixed_params": params},
                                             user_attrs={attrs.ROLE: role})
        trial_id = self._storage.create_new_trial(self._storage.get_study_id_from_name(study.study_name),
                                                  template_trial=template)
        return optuna.Trial(study, trial_id)

    def _others_running(self, study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
        return [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                if t.user_attrs.get(attrs.WORKER) != self._worker]

    def _await_other_workers(self, study: optuna.Study) -> bool:
        """Before verifying: wait while other workers still run trials. True when there may be more to search
        (a dead worker's trial was queued again), False when the search is over."""
        noted = False
        while running := self._others_running(study):
            if not noted:
                self._note(f"waiting for {len(running)} trial(s) of other workers to end before verifying")
                noted = True
            time.sleep(HEARTBEAT_S / 2)
            with self._warnings_silenced():
                optuna.storages.fail_stale_trials(study)
            self._recover_interrupted(study)
        return any(t.state == TrialState.WAITING for t in study.get_trials(deepcopy=False))

    @contextlib.contextmanager
    def _heartbeat(self, study: optuna.Study, trial: optuna.Trial) -> Iterator[None]:
        """Record a heartbeat for ``trial`` every HEARTBEAT_S while it runs, so other workers know it is alive."""
        trial_id, stop = self._trial_id(study, trial.number), threading.Event()

        def beat() -> None:
            while True:
                self._storage.record_heartbeat(trial_id)
                if stop.wait(HEARTBEAT_S):
                    return

        thread = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    @staticmethod
    @contextlib.contextmanager
    def _warnings_silenced() -> Iterator[None]:
        """Optuna marks the heartbeat API experimental and warns that heartbeats belong to ``Study.optimize``: this
        study records them itself (``_heartbeat``) around each trial it asks for."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
            yield

    # ------------------------------------------------------------ budget

    def _control_due(self, trials: list[optuna.trial.FrozenTrial]) -> bool:
        """Whether ``control_every`` trials have run at full size since the default last ran (on this machine).

        Counting full-size runs (not all trials) keeps the controls' cost near
        1/control_every of the full-size work, however many trials are pruned early.
        """
        every = self.settings.control_every
        if every <= 0:
            return False
        since = 0
        for trial in reversed(trials):
            if attrs.is_reference(trial.user_attrs):
                return since >= every
            if trial.state == TrialState.COMPLETE:
                since += 1
        return False

    def time_left_s(self) -> float | None:
        """Time left for the search: to the study's deadline, less what verification will need."""
        if self._deadline is None:
            return None
        return self._deadline - time.time() - self._verification_reserve_s

    def _reserve_verification(self, study: optuna.Study) -> None:
        """Keep back, from a time budget, what verifying at the end will take, as it becomes known.

        The verification runs each candidate and the default (and the heuristic baselines) ``verify_repeats``
        times at full size; its candidates are the best configs so far plus, until there are ``verify_top`` of
        them, the next one that may complete. Each run is estimated from its own full-size measurement (the
        default's for a candidate yet to come, and for the baselines): the run's time (a settled run's
        crash-and-reopen is part of it) and the per-run overhead. The twin check and, where the target has one, the
        winner's crash check add runs like the default's. Never more than half the budget: when verifying all of
        ``verify_top`` would take more, fewer candidates are verified (at least one, each with all its repeats).
        """
        s = self.settings
        default = self._own_default(study, s.rungs[-1])
        if s.time_budget_s is None or default is None or s.verify_top <= 0:
            return
        self._overhead_s = self._measured_overhead_s(study)
        full = attrs.rung_key(s.rungs[-1].index)
        known = [t.user_attrs[full] for t in top_trials(study, s.verify_top) if full in t.user_attrs]
        cost = self._run_cost_s

        def estimate_s(top: int, references: bool) -> float:
            candidates = known[:top] + [default] * (len(known[:top]) < top)
            per_round = sum(map(cost, candidates)) + (1 + len(self._references) * references) * cost(default)
            extra = (2 * len(candidates) if self._twins else 0) + self._crash_check  # twins write, then read back
            return (per_round * s.verify_repeats + extra * cost(default)) * RESERVE_MARGIN

        self._verify_top, references = fitting_verification(estimate_s, s.verify_top, s.time_budget_s / 2)
        self._verify_references = s.verify_references and references
        self._verification_fitted_s = estimate_s(self._verify_top, self._verify_references)
        self._verification_reserve_s = min(self._verification_fitted_s, s.time_budget_s / 2)
        self._verification_wanted_s = estimate_s(s.verify_top, True)

    def _fitted_verification(self) -> TuneSettings:
        """The settings to verify with, fitted to half the time budget; what was given up, and any lateness, said."""
        s = self.settings
        left_out = () if self._verify_references else self._references
        given_up = ([f"the top {self._verify_top} of --verify-top {s.verify_top}"] * (self._verify_top < s.verify_top)
                    + [f"without {', '.join(left_out)} beside the default"] * bool(left_out))
        late_s = self._verification_fitted_s - s.time_budget_s / 2 if s.time_budget_s else 0.0
        if given_up:
            self._note(f"verifying {' '.join(given_up)}: all would take ~{self._verification_wanted_s:.0f} s, more "
                       f"than half of the {s.time_budget_s:.0f} s budget. Fix, for more: a longer --time")
        if late_s > 0:
            self._note(f"verifying needs ~{self._verification_fitted_s:.0f} s, more than half of the "
                       f"{s.time_budget_s:.0f} s budget: tune ends ~{late_s:.0f} s past --time. "
                       "Fix: a longer --time, or fewer --repeats")
        return dataclasses.replace(s, verify_top=self._verify_top, verify_references=self._verify_references)

    def _measured_overhead_s(self, study: optuna.Study) -> float:
        """The per-run overhead of this machine's latest finished default trial (at least the minimum)."""
        for trial in reversed(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))):
            if attrs.is_reference(trial.user_attrs) and self._machine_of(trial.user_attrs) == self._machine:
                if (overhead := run_overhead_s(trial)) is not None:
                    return overhead
        return MIN_RUN_OVERHEAD_S

    def _run_cost_s(self, measured: dict) -> float:
        """The wall-clock time a run like ``measured`` takes here: its record's time plus the per-run overhead
        measured on this machine's default trial (its wall time beyond its runs' records)."""
        return _measured_s(measured) + self._overhead_s

    def _rung_limit_s(self, study: optuna.Study, rung: Rung) -> float | None:
        """``timeout_factor`` times this machine's default's time at ``rung`` (at least ``min_timeout_s``);
        None before it ran."""
        base = self._own_default(study, rung)
        if base is None:
            return None
        return relative_limit_s(base["elapsed_s"], self.settings.timeout_factor, self.settings.min_timeout_s)

    def limit_s(self, study: optuna.Study, rung: Rung) -> float | None:
        """The time a run at ``rung`` may take: its rung limit, never past the budget's end."""
        limit, left = self._rung_limit_s(study, rung), self.time_left_s()
        if left is not None:
            limit = left if limit is None else min(limit, left)
        return limit

    def _default_cost_s(self, study: optuna.Study, rung: Rung) -> float:
        """The wall-clock time this machine's default took at ``rung`` (``min_timeout_s`` before it ran)."""
        base = self._own_default(study, rung)
        return self.settings.min_timeout_s if base is None else self._run_cost_s(base)

    def _fits(self, study: optuna.Study, rung: Rung) -> bool:
        """Whether a run at ``rung`` may start: the time left holds a run as long as the default's there. A run
        that takes longer is stopped at the budget's end and counts as ``budget``, never against its config."""
        left = self.time_left_s()
        return left is None or left >= self._default_cost_s(study, rung)

    def _ladder_fits(self, study: optuna.Study) -> bool:
        """Whether a new trial can still climb to full size in the time left, each rung as long as the default's.
        A config slower than that could not beat the default, so only a loser is cut by the budget's end."""
        left = self.time_left_s()
        return left is None or left >= sum(self._default_cost_s(study, rung) for rung in self.settings.rungs)

    def _cut_by_budget_s(self, study: optuna.Study, rung: Rung) -> float | None:
        """The time limit of a run at ``rung`` when the budget's end comes before its own limit; else None."""
        limit, own = self.limit_s(study, rung), self._rung_limit_s(study, rung)
        return limit if limit is not None and own is not None and limit < own else None

    def _may_start_trial(self, study: optuna.Study) -> bool:
        s = self.settings
        if s.joining:
            self._deadline = study.user_attrs.get(attrs.DEADLINE)  # the study's, as its latest `tune` set it
        self._reserve_verification(study)
        if self._own_default(study, s.rungs[-1]) is None:  # nothing else runs before this machine's default
            left = self.time_left_s()
            if s.joining and left is not None and left <= 0:
                self._note("the study's time budget is spent")
                return False
            return True
        if s.trials is not None and len(self._counted_trials(study)) >= s.trials:
            return False
        return self._ladder_fits(study)

    def _counted_trials(self, study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
        """The sampled trials --trials counts: finished ones (not interrupted, not given up for the budget before
        they ran) and those running, on any worker; by number."""
        def counted(t: optuna.trial.FrozenTrial) -> bool:
            if attrs.is_reference(t.user_attrs) or t.state == TrialState.WAITING:
                return False
            if t.state == TrialState.RUNNING:
                return True
            return (t.user_attrs.get(attrs.OUTCOME, Outcome.INTERRUPTED.value) != Outcome.INTERRUPTED.value
                    and attrs.CONFIG in t.user_attrs)  # a trial given up right after it was asked has no config
        return [t for t in study.get_trials(deepcopy=False) if counted(t)]

    def _over_trial_budget(self, study: optuna.Study, trial: optuna.Trial) -> bool:
        """Whether ``trial``, just asked, would pass --trials: workers check the count, then ask, so two may ask
        for the last trial at once. Trial numbers settle it: the lower number runs, the higher gives way."""
        s = self.settings
        if s.trials is None or attrs.is_reference(trial.user_attrs):
            return False
        ahead = [t for t in self._counted_trials(study) if t.number < trial.number]
        return len(ahead) >= s.trials

    # ------------------------------------------------------------ one trial

    def _run_trial(self, study: optuna.Study, target: Target, trial: optuna.Trial) -> None:
        s = self.settings
        is_baseline = attrs.is_reference(trial.user_attrs)  # the default: never pruned, never reused
        self.trials_run += 1
        trial.set_user_attr(attrs.WORKER, self._worker)
        trial.set_user_attr(attrs.TRIAL_MACHINE, self._machine)
        config, repairs = s.space.suggest(trial)
        changed = s.catalog.changed(config)
        digest = config_hash(changed)
        trial.set_user_attr(attrs.CONFIG, changed)
        trial.set_user_attr(attrs.CONFIG_HASH, digest)
        if repairs:
            trial.set_user_attr(attrs.REPAIRED, repairs)
        unsafe = s.catalog.unsafe_in(config)
        if unsafe:
            trial.set_user_attr(attrs.UNSAFE, {k: v.value for k, v in unsafe.items()})
        planned = s.catalog.memory.planned_bytes(config)
        trial.set_user_attr(attrs.PLANNED_MEMORY, planned)
        try:
            with self._heartbeat(study, trial):
                outcome = self._start(study, target, trial, config, digest, is_baseline)
        except BaseException:  # Ctrl-C or a failure of ours: keep the trial, queue the config again
            if self._still_running(study, trial.number):  # Ctrl-C may land after Optuna recorded its end
                trial.set_user_attr(attrs.OUTCOME, Outcome.INTERRUPTED.value)
                study.tell(trial, state=TrialState.FAIL)
                self._requeue(study, trial.params, trial.user_attrs, trial.number)
            raise
        if is_baseline and outcome is Outcome.COMPLETE:
            self._record_control(study, trial)
        if is_baseline and outcome is Outcome.TIMEOUT and s.time_budget_s is not None:
            raise UsageError(f"--time is too short: the default config alone did not finish within it "
                             f"({trial.user_attrs.get(attrs.REASON)}). Fix: give more time, or a smaller --records")
        if is_baseline and outcome is Outcome.MEMORY:
            raise UsageError(f"--memory-limit is too low for the default config: "
                             f"{trial.user_attrs.get(attrs.REASON)}. Fix: raise --memory-limit")
        if is_baseline and outcome is not Outcome.COMPLETE:
            reason = trial.user_attrs.get(attrs.REASON, outcome.value)
            raise KnobtuneError(f"the default config failed ({reason}). Fix: check the workload and the "
                                f"system with `knobtune systems`; raw output is in {self.store.artifacts(s.study_name)}")
        if outcome is Outcome.TOOL:
            self._requeue(study, trial.params, trial.user_attrs, trial.number)
            raise KnobtuneError(f"trial {trial.number} failed for a reason that is not the config's: "
                                f"{trial.user_attrs.get(attrs.REASON)}. Its config is queued again; fix the machine "
                                "and run the same command to resume")

    def _start(self, study: optuna.Study, target: Target, trial: optuna.Trial, config: dict,
               digest: str, is_baseline: bool) -> Outcome:
        """Apply ``config`` unless its memory plan is over the limit, then climb; a refusal ends the trial."""
        if over := self.settings.catalog.memory.over_limit(config, self.settings.memory_limit_bytes):
            return self._fail(study, trial, Outcome.MEMORY, over, self.settings.rungs[0], is_baseline)
        try:
            target.apply(config)
        except RunFailure as failure:  # the system would not take the config: the trial's outcome, not our error
            return self._fail(study, trial, Outcome.of_failure(failure.kind), failure.reason, self.settings.rungs[0],
                              is_baseline)
        return self._climb(study, target, trial, config, digest, is_baseline)

    def _fail(self, study: optuna.Study, trial: optuna.Trial, outcome: Outcome, reason: str, rung: Rung,
              is_baseline: bool) -> Outcome:
        """End a trial that failed at ``rung``; a failure the config caused first reports a pessimistic value there."""
        if outcome.config_fault and not is_baseline and self._own_default(study, rung) is not None:  # not yet reported
            trial.report(self._pessimistic(study, rung), step=self._step(rung))
            trial.should_prune()  # records the rung so later trials compete with it
        return self._finish(study, trial, outcome, reason)

    def _climb(self, study: optuna.Study, target: Target, trial: optuna.Trial, config: dict, digest: str,
               is_baseline: bool) -> Outcome:
        """Run ``trial`` (``config``, already applied) up the ladder; tell Optuna how it ended and return the
        outcome. With ``scale_rungs``, each rung runs the config scaled to its share of the data.

        The default and a known config a new study tries first (``started_from``: a heuristic baseline, a previous
        study's best) are never pruned: they climb to full size unless they fail or time out. A known config is
        worth its full-size run, and a small rung's noise must not throw it away (docs/tuning.md).
        """
        s = self.settings
        rungs = s.rungs
        applied = config
        for rung in rungs:
            if not is_baseline and not self._fits(study, rung):
                return self._finish(study, trial, Outcome.BUDGET, "the time budget ended before this rung")
            reused = None if is_baseline else self._reused(study, trial, digest, rung)
            if reused is None and s.scale_rungs and (scaled := s.catalog.at_fraction(config, rung.fraction)) != applied:
                try:
                    target.apply(scaled)
                except RunFailure as failure:
                    return self._fail(study, trial, Outcome.of_failure(failure.kind), failure.reason, rung, is_baseline)
                applied = scaled
            result = reused or self._measure(study, target, trial, rung, is_baseline)
            if "failure" in result:
                return self._fail(study, trial, Outcome(result["failure"]), result["reason"], rung, is_baseline)
            trial.set_user_attr(attrs.REACHED_RUNG, rung.index)
            value = float(result.get("study_value", result["value"]))
            if is_baseline and self._machine == self._units_machine:
                baseline = dict(study.user_attrs.get(attrs.BASELINE, {}))
                baseline[str(rung.index)] = result
                study.set_user_attr(attrs.BASELINE, baseline)
            self._emit(Progress("rung", f"{self._label(trial)} {rung}: {s.objective.show(value)}",
                                trial.number, rung.index, value, self._best, self._elapsed(), self.time_left_s()))
            if rung is rungs[-1]:
                if self._feasible(trial, result, is_baseline):
                    self._best = value if self._best is None or s.objective.better(value, self._best) else self._best
                return self._finish(study, trial, Outcome.COMPLETE, "", value)
            trial.report(value, step=self._step(rung))
            if trial.should_prune() and not is_baseline and attrs.STARTED_FROM not in trial.user_attrs:
                return self._finish(study, trial, Outcome.PRUNED, f"successive halving stopped it after {rung}")
        raise KnobtuneError(f"workload '{s.workload.name}' has an empty fidelity ladder. Fix: give it a ladder")

    def _measure(self, study: optuna.Study, target: Target, trial: optuna.Trial, rung: Rung,
                 is_baseline: bool) -> dict:
        s = self.settings
        log = self.store.artifacts(s.study_name) / f"trial-{trial.number:04d}" / f"rung-{rung.index}.log"
        limit = self.time_left_s() if is_baseline else self.limit_s(study, rung)
        cut = None if is_baseline else self._cut_by_budget_s(study, rung)
        try:
            measurement = target.run(rung, timeout_s=limit, log_path=log, seed=s.seed)
            result = self._on_this_machine(study, rung, {**measurement.summary(), "value": measurement.value(s.objective)},
                                           is_baseline)
        except RunFailure as failure:
            outcome, reason = Outcome.of_failure(failure.kind), failure.reason
            if outcome is Outcome.TIMEOUT and cut is not None:  # stopped by the budget's end, not its own limit
                outcome, reason = Outcome.BUDGET, f"the time budget ended during {rung} (stopped after {cut:.1f} s)"
            result = {"failure": outcome.value, "reason": reason, "log": str(failure.log_path or log)}
        except OSError as exc:  # a folder removed, a disk full: the machine's or our failure, never the config's
            result = {"failure": Outcome.TOOL.value, "reason": f"the machine or knobtune failed: {exc}", "log": str(log)}
        trial.set_user_attr(attrs.rung_key(rung.index), result)
        return result

    def _on_this_machine(self, study: optuna.Study, rung: Rung, result: dict, is_baseline: bool) -> dict:
        """``result`` with its machine, its ratio to this machine's latest default (above 1: better) and its value in
        the study's units: the raw value on the first machine, elsewhere the first machine's default times the ratio."""
        raw, own = result["value"], result if is_baseline else self._own_default(study, rung)
        if own is None:
            return {**result, "machine": self._machine}
        ratio = raw / own["value"] if self.settings.objective.maximize else own["value"] / raw
        return {**result, "machine": self._machine, "ratio": ratio,
                "study_value": self._in_study_units(study, rung, raw, own)}

    def _in_study_units(self, study: optuna.Study, rung: Rung, raw: float, own: dict | None = None) -> float:
        """A value measured on this machine at ``rung``, scaled to the first machine's (unchanged on the first);
        ``own``: this machine's default to scale by (default: its latest)."""
        units = (study.user_attrs.get(attrs.BASELINE) or {}).get(str(rung.index))
        own = own or self._own_default(study, rung)
        if self._machine == self._units_machine or units is None or own is None:
            return raw
        return units["value"] * raw / own["value"]

    def _reused(self, study: optuna.Study, trial: optuna.Trial, digest: str, rung: Rung) -> dict | None:
        """The result of the same config at the same rung from an earlier trial, if there is one; when another
        worker is measuring it right now (an earlier trial of the same config), its result once it is in."""
        key = attrs.rung_key(rung.index)
        while any(other.number < trial.number and other.user_attrs.get(attrs.CONFIG_HASH) == digest
                  and key not in other.user_attrs and other.user_attrs.get(attrs.WORKER) != self._worker
                  and rung.index <= other.user_attrs.get(attrs.REACHED_RUNG, -1) + 1
                  for other in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))):
            time.sleep(HEARTBEAT_S / 5)
        for other in study.get_trials(deepcopy=False):
            if other.number == trial.number or other.user_attrs.get(attrs.CONFIG_HASH) != digest:
                continue
            result = other.user_attrs.get(key)
            if result is not None and ("failure" not in result or Outcome(result["failure"]).config_fault):
                trial.set_user_attr(key, result)
                trial.set_user_attr(attrs.REUSED_FROM, other.number)
                return result
        return None

    def _finish(self, study: optuna.Study, trial: optuna.Trial, outcome: Outcome, reason: str,
                value: float | None = None) -> Outcome:
        trial.set_user_attr(attrs.OUTCOME, outcome.value)
        if reason:
            trial.set_user_attr(attrs.REASON, reason)
        study.tell(trial, value if outcome is Outcome.COMPLETE else None, state=outcome.state)
        shown = self.settings.objective.show(value) if value is not None else reason
        self._emit(Progress("trial", f"{self._label(trial)} {outcome.value}: {shown}", trial.number, None, value,
                            self._best, self._elapsed(), self.time_left_s()))
        return outcome

    def _feasible(self, trial: optuna.Trial, result: dict, is_baseline: bool) -> bool:
        """Check a full-size result against --max-recovery-time; record why it is infeasible if it is not."""
        limit, recovery = self.settings.max_recovery_s, result.get("recovery_s")
        if limit is None or recovery is None:
            return True
        trial.set_user_attr(attrs.RECOVERY_OVER_S, recovery - limit)
        if recovery <= limit:
            return True
        reason = f"recovery after a crash took {recovery:.2f} s, over --max-recovery-time {limit:g} s"
        trial.set_user_attr(attrs.INFEASIBLE, reason)
        self._note(f"{'the default' if is_baseline else self._label(trial)} is infeasible: {reason}")
        return False

    def _record_control(self, study: optuna.Study, trial: optuna.Trial) -> None:
        """Append the default's full-size value to the study's drift record."""
        full = trial.user_attrs.get(attrs.rung_key(self.settings.rungs[-1].index), {})
        controls = list(study.user_attrs.get(attrs.CONTROLS, []))
        controls.append({"trial": trial.number, "at_s": round(self._elapsed(), 1), "value": full.get("value"),
                         "role": trial.user_attrs.get(attrs.ROLE)})
        study.set_user_attr(attrs.CONTROLS, controls)

    # ------------------------------------------------------------ helpers

    def _step(self, rung: Rung) -> int:
        return self.settings.reduction_factor ** rung.index

    def _pessimistic(self, study: optuna.Study, rung: Rung) -> float:
        """What a run that failed at ``rung`` counts as: no better than one that used up its time limit there,
        the default's value scaled by limit / default's time."""
        base = self._own_default(study, rung)
        assert base is not None, "a failure is scored only after this machine's default ran at the rung"
        ratio = max((self.limit_s(study, rung) or 0.0) / base["elapsed_s"], 1.0)
        raw = base["value"] / ratio if self.settings.objective.maximize else base["value"] * ratio
        return self._in_study_units(study, rung, raw)

    @staticmethod
    def _label(trial: optuna.Trial) -> str:
        role = trial.user_attrs.get(attrs.ROLE)
        return f"trial {trial.number} ({role}: the default)" if role else f"trial {trial.number}"

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _note(self, message: str) -> None:
        self._emit(Progress("note", message, best=self._best, elapsed_s=self._elapsed(), time_left_s=self.time_left_s()))


def recovery_constraint(trial: optuna.trial.FrozenTrial) -> list[float]:
    """Optuna's constraint value (<= 0: feasible): full-size recovery time over --max-recovery-time."""
    return [float(trial.user_attrs.get(attrs.RECOVERY_OVER_S, 0.0))]
