"""What a study found, as plain data: counts, the default, the result, its proof and its risks.

``show``, the end of ``tune``, ``export`` and the HTML report all read this.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from knobtune.knobs import Catalog, load_catalog
from knobtune.targets import export_formats
from knobtune.tuning import attrs
from knobtune.tuning.finish import DEFAULT_LABEL, top_trials
from knobtune.tuning.outcomes import Outcome
from knobtune.workloads import Objective


@dataclass(frozen=True)
class StudySummary:
    study: str
    system: str
    workload: str
    objective: Objective
    counts: dict[str, int]
    default_value: float | None
    result_trial: int | None  # the trial whose config is the result (None: keep the default)
    result_value: float | None
    result_config: dict[str, Any]
    verified: bool  # the result won interleaved repeats beyond the noise
    verdict: str
    single_run_speedup: float | None
    verification: dict[str, Any] | None
    allow_unsafe: bool
    left_out: dict[str, str]
    unsafe_in_result: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    experiment: dict[str, Any] = field(default_factory=dict)
    default_runs: list[float] = field(default_factory=list)  # the default's full-size value, baseline then controls
    export_formats: tuple[str, ...] = ("json",)

    @property
    def drift(self) -> float | None:
        """Relative change of the default from its first to its latest run (0.05 = 5% higher)."""
        runs = self.default_runs
        return runs[-1] / runs[0] - 1 if len(runs) >= 2 and runs[0] else None

    def to_dict(self) -> dict[str, Any]:
        data = dict(vars(self))
        data["objective"] = self.objective.value
        data["drift"] = self.drift
        return data


def summarize(study: optuna.Study, catalog: Catalog | None = None) -> StudySummary:
    """Everything a person needs to judge a study, from what is stored on it."""
    user = study.user_attrs
    catalog = catalog or load_catalog(user[attrs.SYSTEM])
    objective = Objective(user.get(attrs.OBJECTIVE, "elapsed_s"))
    trials = study.get_trials(deepcopy=False)
    baseline = next((t for t in trials if t.user_attrs.get(attrs.ROLE) == attrs.ROLE_BASELINE
                     and t.state == TrialState.COMPLETE), None)
    verification = user.get(attrs.VERIFICATION)
    result = _result_trial(study, verification)
    config = dict(result.user_attrs.get(attrs.CONFIG, {})) if result else {}
    unsafe = {k: v.value for k, v in catalog.unsafe_in(catalog.config(config)).items()} if config else {}
    speedup = (objective.speedup(result.value, baseline.value)
               if result is not None and baseline is not None and result.value else None)
    return StudySummary(
        study=study.study_name, system=user.get(attrs.SYSTEM, "?"),
        workload=(user.get(attrs.WORKLOAD) or {}).get("name", "?"), objective=objective,
        counts=count_outcomes(trials), default_value=baseline.value if baseline else None,
        result_trial=result.number if result else None, result_value=result.value if result else None,
        result_config=config, verified=bool(verification and verification.get("winner")),
        verdict=_verdict(verification, result), single_run_speedup=speedup, verification=verification,
        allow_unsafe=bool(user.get(attrs.ALLOW_UNSAFE)), left_out=dict(user.get(attrs.LEFT_OUT, {})),
        unsafe_in_result=unsafe, warnings=_warnings(catalog, config, unsafe),
        experiment={k: user.get(k) for k in (attrs.TOOL_VERSION, attrs.SYSTEM_VERSION, attrs.DRIVER,
                                             attrs.MACHINE, attrs.WORKLOAD, attrs.SEED)},
        default_runs=[c["value"] for c in user.get(attrs.CONTROLS, []) if c.get("value") is not None],
        export_formats=export_formats(user.get(attrs.SYSTEM, catalog.system), user.get(attrs.DRIVER)),
    )


def count_outcomes(trials: list[FrozenTrial]) -> dict[str, int]:
    """Trials per outcome (the default's trial not counted); running and queued ones too."""
    counts: Counter[str] = Counter()
    for trial in trials:
        if attrs.is_reference(trial.user_attrs):
            continue
        if trial.state in (TrialState.RUNNING, TrialState.WAITING):
            counts[trial.state.name.lower()] += 1
        else:
            counts[trial.user_attrs.get(attrs.OUTCOME, trial.state.name.lower())] += 1
    return {o.value: counts.get(o.value, 0) for o in Outcome} | {k: v for k, v in counts.items()
                                                                  if k not in {o.value for o in Outcome}}


def _result_trial(study: optuna.Study, verification: dict[str, Any] | None) -> FrozenTrial | None:
    """The verified winner; without a verification, the best single run; with a failed one, none."""
    if verification:  # a verification that rejected every candidate (data loss in the twin) names no winner
        winner = verification.get("winner")
        if not winner or winner == DEFAULT_LABEL:
            return None
        return study.trials[int(str(winner).split()[-1])]
    best = top_trials(study, 1)
    return best[0] if best else None


def _verdict(verification: dict[str, Any] | None, result: FrozenTrial | None) -> str:
    if verification:
        return str(verification.get("verdict", ""))
    if result is None:
        return "no sampled config completed every rung yet"
    return f"trial {result.number} is the best single run; not verified with repeats yet"


def _warnings(catalog: Catalog, config: dict[str, Any], unsafe: dict[str, str]) -> list[str]:
    notes = []
    for name, safety in unsafe.items():
        knob = catalog.knobs[name]
        notes.append(f"the result sets {name}={config.get(name)} ({safety}): {knob.safety_note}; "
                     f"run with --knobs excluding {name} to avoid it")
    return notes
