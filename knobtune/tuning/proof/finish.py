"""The end of a study: prove the best candidates against the default before anyone believes them.

The top trials (distinct configs) are re-run at full size, interleaved with
the default, several times each, and more rounds are added while one's
interval straddles 1 (``verify.run_sequential``). A workload that cannot check its own reads
(fillrandom) first re-checks each candidate with its verifiable twin. The
verdict, with its figures, is stored on the study.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import optuna

from knobtune.analysis import Speedup
from knobtune.analysis.sequential import Decision, SequentialPlan, SequentialSpeedup
from knobtune.errors import KnobtuneError
from knobtune.knobs import Value
from knobtune.targets import RunFailure, Target
from knobtune.tuning.records import RungRun, attrs, record_of, top_trials, winner_trial
from knobtune.tuning.document import Experiment
from knobtune.tuning.proof.verify import (MACHINE_RETRIES, Candidate, CandidateRuns, Comparison, Resumed, Stop,
                                          run_sequential, stopped_open)

DEFAULT_LABEL = "default"


@dataclass(frozen=True)
class StudyResult:
    """What a study recommends: the verified winner; without a verification, the best single run; else none."""

    trial: int | None  # the trial whose config is the result (None: keep the default)
    config: Mapping[str, Value]  # the knobs it changes
    verified: bool  # it won interleaved repeats beyond the noise
    verdict: str


def study_result(study: optuna.Study) -> StudyResult:
    """The study's result, from what it stored (a verification that rejected every candidate names none)."""
    verification = study.user_attrs.get(attrs.VERIFICATION)
    if verification:
        number = winner_trial(study)
        verdict = str(verification.get("verdict", ""))
    else:
        best = top_trials(study, 1)
        number = best[0].number if best else None
        verdict = (f"trial {number} is the best single run; not verified with repeats yet" if best
                   else "no sampled config completed every rung yet")
    config = dict(study.trials[number].user_attrs.get(attrs.CONFIG, {})) if number is not None else {}
    return StudyResult(number, config, bool(verification) and number is not None, verdict)


def name_lead(study: optuna.Study, experiment: Experiment, note: Callable[[str], None]) -> dict[str, object]:
    """The verdict when the time kept back for verifying went to the search (``Budget._search_the_reserve``): the
    best config that reached full size in it is named with its single run's ratio to the default, for the user to
    verify; the result stays the default. With none, the usual "no candidate" verdict."""
    best = top_trials(study, 1)
    result: dict[str, object]
    if not best:
        result = {"verdict": "no candidate to verify: no sampled config completed every rung, also in the time "
                             "kept back for verifying; keep the default", "rejected": {}}
    else:
        run = record_of(best[0]).run_at(experiment.rungs[-1].index)
        ratio = f" at {run.ratio:.2f}x the default in a single run" if run is not None and run.ratio else ""
        result = {"verdict": f"trial {best[0].number} reached full size{ratio} in the time kept back for verifying "
                             "(no config had reached it before): not verified, so keep the default for now. Fix: the "
                             "same command with a longer --time resumes the study and verifies it",
                  "rejected": {}, "lead": best[0].number}
    study.set_user_attr(attrs.VERIFICATION, result)
    note(str(result["verdict"]))
    return result


