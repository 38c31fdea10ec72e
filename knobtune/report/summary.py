"""What a study found, read from what it stores into the typed sections of ``report.sections``.

``show``, the end of ``tune``, ``export`` and the HTML report all read this.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from knobtune.analysis.stats import rung_agreement
from knobtune.knobs import Catalog, load_catalog
from knobtune.knobs.display import knob_value
from knobtune.units import human_bytes
from knobtune.systems import export_formats, know_system
from knobtune.tuning import attrs
from knobtune.errors import CatalogError, UsageError
from knobtune.tuning.document import ExperimentDoc, stored_document
from knobtune.tuning.proof import DEFAULT_LABEL, study_result
from knobtune.tuning.search import compare_findings, kept_out_label, rules_of
from knobtune.tuning.records import Outcome, TrialRecord, record_of, value_of
from knobtune.report.sections import (
    Bottleneck, Costs, Default, Heading, Limits, MachineRuns, Production, Proof, Ranked, RankedBy, Replay, Result,
    Safety, StudySummary, TimeSpent, Trials,
)
from knobtune.workloads import Objective
from knobtune.workloads.capture import CaptureSummary


def summarize(study: optuna.Study, catalog: Catalog | None = None) -> StudySummary:
    """Everything a person needs to judge a study, from what is stored on it."""
    user = study.user_attrs
    if attrs.SYSTEM not in user:
        raise UsageError(f"study '{study.study_name}' was created but never started (knobtune stopped before its "
                         "first run). Fix: run the same `knobtune tune` again to start it")
    know_system(user[attrs.SYSTEM], user.get(attrs.SYSTEM_FILE))
    catalog = catalog or load_catalog(user[attrs.SYSTEM])
    doc = stored_document(user, study.study_name)
    objective = Objective(doc.workload.objective or "elapsed_s")
    trials = study.get_trials(deepcopy=False)
    default_trial = next((t for t in trials if attrs.role_of(t.user_attrs) == attrs.ROLE_DEFAULT
                     and t.state == TrialState.COMPLETE), None)
    verification = user.get(attrs.VERIFICATION)
    outcome = study_result(study)
    result = study.trials[outcome.trial] if outcome.trial is not None else None
    config = dict(outcome.config)
    unsafe = {k: v.value for k, v in catalog.unsafe_in(catalog.config(config)).items()} if config else {}
    speedup = (objective.speedup(result.value, value_of(default_trial))
               if result is not None and default_trial is not None and result.value else None)
    return StudySummary(
        heading=Heading(
            study=study.study_name, system=user.get(attrs.SYSTEM, "?"),
            workload=(user.get(attrs.WORKLOAD) or {}).get("name", "?"), objective=objective,
            experiment={**{k: user.get(k) for k in (attrs.TOOL_VERSION, attrs.TOOL_COMMIT, attrs.SYSTEM_VERSION,
                                                    attrs.MACHINE, attrs.WORKLOAD)},
                        "driver": doc.workload.driver, "seed": doc.search.seed, "document": doc.record()},
            export_formats=tuple(f.name for f in export_formats(user.get(attrs.SYSTEM, catalog.system),
                                                                doc.workload.driver)) + ("json",)),
        proof=Proof(verdict=outcome.verdict + _holds_the_data(
            study, catalog, config, outcome.verified and doc.limits.production_data_bytes is None),
            verified=outcome.verified, verification=verification),
        replay=Replay(CaptureSummary.from_record(user[attrs.CAPTURE]) if attrs.CAPTURE in user else None),
        trials=Trials(
            counts=count_outcomes(trials), time_s=time_by_outcome(trials),
            time_spent=TimeSpent.from_record(user.get(attrs.TIME_SPENT)),
            rung_agreement=rung_agreement([_rung_values(r) for r in map(record_of, trials) if not r.is_default]),
            rungs_run_scaled=bool(attrs.rungs_run_scaled(user)), earlier_studies=list(user.get(attrs.EARLIER) or []),
            earlier_trials=int(user.get(attrs.EARLIER_TRIALS) or 0),
            earlier_gains=[_full_size_ratio(t) for t in trials if attrs.from_earlier(t.user_attrs)]),
        default=Default(
            default_value=default_trial.value if default_trial else None,
            default_warm_up=(default_trial.user_attrs.get(attrs.WARM_UP) or {}).get("value") if default_trial else None,
            default_runs=[c["value"] for c in user.get(attrs.CONTROLS, []) if c.get("value") is not None],
            default_counters=_counters(study, default_trial), machines=_machines(study, trials),
            units_machine=attrs.units_machine(user)),
        result=Result(
            result_trial=result.number if result else None, result_value=result.value if result else None,
            result_config=config,
            result_tried_first=str(result.user_attrs.get(attrs.STARTED_FROM, "")) if result else "",
            single_run_speedup=speedup),
        cost=Costs(settled=doc.research.settle, costs=_costs(study, default_trial, result, verification),
                   limits=Limits(memory_limit_bytes=doc.limits.memory_limit_bytes,
                                 max_recovery_s=doc.limits.max_recovery_s, production=_production(user, doc))),
        bottleneck=Bottleneck(_diagnosis(study, catalog, default_trial, result)),
        ranked=Ranked(ranked_by=_ranked_by(user.get(attrs.RANKED_BY)), ranking=user.get(attrs.RANKING)),
        safety=Safety(
            warnings=_warnings(catalog, config, unsafe) + _fits_in_memory(study, catalog, config, doc.research.settle),
            unsafe_in_result=unsafe, allow_unsafe=doc.search.allow_unsafe,
            allow_operational=doc.search.allow_operational, left_out=dict(user.get(attrs.LEFT_OUT, {})),
            kept_out={kept_out_label(k, catalog): v for k, v in dict(user.get(attrs.LEFT_OUT, {})).items()}),
    )


def _full_size_ratio(trial: FrozenTrial) -> float | None:
    """A complete trial's speedup over its machine's default at full size (None: it did not complete)."""
    return record_of(trial).reached_ratio if trial.state == TrialState.COMPLETE else None


def _ranked_by(data: dict[str, Any] | None) -> RankedBy | None:
    if not data:
        return None
    return RankedBy(study=str(data.get("study", "?")), top_k=int(data.get("top_k", 0)),
                    knobs=[str(k) for k in data.get("knobs", [])])


def _production(user: dict[str, Any], doc: ExperimentDoc) -> Production | None:
    """The production ratio a study capped its trials at (None: none)."""
    data, memory = doc.limits.production_data_bytes, doc.limits.production_memory_bytes
    if data is None or memory is None:
        return None
    planned = user.get(attrs.PLANNED_LIMIT, (user.get(attrs.OLD_PRODUCTION) or {}).get("planned_limit_bytes"))
    return Production(data_bytes=data, memory_bytes=memory, planned_limit_bytes=planned)


def _rung_values(record: TrialRecord) -> dict[int, float]:
    """The values a trial measured (or reused) at each rung, in the study's units."""
    return {rung: run.in_study_units for rung, run in record.runs.items() if run.ok}


