"""The study's budget: trials counted, time left, what a run may take.

``--time 20m`` means it: no run is started that cannot finish in the time
left at its rung, a run that would pass the end is stopped there (outcome
``budget``, never against its config), and what verifying at the end will
take is kept back as it becomes known (``reserve``). A run's time here is
the default's, with its overhead (``costs``). ``--trials N`` counts
sampled trials on every worker.
"""

from __future__ import annotations

import time

import optuna
from optuna.trial import TrialState

from knobtune.errors import UsageError
from knobtune.tuning.records import Outcome, TrialRecord, attrs, records, top_trials
from knobtune.tuning.document import Experiment
from knobtune.tuning.loop.costs import Costs
from knobtune.tuning.loop.progress import Reporter
from knobtune.tuning.loop.reserve import Reserve
from knobtune.tuning.loop.workers import Workers
from knobtune.workloads import Rung


def _minutes(seconds: float) -> str:
    return f"{max(1, -(-int(seconds) // 60))}m"


class Budget:
    """Owns the deadline; answers whether a trial or a run may start, and what a run may take."""

    def __init__(self, experiment: Experiment, workers: Workers, reporter: Reporter, known: tuple[str, ...],
                 twins: bool, crash_check: bool, started_at: float | None = None) -> None:
        """``known``: the labels of the known configs verified beside the result; ``twins``: the verification
        re-checks candidates with the workload's twin first; ``crash_check``: it ends with the winner's;
        ``started_at``: when the command began (Unix time; the budget counts from there, a server's load included)."""
        e = experiment
        self.experiment, self.workers, self.reporter = e, workers, reporter
        self.costs = Costs(e, workers)
        self.reserve = Reserve(e, workers, reporter, self.costs, known, twins, crash_check)
        # when the search ends (Unix time): a worker joining a study reads the study's before each trial
        started_at = time.time() if started_at is None else started_at
        self.deadline = None if e.budget.time_s is None or e.joining else started_at + e.budget.time_s
        self._checked_pace = False  # whether the budget was checked against the system's pace, once the default ran
        self.reserve_searched = False  # the reserve went to the search: no config had reached full size (see below)

    def time_left_s(self) -> float | None:
        """Time left for the search: to the study's deadline, less what verification will need (unless that time
        went to the search: ``_search_the_reserve``)."""
        kept_back = 0.0 if self.reserve_searched else self.reserve.kept_s
        return None if self.deadline is None else self.deadline - time.time() - kept_back

    # ------------------------------------------------------------ trials

    def may_start_trial(self) -> bool:
        e, study = self.experiment, self.workers.study
        if e.joining:
            self.deadline = study.user_attrs.get(attrs.DEADLINE)  # the study's, as its latest `tune` set it
        self.reserve.keep_back()
        if self.workers.own_default(e.rungs[-1]) is None:  # nothing else runs before this machine's default
            left = self.time_left_s()
            if e.joining and left is not None and left <= 0:
                self.reporter.note("the study's time budget is spent")
                return False
            return True
        if e.budget.trials is not None and len(self.counted_trials()) >= e.budget.trials:
            return False
        fits = self.ladder_fits()
        if not fits and not self._checked_pace:
            self._refuse_unusable_budget()
        self._checked_pace = True
        if not fits and self._search_the_reserve():
            fits = self.ladder_fits()
        return fits

    def _search_the_reserve(self) -> bool:
        """When the search's window closes with no sampled config at full size, there is nothing to verify: the
        time kept back for it would go unused (a 30-minute Cassandra study ended 18 minutes early). It goes to the
        search instead, said once; a config reaching full size in it is named as a lead (``finish.name_lead``),
        not verified inside --time. True when the reserve was just given to the search."""
        e = self.experiment
        if self.reserve_searched or e.joining or self.reserve.kept_s <= 0 or top_trials(self.workers.study, 1):
            return False
        self.reserve_searched = True
        self.reporter.note(f"no sampled config has reached full size, so the ~{self.reserve.kept_s:.0f} s kept back "
                           "for verifying go to the search: a config that reaches full size now is named for you to "
                           "verify (the same command with a longer --time resumes the study and verifies it), "
                           "not verified inside --time")
        return True

    def counted_trials(self) -> list[TrialRecord]:
        """The sampled trials --trials counts: finished ones (not interrupted, not failed by the machine, not lost to
        another worker's heartbeat check: their configs run again and count then; not given up for the budget before
        they ran) and those running, on any worker; by number."""
        def counted(r: TrialRecord) -> bool:
            if r.is_default or r.state == TrialState.WAITING:
                return False
            if r.state == TrialState.RUNNING:
                return True
            return (r.outcome or Outcome.INTERRUPTED) not in (Outcome.INTERRUPTED, Outcome.TOOL) \
                and not r.taken_over and r.config_hash is not None
        # a trial given up right after asking has no config
        return [r for r in records(self.workers.study) if counted(r)]

    def over_trial_budget(self, trial: optuna.Trial) -> bool:
        """Whether ``trial``, just asked, would pass --trials: workers check the count, then ask, so two may ask
        for the last trial at once. Trial numbers settle it: the lower number runs, the higher gives way."""
        e = self.experiment
        if e.budget.trials is None or attrs.is_default(trial.user_attrs):
            return False
        return len([r for r in self.counted_trials() if r.number < trial.number]) >= e.budget.trials

    # ------------------------------------------------------------ runs

    def _refuse_unusable_budget(self) -> None:
        """A --time that cannot hold one sampled trial and its verification at the pace the default showed is
        refused, with the budget that would, rather than left unused (a study with candidates verifies them).

        Raises:
            UsageError: no sampled config has completed and none can climb the ladder in the time left.
        """
        e = self.experiment
        if e.budget.time_s is None or e.joining or self.deadline is None or top_trials(self.workers.study, 1):
            return
        spent_s = e.budget.time_s - (self.deadline - time.time())
        ladder_s = sum(self.costs.default_s(rung) for rung in e.rungs)
        verify_s = self.reserve.estimate_s(1, False) if e.proof.verify_top > 0 and e.proof.repeats > 0 else 0.0
        needed_s = spent_s + ladder_s + verify_s
        raise UsageError(f"--time {_minutes(e.budget.time_s)} cannot hold a sampled trial and its verification at "
                         f"this system's pace: {spent_s:.0f} s are spent (the load and the default's ladder), a trial "
                         f"climbing the ladder takes ~{ladder_s:.0f} s and verifying it ~{verify_s:.0f} s. Fix: "
                         f"--time {_minutes(needed_s * 1.1)} or more (the default's runs are kept: the same command "
                         "resumes the study), or fewer --repeats")

    def rung_limit_s(self, rung: Rung) -> float | None:
        """``timeout_factor`` times this machine's default's time at ``rung`` (at least ``min_timeout_s``);
        None before it ran."""
        base = self.workers.own_default(rung)
        e = self.experiment
        return None if base is None else e.measurement.limit_s(base.elapsed_s)

    def limit_s(self, rung: Rung) -> float | None:
        """The time a run at ``rung`` may take: its rung limit, never past the budget's end."""
        limit, left = self.rung_limit_s(rung), self.time_left_s()
        if left is not None:
            limit = left if limit is None else min(limit, left)
        return limit

    def cut_by_budget_s(self, rung: Rung) -> float | None:
        """The time limit of a run at ``rung`` when the budget's end comes before its own limit; else None."""
        limit, own = self.limit_s(rung), self.rung_limit_s(rung)
        return limit if limit is not None and own is not None and limit < own else None

    def fits(self, rung: Rung) -> bool:
        """Whether a run at ``rung`` may start: the time left holds a run as long as the default's there. A run
        that takes longer is stopped at the budget's end and counts as ``budget``, never against its config."""
        left = self.time_left_s()
        return left is None or left >= self.costs.default_s(rung)

    def ladder_fits(self) -> bool:
        """Whether a new trial can still climb to full size in the time left, each rung as long as the default's.
        A config slower than that could not beat the default, so only a loser is cut by the budget's end."""
        left = self.time_left_s()
        return left is None or left >= sum(self.costs.default_s(rung) for rung in self.experiment.rungs)