def verify_study(study: optuna.Study, target: Target, experiment: Experiment, log_dir: Path,
                 note: Callable[[str], None], room: Callable[[float], bool] | None = None) -> dict[str, object]:
    """Verify the top candidates, store the result on the study and return it; ``room(seconds)`` says whether a
    round after the first look still fits in the time budget (None: no time budget)."""
    catalog, objective = experiment.catalog, experiment.objective
    top = top_trials(study, experiment.proof.verify_top)
    previous = study.user_attrs.get(attrs.VERIFICATION) or {}
    verified_before = ({c["label"] for c in previous.get("candidates", []) if not c.get("reference")}  # known configs
                       | set(previous.get("rejected", {})))
    same = bool(top) and verified_before == {DEFAULT_LABEL} | {f"trial {t.number}" for t in top} \
        and previous.get("repeats") == experiment.proof.repeats \
        and previous.get("max_rounds") == experiment.proof.most_rounds
    open_at = stopped_open(previous) if same else None
    if same and open_at is None:
        note(f"the same candidates were verified before: {previous['verdict']}")
        return previous
    candidates = [(Candidate(DEFAULT_LABEL, {}), catalog.defaults())]
    rejected: dict[str, str] = dict(previous.get("rejected") or {}) if same else {}
    top = [t for t in top if f"trial {t.number}" not in rejected]
    twin = target.twin() if top and not same else None  # the same candidates passed it before
    twin_limit_s = _twin_limit_s(twin, experiment, log_dir, note) if twin else None
    for trial in top:
        label = f"trial {trial.number}"
        config = catalog.config(trial.user_attrs[attrs.CONFIG])
        failure = _twin_check(twin, experiment, config, log_dir / f"twin-{trial.number}.log", twin_limit_s)
        if failure:
            rejected[label] = failure
            note(f"{label} rejected by the verifiable twin: {failure}")
            continue
        candidates.append((Candidate(label, trial.user_attrs[attrs.CONFIG], trial=trial.number,
                                     tried_first=trial.user_attrs.get(attrs.STARTED_FROM, "")), config))
    tuned = len(candidates) - 1
    candidates += [(Candidate(known.label, dict(known.changed), known_config=True), catalog.config(known.changed))
                   for known in target.known_configs() if known.beside and experiment.proof.known_configs]
    if tuned == 0:
        why = (f"every candidate failed the verifiable twin ({'; '.join(rejected.values())})" if rejected
               else "no sampled config completed every rung")
        verdict_text = f"no candidate to verify: {why}; keep the default"
        study.set_user_attr(attrs.VERIFICATION, {"verdict": verdict_text, "rejected": rejected})
        note(verdict_text)
        return {"verdict": verdict_text, "rejected": rejected}
    timeout_s = _limit_s(study, experiment)
    plan = SequentialPlan(experiment.proof.repeats, experiment.proof.most_rounds, candidates=tuned)
    note(f"verifying {tuned} candidate(s) against the default{_beside(candidates)}: {plan.first} interleaved runs "
         f"each at {experiment.workload.full}, then more rounds, up to {plan.most}, while a candidate's interval "
         "straddles 1" + (" and the time budget holds them" if room is not None else ""))

    def on_run(repeat: int, runs: CandidateRuns, value: float | None) -> None:
        shown = objective.show(value) if value is not None else f"failed: {runs.failure}"
        counted = f"{repeat + 1}/{plan.first}" if repeat < plan.first else f"{repeat + 1} (added, at most {plan.most})"
        note(f"verify round {counted} {runs.candidate.label}: {shown}")

    resumed = Resumed.of(previous, [c.label for c, _ in candidates], plan) if same else None
    if same:
        note(f"the same candidates were verified before, and the time budget ended it with {open_at} "
             f"still open after {previous.get('rounds')} rounds: "
             + ("its rounds go on" if resumed else "verified afresh (what it stored cannot be gone on with: another "
                                                  "plan, other known configs beside, or no looks kept)"))
    comparison = run_sequential(target, candidates, experiment.workload.full, plan=plan, objective=objective,
                                seed=experiment.search.seed, log_dir=log_dir, timeout_s=timeout_s, room=room,
                                on_run=on_run, resumed=resumed, run_s=_default_run_s(study, experiment))
    result: dict[str, object] = {**comparison.to_dict(), "rejected": rejected, "verdict": verdict(comparison)}
    winner = comparison.winner()
    if winner is not None:
        lost = _crash_check(target, catalog.config(winner.candidate.config), log_dir, note)
        if lost:
            result |= {"winner": None, attrs.WINNER_TRIAL: None, "crash_check": lost,
                       "verdict": f"{winner.candidate.label} lost data when the system was killed mid-run ({lost}); "
                                  "keep the default"}
        elif target.has_crash_check():
            result["crash_check"] = "passed"
    study.set_user_attr(attrs.VERIFICATION, result)
    note(str(result["verdict"]))
    return result


