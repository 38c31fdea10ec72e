"""The end of a study: prove the best candidates against the default before anyone believes them.

The top trials (distinct configs) are re-run at full size, interleaved with
the default, several times each. A workload that cannot check its own reads
(fillrandom) first re-checks each candidate with its verifiable twin. The
verdict, with its figures, is stored on the study.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
import optuna
from optuna.trial import TrialState

from knobtune.errors import KnobtuneError, UsageError
from knobtune.targets import RunFailure, Target
from knobtune.tuning import attrs
from knobtune.tuning.settings import TuneSettings
from knobtune.tuning.verify import Candidate, Comparison, relative_limit_s, run_interleaved

DEFAULT_LABEL = "default"


def top_trials(study: optuna.Study, k: int) -> list[optuna.trial.FrozenTrial]:
    """The ``k`` best complete and feasible trials with distinct configs, the default excluded."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if not attrs.is_reference(t.user_attrs) and t.user_attrs.get(attrs.CONFIG)
                and attrs.INFEASIBLE not in t.user_attrs]
    complete.sort(key=lambda t: t.value, reverse=study.direction == optuna.study.StudyDirection.MAXIMIZE)
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
    winner = (study.user_attrs.get(attrs.VERIFICATION) or {}).get("winner")
    chosen = sorted(top_trials(study, k), key=lambda t: f"trial {t.number}" != winner)  # the winner first
    if not chosen:
        raise UsageError(f"study '{study.study_name}' has no config that completed every rung to start from. "
                         "Fix: --start-from a study with complete trials (`knobtune show` lists them)")
    return tuple((f"study {study.study_name} trial {t.number}", dict(t.user_attrs[attrs.CONFIG])) for t in chosen)


def verify_study(study: optuna.Study, target: Target, settings: TuneSettings, log_dir: Path,
                 note: Callable[[str], None]) -> dict[str, object]:
    """Verify the top candidates, store the result on the study and return it."""
    catalog, objective = settings.catalog, settings.objective
    top = top_trials(study, settings.verify_top)
    previous = study.user_attrs.get(attrs.VERIFICATION) or {}
    verified_before = ({c["label"] for c in previous.get("candidates", []) if not c.get("reference")}
                       | set(previous.get("rejected", {})))
    if top and verified_before == {DEFAULT_LABEL} | {f"trial {t.number}" for t in top} \
            and previous.get("repeats") == settings.verify_repeats:
        note(f"the same candidates were verified before: {previous['verdict']}")
        return previous
    candidates = [(Candidate(DEFAULT_LABEL, {}), catalog.defaults())]
    rejected: dict[str, str] = {}
    twin = target.twin() if top else None
    twin_limit_s = _twin_limit_s(twin, settings, log_dir, note) if twin else None
    for trial in top:
        label = f"trial {trial.number}"
        config = catalog.config(trial.user_attrs[attrs.CONFIG])
        failure = _twin_check(twin, settings, config, log_dir / f"twin-{trial.number}.log", twin_limit_s)
        if failure:
            rejected[label] = failure
            note(f"{label} rejected by the verifiable twin: {failure}")
            continue
        candidates.append((Candidate(label, trial.user_attrs[attrs.CONFIG],
                                     tried_first=trial.user_attrs.get(attrs.STARTED_FROM, "")), config))
    tuned = len(candidates) - 1
    candidates += [(Candidate(known.label, dict(known.changed), reference=True), catalog.config(known.changed))
                   for known in target.known_configs() if known.beside and settings.verify_references]
    if tuned == 0:
        why = (f"every candidate failed the verifiable twin ({'; '.join(rejected.values())})" if rejected
               else "no sampled config completed every rung")
        result = {"verdict": f"no candidate to verify: {why}; keep the default", "rejected": rejected}
        study.set_user_attr(attrs.VERIFICATION, result)
        note(result["verdict"])
        return result
    timeout_s = _limit_s(study, settings)
    note(f"verifying {tuned} candidate(s) against the default{_beside(candidates)}: {settings.verify_repeats} "
         f"interleaved runs each at {settings.workload.full}")

    def on_run(repeat: int, runs: object, value: float | None) -> None:
        label = runs.candidate.label  # type: ignore[attr-defined]
        shown = objective.show(value) if value is not None else f"failed: {runs.failure}"  # type: ignore[attr-defined]
        note(f"verify round {repeat + 1}/{settings.verify_repeats} {label}: {shown}")

    comparison = run_interleaved(target, candidates, settings.workload.full, repeats=settings.verify_repeats,
                                 objective=objective, seed=settings.seed, log_dir=log_dir, timeout_s=timeout_s,
                                 on_run=on_run)
    result = {**comparison.to_dict(), "rejected": rejected, "verdict": verdict(comparison)}
    winner = comparison.winner()
    if winner is not None:
        lost = _crash_check(target, catalog.config(winner.candidate.config), log_dir, note)
        if lost:
            result |= {"winner": None, "crash_check": lost,
                       "verdict": f"{winner.candidate.label} lost data when the system was killed mid-run ({lost}); "
                                  "keep the default"}
        elif target.has_crash_check():
            result["crash_check"] = "passed"
    study.set_user_attr(attrs.VERIFICATION, result)
    note(result["verdict"])
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
    references = [c.label for c, _ in candidates if c.reference]
    return f" and beside {', '.join(references)}" if references else ""


