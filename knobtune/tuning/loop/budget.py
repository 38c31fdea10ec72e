"""The study's budget: trials counted, time left, what a run may take, and the verification's reserve.

``--time 20m`` means it: no run is started that cannot finish in the time
left at its rung, a run that would pass the end is stopped there (outcome
``budget``, never against its config), and what verifying at the end will
take is kept back as it becomes known: half the budget at most, two thirds
when a candidate is close to the default (its verification may need rounds
beyond the first look; docs/tuning.md, "Budgets"). ``--trials N`` counts
sampled trials on every worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import optuna
from optuna.trial import TrialState

from knobtune.analysis import noise
from knobtune.analysis.sequential import SequentialPlan, rounds_for
from knobtune.errors import UsageError
from knobtune.tuning.records import Outcome, RungRun, TrialRecord, attrs, record_of, records
from knobtune.tuning.document import Experiment
from knobtune.tuning.proof import top_trials
from knobtune.tuning.loop.progress import Reporter
from knobtune.tuning.loop.workers import Workers
from knobtune.workloads import Rung

RESERVE_MARGIN = 1.05  # verification's estimate is kept back with this margin
MIN_RUN_OVERHEAD_S = 0.2  # per run, outside its measured time, at the least (db_bench here: ~0.2 s)
VERIFY_SHARE = 1 / 2  # of a time budget, the most kept back for verifying's first look
CLOSE_SHARE = 2 / 3  # the most, with the rounds a close candidate is expected to need after it
ASSUMED_NOISE = 0.05  # the run-to-run noise assumed before the default has run three times at full size


def fitting_verification(estimate_s: Callable[[int, bool], float], wanted: int, limit_s: float) -> tuple[int, bool]:
    """The verification that fits in ``limit_s``, as (candidates, beside the known configs or not).

    ``estimate_s(top, known)`` is its time. A time budget gives up the known configs' comparison first (it
    informs, it decides nothing), then candidates, down to one, rather than end late; each keeps its repeats.
    """
    options = [(wanted, True)] + [(top, False) for top in range(wanted, 0, -1)]
    return next((option for option in options if estimate_s(*option) <= limit_s), (min(wanted, 1), False))


def close_rounds(ratios: Sequence[float], spread: float, plan: SequentialPlan) -> tuple[int, list[int]]:
    """The rounds after the first look to keep back for verifying, and which candidates are close: those better
    than the default in their single full-size run (``ratios``, > 1 better) by less than the first look can prove
    at the run-to-run ``spread``; the rounds are what the closest is expected to need (``rounds_for``)."""
    needed = {i: rounds_for(ratio, spread, plan) for i, ratio in enumerate(ratios) if ratio > 1}
    close = [i for i, rounds in needed.items() if rounds > plan.first]
    return (max(needed[i] for i in close) - plan.first if close else 0), close


def _minutes(seconds: float) -> str:
    return f"{max(1, -(-int(seconds) // 60))}m"


def run_overhead_s(trial: optuna.trial.FrozenTrial) -> float | None:
    """A finished trial's wall-clock time per run beyond what its runs' records account for (starting the
    program or server, restoring or clearing its data); None while it runs or when it ran nothing. The default's
    warm-up is one of its runs: left out, its whole time was counted as overhead (a 30-minute TPC-C study kept
    823 s back for a verification that took 448 s)."""
    record = record_of(trial)
    runs = [run.elapsed_s for run in record.runs.values() if run.ok]
    if record.seconds is None or not runs:
        return None
    if record.warm_up_s is not None:
        runs.append(record.warm_up_s)
    return max(MIN_RUN_OVERHEAD_S, (record.seconds - sum(runs)) / len(runs))


class Budget:
    """Owns the deadline and the verification's reserve; answers whether a trial or a run may start."""

    def __init__(self, experiment: Experiment, workers: Workers, reporter: Reporter, known: tuple[str, ...],
                 twins: bool, crash_check: bool, started_at: float | None = None) -> None:
        """``known``: the labels of the known configs verified beside the result; ``twins``: the verification
        re-checks candidates with the workload's twin first; ``crash_check``: it ends with the winner's;
        ``started_at``: when the command began (Unix time; the budget counts from there, a server's load included)."""
        e = experiment
        self.experiment, self.workers, self.reporter = e, workers, reporter
        self.known, self.twins, self.crash_check = known, twins, crash_check
        # when the search ends (Unix time): a worker joining a study reads the study's before each trial
        started_at = time.time() if started_at is None else started_at
        self.deadline = None if e.budget.time_s is None or e.joining else started_at + e.budget.time_s
        self.reserve_s = 0.0  # kept back from the time budget for the verification
        self.verify_top = e.proof.verify_top  # candidates verified: fewer when a time budget cannot hold them all
        self.verify_known = e.proof.known_configs  # the known configs beside them (not when the budget is tight)
        self.wanted_s = 0.0  # what verifying all of --verify-top and the known configs would take
        self.fitted_s = 0.0  # what the verification fitted to the budget will take
        self.first_look_s = 0.0  # of which its first look (--repeats rounds), which runs even when late
        self.extra_rounds = 0  # rounds kept back after the first look, for a close candidate
        self._said_close = False  # whether keeping rounds back for a close candidate was said
        self.overhead_s = MIN_RUN_OVERHEAD_S  # per run beyond its record, as the default's trial measured it
        self._checked_pace = False  # whether the budget was checked against the system's pace, once the default ran
        self.reserve_searched = False  # the reserve went to the search: no config had reached full size (see below)

    def time_left_s(self) -> float | None:
        """Time left for the search: to the study's deadline, less what verification will need (unless that time
        went to the search: ``_search_the_reserve``)."""
        kept_back = 0.0 if self.reserve_searched else self.reserve_s
        return None if self.deadline is None else self.deadline - time.time() - kept_back

    # ------------------------------------------------------------ trials

    def may_start_trial(self) -> bool:
        e, study = self.experiment, self.workers.study
        if e.joining:
            self.deadline = study.user_attrs.get(attrs.DEADLINE)  # the study's, as its latest `tune` set it
        self.reserve_verification()
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
        if self.reserve_searched or e.joining or self.reserve_s <= 0 or top_trials(self.workers.study, 1):
            return False
        self.reserve_searched = True
        self.reporter.note(f"no sampled config has reached full size, so the ~{self.reserve_s:.0f} s kept back for "
                           "verifying go to the search: a config that reaches full size now is named for you to "
                           "verify (the same command with a longer --time resumes the study and verifies it), "
                           "not verified inside --time")
        return True

    def counted_trials(self) -> list[TrialRecord]:
        """The sampled trials --trials counts: finished ones (not interrupted, not failed by the machine: their
        configs run again and count then; not given up for the budget before they ran) and those running, on any
        worker; by number."""
        def counted(r: TrialRecord) -> bool:
            if r.is_default or r.state == TrialState.WAITING:
                return False
            if r.state == TrialState.RUNNING:
                return True
            return (r.outcome or Outcome.INTERRUPTED) not in (Outcome.INTERRUPTED, Outcome.TOOL) \
                and r.config_hash is not None
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
        ladder_s = sum(self._default_cost_s(rung) for rung in e.rungs)
        verify_s = self._verification_s(1, False) if e.proof.verify_top > 0 and e.proof.repeats > 0 else 0.0
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
        return left is None or left >= self._default_cost_s(rung)

    def ladder_fits(self) -> bool:
        """Whether a new trial can still climb to full size in the time left, each rung as long as the default's.
        A config slower than that could not beat the default, so only a loser is cut by the budget's end."""
        left = self.time_left_s()
        return left is None or left >= sum(self._default_cost_s(rung) for rung in self.experiment.rungs)

    def _default_cost_s(self, rung: Rung) -> float:
        """The wall-clock time this machine's default took at ``rung`` (``min_timeout_s`` before it ran)."""
        base = self.workers.own_default(rung)
        return self.experiment.measurement.min_timeout_s if base is None else self._run_cost_s(base)

    def _run_cost_s(self, run: RungRun) -> float:
        """The wall-clock time a run like ``run`` takes here: its measured time plus the per-run overhead measured
        on this machine's default trial (its wall time beyond its runs' records)."""
        return run.elapsed_s + self.overhead_s

    # ------------------------------------------------------------ the verification's reserve

    def reserve_verification(self) -> None:
        """Keep back, from a time budget, what verifying at the end will take, as it becomes known.

        The verification's first look runs each candidate and the default (and the known configs) ``repeats`` times
        at full size; its candidates are the best configs so far plus, until there are ``verify_top`` of them, the
        next one that may complete. Each run is estimated from its own full-size measurement (the default's for a
        candidate yet to come, and for the known configs) plus the per-run overhead. The twin check and, where the
        target has one, the winner's crash check add runs like the default's. Never more than half the budget:
        when verifying all of ``verify_top`` would take more, fewer candidates are verified (at least one).

        A close candidate (better than the default in its single full-size run, by less than the noise lets the
        first look prove: ``analysis.sequential.rounds_for``) will get rounds after the first look: the rounds it is
        expected to need, with the default beside it, are kept back too, up to two thirds of the budget.
        """
        e = self.experiment
        default = self.workers.own_default(e.rungs[-1])
        if e.budget.time_s is None or default is None or e.proof.verify_top <= 0:
            return
        self.overhead_s = self._measured_overhead_s()
        estimate_s = self._verification_s
        self.verify_top, beside = fitting_verification(estimate_s, e.proof.verify_top, e.budget.time_s * VERIFY_SHARE)
        self.verify_known = e.proof.known_configs and beside
        self.first_look_s = estimate_s(self.verify_top, self.verify_known)
        self.extra_rounds, extra_s = self._close_rounds(self.verify_top,
                                                        e.budget.time_s * CLOSE_SHARE - self.first_look_s)
        self.fitted_s = self.first_look_s + extra_s
        if self.extra_rounds and not self._said_close:
            self._said_close = True
            self.reporter.note(f"a candidate is close to the default: ~{extra_s:.0f} s more are kept back for up to "
                               f"{self.extra_rounds} verification rounds after the first {e.proof.repeats} (at most "
                               "two thirds of --time go to verifying)")
        self.reserve_s = min(self.fitted_s, e.budget.time_s * (CLOSE_SHARE if self.extra_rounds else VERIFY_SHARE))
        self.wanted_s = estimate_s(e.proof.verify_top, True)

    def _close_rounds(self, top: int, room_s: float) -> tuple[int, float]:
        """The rounds after the first look to keep back for the close ones among the ``top`` best candidates, and
        their time, within ``room_s``: each round runs the close candidates and the default; as many as the closest
        is expected to need to settle (80% of the time) at the run-to-run noise the default showed."""
        e, study = self.experiment, self.workers.study
        full, default = e.rungs[-1].index, self.workers.own_default(e.rungs[-1])
        if default is None or room_s <= 0:
            return 0, 0.0
        plan = SequentialPlan(e.proof.repeats, e.proof.most_rounds, candidates=top)
        values = [c["value"] for c in study.user_attrs.get(attrs.CONTROLS, []) if c.get("value") is not None]
        spread = noise(values) if len(values) >= 3 else ASSUMED_NOISE
        runs = [run for t in top_trials(study, top) if (run := record_of(t).run_at(full)) is not None and run.ok]
        wanted, close = close_rounds([run.ratio or 0.0 for run in runs], spread, plan)
        if not wanted:
            return 0, 0.0
        per_round_s = (sum(self._run_cost_s(runs[i]) for i in close) + self._run_cost_s(default)) * RESERVE_MARGIN
        rounds = min(wanted, int(room_s // per_round_s))
        return rounds, rounds * per_round_s

    def verification_room(self) -> Callable[[float], bool] | None:
        """Whether a round of the verification taking ``seconds`` still ends by the budget's end (the winner's crash
        check kept back after it); None without a time budget."""
        deadline = self.deadline
        if deadline is None:
            return None
        after_s = self._default_cost_s(self.experiment.rungs[-1]) if self.crash_check else 0.0
        return lambda seconds: time.time() + seconds + after_s <= deadline

    def _verification_s(self, top: int, beside: bool) -> float:
        """What verifying the ``top`` best candidates (``beside`` the known configs or not) will take here."""
        e = self.experiment
        default = self.workers.own_default(e.rungs[-1])
        if default is None:
            return 0.0
        full = e.rungs[-1].index
        known = [run for t in top_trials(self.workers.study, top)
                 if (run := record_of(t).run_at(full)) is not None and run.ok]
        cost = self._run_cost_s
        candidates = known[:top] + [default] * (len(known[:top]) < top)
        per_round = sum(map(cost, candidates)) + (1 + len(self.known) * beside) * cost(default)
        extra = (2 * len(candidates) if self.twins else 0) + self.crash_check  # twins write, then read back
        return (per_round * e.proof.repeats + extra * cost(default)) * RESERVE_MARGIN

    def fitted_verification(self) -> Experiment:
        """The experiment to verify with, its first look fitted to half the time budget; what was given up, and any
        lateness, said."""
        e = self.experiment
        left_out = () if self.verify_known else self.known
        asked = e.proof.verify_top
        given_up = ([f"the top {self.verify_top} of --verify-top {asked}"] * (self.verify_top < asked)
                    + [f"without {', '.join(left_out)} beside the default"] * bool(left_out))
        late_s = self.first_look_s - e.budget.time_s * VERIFY_SHARE if e.budget.time_s else 0.0
        if given_up:
            self.reporter.note(f"verifying {' '.join(given_up)}: all would take ~{self.wanted_s:.0f} s, more than "
                               f"half of the {e.budget.time_s:.0f} s budget. Fix, for more: a longer --time")
        if late_s > 0:
            self.reporter.note(f"verifying needs ~{self.first_look_s:.0f} s, more than half of the "
                               f"{e.budget.time_s:.0f} s budget: tune ends ~{late_s:.0f} s past --time. "
                               "Fix: a longer --time, or fewer --repeats")
        return e.changed(proof__verify_top=self.verify_top, proof__known_configs=self.verify_known)

    def _measured_overhead_s(self) -> float:
        """The per-run overhead of this machine's latest finished default trial (at least the minimum)."""
        study = self.workers.study
        for trial in reversed(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))):
            if attrs.is_default(trial.user_attrs) and self.workers.machine_of(record_of(trial)) == self.workers.machine:
                if (overhead := run_overhead_s(trial)) is not None:
                    return overhead
        return MIN_RUN_OVERHEAD_S