def _crash_check(target: Target, config: dict, log_dir: Path, note: Callable[[str], None]) -> str | None:
    """The winner's crash check, if the target has one: a lost acknowledged write rejects it."""
    try:
        lost = target.crash_check(config, log_dir)
    except RunFailure as failure:
        return f"the crash check could not run: {failure.reason}"
    if lost:
        note(f"crash check failed: {lost}")
    return lost


def _beside(candidates: list) -> str:
    known = [c.label for c, _ in candidates if c.known_config]
    return f" and beside {', '.join(known)}" if known else ""


def verdict(comparison: Comparison) -> str:
    """One sentence a user can act on (and how the known configs did beside it)."""
    return _tuned_verdict(comparison) + "".join(
        f"; beside it, {r.candidate.label} " + (f"is {s.ratio:.2f}x the default ({_interval(comparison, s)})"
                                                if (s := comparison.speedups.get(r.candidate.label))
                                                else f"failed: {r.failure}")
        for r in comparison.runs if r.candidate.known_config)


def _interval(comparison: Comparison, s: Speedup) -> str:
    """``95% CI 1.02-1.19``; a sequential comparison's is its repeated interval, at the family-wise level."""
    kind = "" if comparison.plan is None else "sequential "
    level = 95 if comparison.plan is None else round((1 - comparison.plan.error) * 100)
    return f"{level}% {kind}CI {s.ci_low:.2f}-{s.ci_high:.2f}"


def rounds_text(comparison: Comparison) -> str:
    """How many runs the verdict stands on: ``11 interleaved rounds: 5, then 6 added until no interval straddled
    1``; a fixed comparison's ``medians of 5 interleaved runs``."""
    plan, rounds = comparison.plan, comparison.rounds
    if plan is None or rounds is None:
        return f"medians of {comparison.repeats} interleaved runs"
    added = rounds - plan.first
    why = {Stop.SETTLED: "until no interval straddled 1" if added > 0 else "",
           Stop.FUTILE: _futile_text(comparison),
           Stop.MOST: f"the most planned (--max-rounds {plan.most})",
           Stop.BUDGET: "the time budget held no more",
           Stop.BROKEN: "", None: ""}[comparison.stopped]
    return (f"{rounds} interleaved rounds" + (f": {plan.first}, then {added} added" if added > 0 else "")
            + (f"{' ' if added > 0 and comparison.stopped is Stop.SETTLED else ', '}{why}" if why else ""))


def _futile_text(comparison: Comparison) -> str:
    """Why no more rounds ran when the open candidates were given up, for the one likeliest to settle among those
    given up at the last look (one given up earlier did not stop the rounds): ``then stopped: were trial 7's gain
    the 1.03x it shows, the 19 rounds within reach would prove it 4% of the time``."""
    given_up = [(label, s) for label, s in comparison.speedups.items()
                if isinstance(s, SequentialSpeedup) and s.decision == Decision.FUTILE.value]
    given_up = [(label, s) for label, s in given_up if s.rounds == comparison.rounds] or given_up
    if not given_up:
        return "then stopped"
    label, likeliest = max(given_up, key=lambda item: item[1].settle_chance or 0.0)
    return (f"then stopped: were {label}'s gain the {likeliest.ratio:.2f}x it shows, the {likeliest.reachable} "
            f"rounds within reach would prove it {(likeliest.settle_chance or 0.0) * 100:.0f}% of the time")


TAIL_WORSE = 1.10  # a p99.9 latency this much above the default's is named in the verdict


def tail_latency_note(comparison: Comparison, winner: CandidateRuns) -> str:
    """"; but its p99.9 latency is worse ..." for every measured phase (one the objective counts: a kvbench
    workload's run, not the load before it) where the winner's median p99.9 is more than ``TAIL_WORSE`` times the
    default's (the objective may be throughput or time while users feel the tail)."""
    default, counted = comparison.first.latency_us(), winner.measured_phases()
    worse = [f"{phase} {mine['p99.9']:,.0f} us against {theirs['p99.9']:,.0f} us"
             for phase, mine in winner.latency_us().items()
             if (counted is None or phase in counted) and "p99.9" in mine
             and (theirs := default.get(phase, {})).get("p99.9") and mine["p99.9"] > TAIL_WORSE * theirs["p99.9"]]
    return f"; but its p99.9 latency is worse than the default's: {', '.join(worse)}" if worse else ""