def verdict(comparison: Comparison) -> str:
    """One sentence a user can act on (and how the heuristic baselines did beside it)."""
    return _tuned_verdict(comparison) + "".join(
        f"; beside it, {r.candidate.label} " + (f"is {s.ratio:.2f}x the default (95% CI {s.ci_low:.2f}-{s.ci_high:.2f})"
                                                if (s := comparison.speedups.get(r.candidate.label))
                                                else f"failed: {r.failure}")
        for r in comparison.runs if r.candidate.reference)


def _tuned_verdict(comparison: Comparison) -> str:
    noise = f"noise {comparison.noise * 100:.1f}%"
    runs = f"medians of {comparison.repeats} interleaved runs"
    winner = comparison.winner()
    if winner is not None:
        s = comparison.speedups[winner.candidate.label]
        return (f"{winner.candidate.named} is {s.ratio:.2f}x the default "
                f"(95% CI {s.ci_low:.2f}-{s.ci_high:.2f}, {noise}, {runs})")
    measured = {r.candidate.named: comparison.speedups[r.candidate.label] for r in comparison.runs[1:]
                if not r.candidate.reference and r.candidate.label in comparison.speedups}
    if not measured:
        return f"no candidate finished its verification runs; keep the default ({noise})"
    label, best = max(measured.items(), key=lambda item: item[1].ratio)
    return (f"no significant gain: the best candidate, {label}, is {best.ratio:.2f}x the default "
            f"(95% CI {best.ci_low:.2f}-{best.ci_high:.2f}, {noise}, {runs}); keep the default")


def _limit_s(study: optuna.Study, settings: TuneSettings) -> float | None:
    """The time a verification run may take: ``timeout_factor`` times the default's full-size time."""
    base = study.user_attrs.get(attrs.BASELINE, {}).get(str(settings.workload.full.index), {})
    return relative_limit_s(base["elapsed_s"], settings.timeout_factor, settings.min_timeout_s) if base else None


def _twin_limit_s(twin: Target, settings: TuneSettings, log_dir: Path, note: Callable[[str], None]) -> float:
    """The time a candidate's twin run may take: ``timeout_factor`` times the default's own twin run.

    Raises:
        KnobtuneError: the default config fails its own twin (the workload or the machine is at fault).
    """
    with twin:
        try:
            twin.apply(settings.catalog.defaults())
            run = twin.run(settings.workload.full, timeout_s=None, log_path=log_dir / "twin-default.log",
                           seed=settings.seed)
        except RunFailure as failure:
            raise KnobtuneError(f"the default config failed the workload's verifiable twin ({failure.reason}). "
                                f"Fix: check the workload; raw output in {log_dir}") from None
    note(f"the default's verifiable twin took {run.elapsed_s:.1f} s")
    return relative_limit_s(run.elapsed_s, settings.timeout_factor, settings.min_timeout_s)


def _twin_check(twin: Target | None, settings: TuneSettings, config: dict, log_path: Path,
                timeout_s: float | None) -> str | None:
    """Run the workload's verifiable twin once under ``config``; the failure reason, or None if it read back all.

    Its time limit is relative to the default's own twin run, so a config that never settles cannot hold the
    verification up.
    """
    if twin is None:
        return None
    with twin:
        try:
            twin.apply(config)
            twin.run(settings.workload.full, timeout_s=timeout_s, log_path=log_path, seed=settings.seed)
        except RunFailure as failure:
            return failure.reason
    return None
