"""Run a study: the default first at every rung, then sampled configs up a fidelity ladder, then proof.

The loop reads in the order it runs; each part is a module of its own:
- ``tuning.document``: what the study is asked to do (the ``Experiment``), written on the study once;
- ``workers``: this process and machine among the study's workers (its own default, the study's units);
- ``resume``: interrupted trials queued again, the known configs a new study tries first;
- ``budget``: trials counted, time left, what a run may take (``reserve``: what verifying will take);
- ``trial``: one config up the ladder (``runs``: a run at one rung), and how it ended told to Optuna;
- ``tuning.proof``: the best candidates proven against the default with interleaved repeats.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from knobtune.errors import UsageError
from knobtune.interrupts import InterruptsDeferred, raise_if_stopped
from knobtune.storage import HEARTBEAT_S, StudyStore
from knobtune.targets import Target
from knobtune.systems import make_target
from knobtune.tuning.records import attrs, records
from knobtune.tuning.loop.budget import Budget
from knobtune.tuning.document import Experiment, narrowed, stored_document
from knobtune.tuning.proof import name_lead, verify_study
from knobtune.tuning.search import (
    LEARNS_FROM_TRIALS, Guide, LearnsFromEarlier, given_at_most, make_sampler, removed_note)
from knobtune.tuning.loop.earlier import NO_EARLIER, Earlier, find_earlier, still_stored, stored_shape
from knobtune.tuning.loop.owner import running
from knobtune.tuning.loop.progress import Progress, Reporter
from knobtune.tuning.loop.pruning import DefaultAwareHalvingPruner
from knobtune.tuning.loop.resume import Queue
from knobtune.tuning.loop.trial import TrialRunner
from knobtune.tuning.loop.workers import Workers, optuna_warnings_silenced

optuna.logging.set_verbosity(optuna.logging.WARNING)

__all__ = ["Progress", "Tuner"]


class Tuner:
    """Runs one experiment's study to its budget on this machine, then (unless joining) verifies the result."""

    def __init__(self, experiment: Experiment, store: StudyStore,
                 on_progress: Callable[[Progress], None] | None = None) -> None:
        if experiment.budget.trials is None and experiment.budget.time_s is None:
            raise UsageError("no budget given. Fix: add --trials N or --time 20m")
        self.experiment = experiment
        self.store = store
        self.reporter = Reporter(on_progress)
        self._started_at = time.time()  # --time counts from run(): a server's load is part of the user's wall clock
        self.trials_run = 0  # trials this process ran (the defaults included)
        self._queue: Queue | None = None  # made once the study is open; the storage's stale-trial callback uses it

    def run(self) -> optuna.Study:
        """Run the study to its budget, then verify. Finished trials are never lost.

        Raises:
            UsageError: another live process runs the study in its SQLite storage (``tuning.loop.owner``).
            KnobtuneError: the default config cannot run, the machine failed, or a setting conflicts.
        """
        if self.experiment.joining:
            return self._run()
        with running(self.store, self.experiment.study_name):  # one `tune` at a time on a study kept in SQLite
            return self._run()

    def _run(self) -> optuna.Study:
        e = self.experiment
        self._started_at = time.time()
        self.store.remove_stale_scratch()
        target = make_target(e.catalog, e.workload, self.store.worker_scratch(), e.driver, settle=e.research.settle,
                             memory_limit_bytes=e.limits.memory_limit_bytes, scale_rungs=e.rungs_run_scaled)
        with target:  # checks the tools before anything is stored
            if note := target.open_note():
                self.reporter.note(note)
            e = self.experiment = narrowed(e, target, self.reporter.note)
            known = target.known_configs()
            storage = self.store.storage(on_stale=self._requeue_stale, on_note=self.reporter.note)
            study = self._open_study(storage)
            workers = Workers(study, storage, e, self.reporter)
            queue = self._queue = Queue(workers, self.reporter)
            budget = Budget(e, workers, self.reporter, known=tuple(k.label for k in known if k.beside)
                            if e.proof.known_configs else (), twins=target.twin() is not None,
                            crash_check=target.has_crash_check(), started_at=self._started_at)
            self.reporter.time_left_s = budget.time_left_s
            facts = workers.check_machine(self.store.scratch_root, target.version())
            queue.recover_interrupted()
            self._record(study, budget, target, facts, workers)
            earlier = self._learn_from_earlier(storage, study, facts)
            queue.tried_elsewhere(earlier.tried)
            queue.plan_known_configs(known)
            queue.learn_from(list(earlier.starts), dict(earlier.as_started))
            self._sampler_learns_from_earlier(storage, study)
            guide = Guide(study, e.space, target, self.reporter.note, memory_limit_bytes=e.planned_memory_limit(),
                          trials=e.budget.trials, enabled=e.research.rules and not e.joining)
            runner = TrialRunner(workers, budget, queue, self.reporter, self.store, guide)
            try:
                self._search(target, workers, budget, queue, runner)
            finally:
                self.trials_run = runner.trials_run
            if e.proof.verify_top > 0 and e.proof.repeats > 0 and not e.joining:
                self._verify(study, target, budget)
        return study

    def _requeue_stale(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if self._queue is not None:
            self._queue.requeue_stale(study, trial)

    def _open_study(self, storage: optuna.storages.BaseStorage) -> optuna.Study:
        e = self.experiment
        s = e.search
        sampler = make_sampler(s.sampler, s.seed if e.sampler_seed is None else e.sampler_seed, e.budget.trials,
                               param_names=e.space.param_names(), basin_share=s.basin_share,
                               basin_knobs=e.space.deciding_knobs())
        with optuna_warnings_silenced():
            study = optuna.create_study(study_name=e.study_name, storage=storage, sampler=sampler,
                                        pruner=DefaultAwareHalvingPruner(e.search.reduction_factor,
                                                                         e.research.halving_after_gains),
                                        direction="maximize" if e.objective.maximize else "minimize",
                                        load_if_exists=True)
        e.check_matches(study.user_attrs)
        if attrs.SYSTEM in study.user_attrs and (
                note := removed_note(stored_document(study.user_attrs, e.study_name).search.sampler, s.sampler)):
            self.reporter.note(note)
        return study

    def _record(self, study: optuna.Study, budget: Budget, target: Target, facts: dict, workers: Workers) -> None:
        """Write what happened on a new study; each `tune` (not a joining worker) writes the document anew."""
        e = self.experiment
        if not e.joining:  # the document, for workers joining the study; a resumed run may change its budget
            study.set_user_attr(attrs.EXPERIMENT, e.doc.record())
            study.set_user_attr(attrs.DEADLINE, budget.deadline)
        if attrs.SYSTEM in study.user_attrs:
            return
        for key, value in e.facts(target.driver, target.version(), facts, workers.machine).items():
            study.set_user_attr(key, value)
        study.set_user_attr(attrs.SHAPE, stored_shape(target.workload_facts().shape()))

    def _learn_from_earlier(self, storage: optuna.storages.BaseStorage, study: optuna.Study, facts: dict) -> Earlier:
        """The earlier studies alike a new study learns from (``earlier``): the configs it tries first from them,
        and the ones of its own they tried already; once, when it is new and neither the research switch nor
        --start-from says otherwise."""
        e = self.experiment
        if e.joining or not e.research.earlier_studies or e.start_configs or attrs.EARLIER in study.user_attrs \
                or attrs.SHAPE not in study.user_attrs or any(not r.is_default for r in records(study)):
            return NO_EARLIER
        found = find_earlier(storage, e.study_name, e.catalog.system, facts, study.user_attrs[attrs.SHAPE])
        study.set_user_attr(attrs.EARLIER, found.names)
        shown = given_at_most(found.studies) if e.search.sampler in LEARNS_FROM_TRIALS else 0
        study.set_user_attr(attrs.EARLIER_TRIALS, shown)
        if found.studies:
            many = len(found.studies) > 1
            self.reporter.note(f"started from {len(found.studies)} earlier stud{'ies' if many else 'y'} of a "
                               f"workload alike ({', '.join(found.names)}): their {len(found.starts)} best "
                               f"config(s) go first" + (f", and the sampler learns from their {shown} trials"
                                                        if shown else "") + " (--no-earlier-studies: none)")
        return found

    def _sampler_learns_from_earlier(self, storage: optuna.storages.BaseStorage, study: optuna.Study) -> None:
        """A sampler that models the study's trials also shown the trials of the earlier studies the study started
        from (``tuning.search.prior``), in a new study, its resumes and its workers alike."""
        e = self.experiment
        if not e.research.earlier_studies or e.search.sampler not in LEARNS_FROM_TRIALS \
                or not study.user_attrs.get(attrs.EARLIER_TRIALS):
            return
        if earlier := still_stored(storage, study.user_attrs.get(attrs.EARLIER) or []):
            study.sampler = LearnsFromEarlier(study.sampler, earlier)

    def _search(self, target: Target, workers: Workers, budget: Budget, queue: Queue, runner: TrialRunner) -> None:
        """Ask for trials and run them while the budget allows; then wait for other workers' trials to end."""
        while True:
            while budget.may_start_trial():
                raise_if_stopped()  # a stop whose KeyboardInterrupt was lost in a finalizer asks for no more trials
                self._tidy(workers, queue)
                # Ctrl-C or SIGTERM before the trial is recorded as this process's would leave it RUNNING for good
                # (no heartbeat yet; another machine never looks for this pid): deferred until the runner has recorded
                # its worker and config, then delivered there (the trial is marked interrupted, its config queued)
                with InterruptsDeferred() as deferred:
                    trial = self._ask(workers, budget, queue)
                    if budget.over_trial_budget(trial):
                        runner.give_way(trial, "other workers' trials reached --trials first")
                        break
                    runner.run(target, trial, owned=deferred.release)
            if self.experiment.joining or not self._await_other_workers(workers, queue):
                return  # a worker leaves verifying to the study's process; nothing (more) may run
            if not budget.may_start_trial():
                self._note_retries_left(workers)
                return

    def _note_retries_left(self, workers: Workers) -> None:
        """A lost trial's config queued again while another worker asked for the last trial --trials allows: the
        lower trial number ran (``Budget.over_trial_budget``), the re-run stays queued. Said, with how to run it."""
        for t in workers.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            if attrs.RETRY_OF in t.user_attrs:
                self.reporter.note(f"trial {t.number} (the config of lost trial {t.user_attrs[attrs.RETRY_OF]}, queued "
                                   f"again) did not run: another worker's trial took the last of --trials "
                                   f"{self.experiment.budget.trials} first; the same command with a larger --trials "
                                   "runs it first")

    def _tidy(self, workers: Workers, queue: Queue) -> None:
        """Before asking: dead workers' trials queued again; a sibling process measuring this machine's default
        waited for (it may take minutes: Ctrl-C must stop this wait, so it is not part of the ask)."""
        workers.fail_stale()
        queue.recover_interrupted()  # a dead process on this host is seen at once, without waiting for staleness
        full = self.experiment.rungs[-1]
        while workers.own_default(full) is None and workers.default_running_elsewhere():
            time.sleep(HEARTBEAT_S / 5)  # the default of this machine is being measured by a sibling process

    def _ask(self, workers: Workers, budget: Budget, queue: Queue) -> optuna.Trial:
        """The next trial: this machine's default when it has none or a control is due, else the queue's (known
        configs, interrupted trials) or the sampler's next config."""
        full = self.experiment.rungs[-1]
        if workers.own_default(full) is None:
            return workers.ask_default(attrs.ROLE_DEFAULT)
        queue.release_known_configs()
        if (why := workers.control_due()) and budget.fits(full):
            self.reporter.note(f"re-running the default as a control ({why})")
            return workers.ask_default(attrs.ROLE_CONTROL)
        with optuna_warnings_silenced():
            return workers.study.ask()

    def _await_other_workers(self, workers: Workers, queue: Queue) -> bool:
        """Before verifying: wait while other workers still run trials. True when there may be more to search
        (a dead worker's trial was queued again), False when the search is over."""
        noted = False
        while running := workers.others_running():
            if not noted:
                self.reporter.note(f"waiting for {len(running)} trial(s) of other workers to end before verifying")
                noted = True
            time.sleep(HEARTBEAT_S / 2)
            workers.fail_stale()
            queue.recover_interrupted()
        return any(t.state == TrialState.WAITING for t in workers.study.get_trials(deepcopy=False))

    def _verify(self, study: optuna.Study, target: Target, budget: Budget) -> None:
        searched_s = self.reporter.elapsed_s()
        if budget.reserve_searched:  # what verifying needed went to the search: a config found there is a lead
            name_lead(study, self.experiment, self.reporter.note)
        else:
            verify_study(study, target, budget.reserve.fitted_verification(),
                         self.store.artifacts(self.experiment.study_name) / "verify", self.reporter.note,
                         room=budget.reserve.room(budget.deadline))
        study.set_user_attr(attrs.TIME_SPENT, {"search_s": searched_s, "reserved_s": budget.reserve.kept_s,
                                               "verification_s": self.reporter.elapsed_s() - searched_s,
                                               "budget_s": self.experiment.budget.time_s,
                                               "reserve_searched": budget.reserve_searched,
                                               "trials": self.trials_run})