def _tuned_verdict(comparison: Comparison) -> str:
    noise = f"noise {comparison.noise * 100:.1f}%"
    if (broken := comparison.machine_failure) is not None:
        return (f"the verification could not finish on this machine: {broken.reason} (after {MACHINE_RETRIES} "
                "retries; not the config's fault); keep the default until it is run again. Fix: check the machine "
                "(disk space, the scratch folder), then run the same command to verify again")
    runs = rounds_text(comparison)
    winner = comparison.winner()
    if winner is not None:
        s = comparison.speedups[winner.candidate.label]
        return (f"{winner.candidate.named} is {s.ratio:.2f}x the default "
                f"({_interval(comparison, s)}, {noise}, {runs})") + tail_latency_note(comparison, winner)
    measured = {r.candidate.named: comparison.speedups[r.candidate.label] for r in comparison.runs[1:]
                if not r.candidate.known_config and r.candidate.label in comparison.speedups}
    if not measured:
        return f"no candidate finished its verification runs; keep the default ({noise})"
    label, best = max(measured.items(), key=lambda item: item[1].ratio)
    more = (". Fix: the same command with a longer --time resumes the study; when its search finds no better "
            "candidates, it goes on with these rounds" if comparison.stopped is Stop.BUDGET
            and isinstance(best, SequentialSpeedup) and best.decision == Decision.OPEN.value else "")
    return (f"no significant gain: the best candidate, {label}, is {best.ratio:.2f}x the default "
            f"({_interval(comparison, best)}, {noise}, {runs}); keep the default{more}")


def _default_run_s(study: optuna.Study, experiment: Experiment) -> float | None:
    """The default's full-size run's seconds, as its trial stored them (None: not stored)."""
    base = attrs.default_by_rung(study.user_attrs).get(str(experiment.workload.full.index))
    return RungRun.from_stored(base).elapsed_s if base else None


def _limit_s(study: optuna.Study, experiment: Experiment) -> float | None:
    """The time a verification run may take: ``timeout_factor`` times the default's full-size time."""
    run_s = _default_run_s(study, experiment)
    return None if run_s is None else experiment.measurement.limit_s(run_s)


def _twin_limit_s(twin: Target, experiment: Experiment, log_dir: Path, note: Callable[[str], None]) -> float:
    """The time a candidate's twin run may take: ``timeout_factor`` times the default's own twin run.

    Raises:
        KnobtuneError: the default config fails its own twin (the workload or the machine is at fault).
    """
    with twin:
        try:
            run = twin.run(experiment.catalog.defaults(), experiment.workload.full, timeout_s=None,
                           log_path=log_dir / "twin-default.log", seed=experiment.search.seed)
        except RunFailure as failure:
            raise KnobtuneError(f"the default config failed the workload's verifiable twin ({failure.reason}). "
                                f"Fix: check the workload; raw output in {log_dir}") from None
    note(f"the default's verifiable twin took {run.elapsed_s:.1f} s")
    return experiment.measurement.limit_s(run.elapsed_s)


def _twin_check(twin: Target | None, experiment: Experiment, config: dict, log_path: Path,
                timeout_s: float | None) -> str | None:
    """Run the workload's verifiable twin once under ``config``; the failure reason, or None if it read back all.

    Its time limit is relative to the default's own twin run, so a config that never settles cannot hold the
    verification up.
    """
    if twin is None:
        return None
    with twin:
        try:
            twin.run(config, experiment.workload.full, timeout_s=timeout_s, log_path=log_path,
                     seed=experiment.search.seed)
        except RunFailure as failure:
            return failure.reason
    return None
