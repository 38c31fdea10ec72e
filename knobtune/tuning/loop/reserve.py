"""The verification's reserve: what verifying at the end will take, kept back from a time budget as it becomes known.

Half the budget at most, two thirds when a candidate is close to the default (its verification may need rounds
beyond the first look; docs/tuning.md, "Budgets"). When verifying all of ``verify_top`` would take more, fewer
candidates are verified (at least one), and the known configs' comparison goes first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from knobtune.analysis import noise
from knobtune.analysis.sequential import SequentialPlan, rounds_for
from knobtune.tuning.document import Experiment
from knobtune.tuning.loop.costs import Costs
from knobtune.tuning.loop.progress import Reporter
from knobtune.tuning.loop.workers import Workers
from knobtune.tuning.records import attrs, record_of, top_trials

RESERVE_MARGIN = 1.05  # verification's estimate is kept back with this margin
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


class Reserve:
    """What verifying will take, and the verification fitted to the time budget."""

    def __init__(self, experiment: Experiment, workers: Workers, reporter: Reporter, costs: Costs,
                 known: tuple[str, ...], twins: bool, crash_check: bool) -> None:
        """``known``: the labels of the known configs verified beside the result; ``twins``: the verification
        re-checks candidates with the workload's twin first; ``crash_check``: it ends with the winner's."""
        e = experiment
        self.experiment, self.workers, self.reporter, self.costs = e, workers, reporter, costs
        self.known, self.twins, self.crash_check = known, twins, crash_check
        self.kept_s = 0.0  # kept back from the time budget for the verification
        self.verify_top = e.proof.verify_top  # candidates verified: fewer when a time budget cannot hold them all
        self.verify_known = e.proof.known_configs  # the known configs beside them (not when the budget is tight)
        self.wanted_s = 0.0  # what verifying all of --verify-top and the known configs would take
        self.fitted_s = 0.0  # what the verification fitted to the budget will take
        self.first_look_s = 0.0  # of which its first look (--repeats rounds), which runs even when late
        self.extra_rounds = 0  # rounds kept back after the first look, for a close candidate
        self._said_close = False  # whether keeping rounds back for a close candidate was said

    def keep_back(self) -> None:
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
        self.costs.measure_overhead()
        estimate_s = self.estimate_s
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
        self.kept_s = min(self.fitted_s, e.budget.time_s * (CLOSE_SHARE if self.extra_rounds else VERIFY_SHARE))
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
        per_round_s = (sum(self.costs.run_s(runs[i]) for i in close) + self.costs.run_s(default)) * RESERVE_MARGIN
        rounds = min(wanted, int(room_s // per_round_s))
        return rounds, rounds * per_round_s

    def room(self, deadline: float | None) -> Callable[[float], bool] | None:
        """Whether a round of the verification taking ``seconds`` still ends by ``deadline`` (the winner's crash
        check kept back after it); None without a time budget."""
        if deadline is None:
            return None
        after_s = self.costs.default_s(self.experiment.rungs[-1]) if self.crash_check else 0.0
        return lambda seconds: time.time() + seconds + after_s <= deadline

    def estimate_s(self, top: int, beside: bool) -> float:
        """What verifying the ``top`` best candidates (``beside`` the known configs or not) will take here."""
        e = self.experiment
        default = self.workers.own_default(e.rungs[-1])
        if default is None:
            return 0.0
        full = e.rungs[-1].index
        known = [run for t in top_trials(self.workers.study, top)
                 if (run := record_of(t).run_at(full)) is not None and run.ok]
        cost = self.costs.run_s
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