def time_by_outcome(trials: list[FrozenTrial]) -> dict[str, float]:
    """Seconds the finished sampled trials took, by outcome, and in all ("all"): where a study's time went.

    A trial's time runs from its start to its end: every rung it ran, the settle of each, and its reused
    rungs (which take no time)."""
    spent: defaultdict[str, float] = defaultdict(float)
    for trial in trials:
        if attrs.is_default(trial.user_attrs) or not (trial.datetime_start and trial.datetime_complete):
            continue
        seconds = (trial.datetime_complete - trial.datetime_start).total_seconds()
        spent[trial.user_attrs.get(attrs.OUTCOME, trial.state.name.lower())] += seconds
        spent["all"] += seconds
    return {k: round(v, 1) for k, v in spent.items()}


def _machines(study: optuna.Study, trials: list[FrozenTrial]) -> dict[str, MachineRuns]:
    """Per machine that ran trials: how many sampled trials, its latest full-size default (raw), its facts."""
    full = _full_rung(study)
    trial_counts: Counter[str] = Counter()
    defaults: dict[str, float | None] = {}
    for record in map(record_of, trials):
        if record.machine is None:
            continue
        defaults.setdefault(record.machine, None)
        run = record.run_at(full)
        if not record.is_default:
            trial_counts[record.machine] += 1
        elif run is not None and run.ok:
            defaults[record.machine] = run.value
    return {name: MachineRuns(trials=trial_counts[name], default_value=value,
                              facts=study.user_attrs.get(attrs.MACHINE_PREFIX + name, {}))
            for name, value in defaults.items()}


