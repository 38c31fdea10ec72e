"""Everything the HTML report draws, as plain data (also written as JSON beside the report)."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from knobtune.analysis.importance import knob_importance
from knobtune.knobs import Catalog, load_catalog
from knobtune.knobs.display import knob_value, same_behaviour
from knobtune.report.summary import summarize
from knobtune.tuning import attrs
from knobtune.tuning.records import record_of

TOP_KNOBS = 6


def report_data(study: optuna.Study, catalog: Catalog | None = None) -> dict[str, Any]:
    """The sections of the report: summary, trials, best over time, verification, latency, importance, diff."""
    summary = summarize(study, catalog)
    catalog = catalog or load_catalog(summary.system)
    trials = study.get_trials(deepcopy=False)
    sampled = [t for t in trials if not attrs.is_default(t.user_attrs)]
    by_param = knob_importance(sampled, summary.objective.maximize)  # the search's parameters (knob.special too)
    importance = _catalog_names(by_param)
    importance_trials = sum(1 for t in sampled if t.state == TrialState.COMPLETE and t.value is not None)
    return {
        "summary": summary.to_dict(),
        "trials": [_trial_row(t) for t in trials if t.state != TrialState.WAITING],
        "defaults_by_rung": {rung: base.get("value")
                             for rung, base in attrs.default_by_rung(study.user_attrs).items()},
        "best_over_time": _best_over_time(trials, summary.objective.maximize),
        "verification": study.user_attrs.get(attrs.VERIFICATION),
        "explanation": study.user_attrs.get(attrs.EXPLANATION),
        "latency": _latency(trials, summary.result_trial, study.user_attrs.get(attrs.VERIFICATION)),
        "importance": importance,
        "parallel": _parallel(trials, by_param),
        "diff": [{"knob": name, "default": catalog.knobs[name].default, "result": value,
                  "default_text": knob_value(catalog.knobs[name], catalog.knobs[name].default),
                  "result_text": knob_value(catalog.knobs[name], value)}
                 for name, value in sorted(summary.result_config.items())
                 if not same_behaviour(catalog.knobs[name], catalog.knobs[name].default, value)],
        "importance_trials": importance_trials,
    }


def _catalog_names(importance: dict[str, float] | None) -> dict[str, float] | None:
    """Importance by knob as the catalog spells it: a special-value choice (``cache_numshardbits.special``, the
    search's own parameter) counts towards its knob."""
    if not importance:
        return importance
    folded: dict[str, float] = {}
    for name, share in importance.items():
        knob = name.removesuffix(".special")
        folded[knob] = folded.get(knob, 0.0) + share
    return dict(sorted(folded.items(), key=lambda item: -item[1]))


def _trial_row(trial: FrozenTrial) -> dict[str, Any]:
    record = record_of(trial)
    last = record.reached_run
    return {
        "number": trial.number,
        "role": record.role,
        "outcome": record.outcome.value if record.outcome else trial.state.name.lower(),
        "reason": record.reason,
        "reached_rung": record.reached_rung,
        "value": last.value if last else None,
        "finished_at": trial.datetime_complete.isoformat() if trial.datetime_complete else None,
        "started_at": trial.datetime_start.isoformat() if trial.datetime_start else None,
    }


def _best_over_time(trials: list[FrozenTrial], maximize: bool) -> list[dict[str, float]]:
    """(minutes since the study began, best full-size value so far) at each complete trial."""
    starts = [t.datetime_start for t in trials if t.datetime_start]
    if not starts:
        return []
    origin = min(starts)
    points: list[dict[str, float]] = []
    best: float | None = None
    finished = [(t.datetime_complete, t.value, t.number) for t in trials
                if t.state == TrialState.COMPLETE and t.datetime_complete is not None and t.value is not None]
    for completed, value, number in sorted(finished, key=lambda f: f[0]):
        if best is None or (value > best if maximize else value < best):
            best = value
        points.append({"minutes": (completed - origin).total_seconds() / 60, "best": best, "trial": number})
    return points


def _latency(trials: list[FrozenTrial], result: int | None, verification: dict | None) -> dict[str, Any]:
    """Per phase latency percentiles (µs) of the default and the result: from verification if it ran."""
    candidates = (verification or {}).get("candidates", [])
    if candidates and all("latency_us" in c for c in candidates):
        return {c["label"]: c["latency_us"] for c in candidates
                if c["label"] == "default" or c["label"] == (verification or {}).get("winner")}
    chosen = {"default": trials[0] if trials else None}
    if result is not None:
        chosen[f"trial {result}"] = next((t for t in trials if t.number == result), None)
    latency = {}
    for label, trial in chosen.items():
        record = record_of(trial) if trial else None
        run = record.reached_run if record else None
        phases = run.summary.get("phases", []) if run is not None and run.ok else []
        latency[label] = {p["name"]: {"p50": p.get("p50_us"), "p99": p.get("p99_us"), "p99.9": p.get("p999_us"),
                                      "mean": p.get("mean_us"), "max": p.get("max_us"), "seconds": p.get("seconds")}
                          for p in phases}
    return latency


def _parallel(trials: list[FrozenTrial], importance: dict[str, float] | None) -> dict[str, Any] | None:
    """Complete trials over the most important knobs, for a parallel-coordinates view."""
    if not importance:
        return None
    knobs = list(importance)[:TOP_KNOBS]
    rows = [t for t in trials if t.state == TrialState.COMPLETE and all(k in t.params for k in knobs)]
    return {"knobs": knobs, "values": [t.value for t in rows],
            "columns": {k: [t.params[k] for t in rows] for k in knobs}}