def _full_rung(study: optuna.Study) -> int:
    """The index of the full-size rung of the study's workload."""
    return len((study.user_attrs.get(attrs.WORKLOAD) or {}).get("ladder", [1])) - 1


def count_outcomes(trials: list[FrozenTrial]) -> dict[str, int]:
    """Trials per outcome (the default's trial not counted); running and queued ones too. A trial another worker
    ended as lost after it stored its outcome counts as failed, as the other lost ones do: its retry counts the
    outcome."""
    counts: Counter[str] = Counter()
    for trial in trials:
        if attrs.is_default(trial.user_attrs):
            continue
        if trial.state in (TrialState.RUNNING, TrialState.WAITING) or record_of(trial).taken_over:
            counts[trial.state.name.lower()] += 1
        else:
            counts[trial.user_attrs.get(attrs.OUTCOME, trial.state.name.lower())] += 1
    return {o.value: counts.get(o.value, 0) for o in Outcome} | {k: v for k, v in counts.items()
                                                                  if k not in {o.value for o in Outcome}}


def _costs(study: optuna.Study, default_trial: FrozenTrial | None, result: FrozenTrial | None,
           verification: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Settle time, recovery time and peak memory of the default and the result at full size.

    From the verification's repeats (medians) when it ran, else from the single full-size run.
    """
    full = _full_rung(study)
    verified = {c["label"]: c.get("costs") for c in (verification or {}).get("candidates", []) if c.get("costs")}
    costs: dict[str, dict[str, Any]] = {}
    for role, trial, label in (("default", default_trial, DEFAULT_LABEL),
                               ("result", result, f"trial {result.number}" if result else None)):
        run = record_of(trial).run_at(full) if trial is not None else None
        if label in verified:
            costs[role] = {**verified[label], "source": "median of the verification runs"}
        elif run is not None and run.ok:
            costs[role] = {**run.costs(), "source": "one full-size run"}
    return costs


def _diagnosis(study: optuna.Study, catalog: Catalog, default: FrozenTrial | None,
               result: FrozenTrial | None) -> dict[str, Any]:
    """The default's bottleneck by the system's rules and what the result changed about it (``tuning.search.guide``);
    {} when the system has no rules or the default has no full-size run; ``unread`` when the rules were off in the
    study."""
    full = _full_rung(study)
    run = record_of(default).run_at(full) if default is not None else None
    try:
        rules = rules_of(catalog.system)
    except CatalogError:
        return {}
    if not rules or run is None or not run.ok:
        return {}
    state = study.user_attrs.get(attrs.DIAGNOSIS) or {}
    if not state:  # the rules were off (research.rules = false): the workload's shape they read was never taken
        return {"unread": True}
    result_run = record_of(result).run_at(full) if result is not None else None
    story = compare_findings(rules, state.get("shape", {}), (run, catalog.defaults()),
                             (result_run, catalog.config(result.user_attrs.get(attrs.CONFIG, {})))
                             if result is not None and result_run is not None else None)
    for moved in story.get("result", {}).get("moved", {}).values():  # as a person reads the knobs' values
        moved.update({k: [knob_value(catalog[k], v) for v in values] for k, values in moved.items()})
    return {**story, "guided": bool(state), "fired_during_search": state.get("fired", []),
            "narrowed": _narrowed(study)}


def _narrowed(study: optuna.Study) -> list[dict[str, Any]]:
    """The narrowed searches of a guided study, in order: the knobs searched within narrowed ranges and how many
    sampled trials did so."""
    searches: dict[tuple[str, ...], int] = {}
    for trial in study.get_trials(deepcopy=False):
        if attrs.FOCUSED in trial.user_attrs:
            key = tuple(trial.user_attrs[attrs.FOCUSED])
            searches[key] = searches.get(key, 0) + 1
    return [{"knobs": list(knobs), "trials": n} for knobs, n in searches.items()]


def _counters(study: optuna.Study, default: FrozenTrial | None) -> dict[str, float]:
    """The system's own counters over the default's first full-size run (none when the system gives none)."""
    run = record_of(default).run_at(_full_rung(study)) if default is not None else None
    return dict(run.counters) if run is not None and run.ok else {}


def _fits_in_memory(study: optuna.Study, catalog: Catalog, config: dict[str, Any], settled: bool) -> list[str]:
    """A note for each rung whose whole data set fits in the result's write buffers (as that rung ran them: scaled
    to its share of the data when the study scaled its rungs)."""
    if not config:
        return []
    data, scales = _data_bytes(study, catalog)
    full = catalog.config(config)
    buffers = catalog.memory.write_buffer_bytes(full)
    scaled = bool(attrs.rungs_run_scaled(study.user_attrs))
    ladder = (study.user_attrs.get(attrs.WORKLOAD) or {}).get("ladder", [])
    fitting = [f"{fraction:g}" for fraction in ladder
               if (at := catalog.memory.write_buffer_bytes(catalog.at_fraction(full, fraction) if scaled else full))
               and data * (fraction if scales else 1) <= at]
    if not fitting:
        return []
    counted = "its settled time counts the flush" if settled else \
        "this study measured the raw window (research.settle = false), so that flush was never counted"
    return [f"the result's write buffers ({human_bytes(buffers)}) hold the whole data set at rung(s) "
            f"{', '.join(fitting)} of the ladder (up to {human_bytes(data)}): nothing needs to reach "
            f"a table file during the run; {counted}"]


def _data_bytes(study: optuna.Study, catalog: Catalog) -> tuple[int, bool]:
    """The benchmark's data at full size (the diagnosis's shape when the study read one: a server's loaded data;
    else records x (key + value)), and whether a rung holds its fraction of it (a store whose catalog scales
    rungs) or all of it (a server: its rungs scale the transactions, not the data)."""
    user = study.user_attrs
    workload = user.get(attrs.WORKLOAD) or {}
    shape = (user.get(attrs.DIAGNOSIS) or {}).get("shape") or {}
    records = workload.get("records", 0) * (workload.get("key_size", 0) + workload.get("value_size", 0))
    return int(shape.get("data_bytes") or records), catalog.scales_rungs


def _holds_the_data(study: optuna.Study, catalog: Catalog, config: dict[str, Any], uncapped_verified: bool) -> str:
    """The verdict's note when the verified result (``uncapped_verified``: verified, and no production ratio capped
    it) plans caches and buffers as large as the whole benchmark's data: a fair answer for data that fits in
    memory, a wrong one for production data many times larger (``--production-data``/``--production-memory`` cap
    the search at production's ratio)."""
    if not (config and uncapped_verified):
        return ""
    data, _ = _data_bytes(study, catalog)
    planned = catalog.memory.planned_bytes(catalog.config(config))
    if not data or planned < data:
        return ""
    return (f"; note: its caches and buffers ({human_bytes(planned)}) hold the whole benchmark's data "
            f"({human_bytes(data)}): right if production's memory holds its data too; otherwise tune with "
            "--production-data and --production-memory")


def _warnings(catalog: Catalog, config: dict[str, Any], unsafe: dict[str, str]) -> list[str]:
    notes = []
    for name, safety in unsafe.items():
        knob = catalog.knobs[name]
        notes.append(f"the result sets {name}={config.get(name)} ({safety}): {knob.safety_note}; "
                     f"run with --knobs excluding {name} to avoid it")
    return notes
