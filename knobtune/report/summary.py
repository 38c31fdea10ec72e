"""What a study found, as plain data: counts, the default, the result, its proof and its risks.

``show``, the end of ``tune``, ``export`` and the HTML report all read this.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from knobtune.analysis.stats import rung_agreement
from knobtune.knobs import Catalog, load_catalog
from knobtune.knobs.display import knob_value
from knobtune.knobs.units import human_bytes
from knobtune.systems import export_formats, know_system
from knobtune.tuning import attrs
from knobtune.errors import CatalogError, UsageError
from knobtune.tuning.document import ExperimentDoc, stored_document
from knobtune.tuning.finish import DEFAULT_LABEL, study_result
from knobtune.tuning.guide import compare_findings, rules_of
from knobtune.tuning.outcomes import Outcome
from knobtune.tuning.records import TrialRecord, record_of, value_of
from knobtune.tuning.space import kept_out_label
from knobtune.workloads import Objective
from knobtune.workloads.capture import CaptureSummary


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
    left_out: dict[str, str]  # knob -> the safety class kept out (its unsafe values, or the whole knob)
    unsafe_in_result: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    experiment: dict[str, Any] = field(default_factory=dict)
    allow_operational: bool = False  # operational values (auto-compaction off) were searched
    # the default's full-size value, its first run then controls
    default_runs: list[float] = field(default_factory=list)
    default_warm_up: float | None = None  # the default's full-size warm-up run, not counted (None: no warm-up)
    export_formats: tuple[str, ...] = ("json",)
    settled: bool = True  # run times include settling the store (False: the raw window, research.settle = false)
    rungs_run_scaled: bool = False  # small rungs ran configs with their data-sized knobs scaled to the rung's share
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)  # "default" / "result" -> settle, recovery, memory
    result_tried_first: str = ""  # the known config the study tried first that the result is (its label), if it is
    limits: dict[str, Any] = field(default_factory=dict)  # memory_limit_bytes, max_recovery_s (None: none given)
    ranked_by: dict[str, Any] | None = None  # a top-k study: the ranking study, k and the knobs it searched
    ranking: dict[str, Any] | None = None  # a ranking study: its knob ranking (analysis.ranking.Ranking.to_dict)
    machines: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> trials run there, its latest default
    rung_agreement: list[dict[str, float]] = field(default_factory=list)  # Spearman's rho of each rung with the next
    time_s: dict[str, float] = field(default_factory=dict)  # outcome -> seconds its trials took (and "all")
    units_machine: str | None = None  # the machine whose default gives the values' units (workers: docs/workers.md)
    time_spent: dict[str, float | None] = field(default_factory=dict)  # the latest `tune`: search, verification
    # the system's counters over the default's full run
    default_counters: dict[str, float] = field(default_factory=dict)
    diagnosis: dict[str, Any] = field(default_factory=dict)  # the rules over the default's and the result's full runs
    kept_out: dict[str, str] = field(default_factory=dict)  # what was kept out as said (compaction_style=fifo) -> class
    capture: CaptureSummary | None = None  # the workload is a capture of a user's own work: what it holds, no data

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
        study=study.study_name, system=user.get(attrs.SYSTEM, "?"),
        workload=(user.get(attrs.WORKLOAD) or {}).get("name", "?"), objective=objective,
        counts=count_outcomes(trials), default_value=default_trial.value if default_trial else None,
        result_trial=result.number if result else None, result_value=result.value if result else None,
        result_config=config, verified=outcome.verified,
        result_tried_first=str(result.user_attrs.get(attrs.STARTED_FROM, "")) if result else "",
        verdict=outcome.verdict + _holds_the_data(study, catalog, config,
                                                  outcome.verified and doc.limits.production_data_bytes is None),
        single_run_speedup=speedup, verification=verification,
        allow_unsafe=doc.search.allow_unsafe,
        allow_operational=doc.search.allow_operational, left_out=dict(user.get(attrs.LEFT_OUT, {})),
        unsafe_in_result=unsafe, warnings=_warnings(catalog, config, unsafe) + _fits_in_memory(
            study, catalog, config, doc.research.settle),
        experiment={**{k: user.get(k) for k in (attrs.TOOL_VERSION, attrs.TOOL_COMMIT, attrs.SYSTEM_VERSION,
                                                attrs.MACHINE, attrs.WORKLOAD)},
                    "driver": doc.workload.driver, "seed": doc.search.seed, "document": doc.record()},
        default_runs=[c["value"] for c in user.get(attrs.CONTROLS, []) if c.get("value") is not None],
        default_warm_up=(default_trial.user_attrs.get(attrs.WARM_UP) or {}).get("value") if default_trial else None,
        export_formats=tuple(f.name for f in export_formats(user.get(attrs.SYSTEM, catalog.system),
                                                            doc.workload.driver)) + ("json",),
        settled=doc.research.settle, rungs_run_scaled=bool(attrs.rungs_run_scaled(user)),
        capture=CaptureSummary.from_record(user[attrs.CAPTURE]) if attrs.CAPTURE in user else None,
        costs=_costs(study, default_trial, result, verification),
        limits={"memory_limit_bytes": doc.limits.memory_limit_bytes, "max_recovery_s": doc.limits.max_recovery_s,
                "production": _production(user, doc)},
        ranked_by=user.get(attrs.RANKED_BY), ranking=user.get(attrs.RANKING), machines=_machines(study, trials),
        units_machine=user.get(attrs.UNITS_MACHINE), time_s=time_by_outcome(trials),
        time_spent=dict(user.get(attrs.TIME_SPENT) or {}),
        default_counters=_counters(study, default_trial),
        diagnosis=_diagnosis(study, catalog, default_trial, result),
        rung_agreement=rung_agreement([_rung_values(r) for r in map(record_of, trials) if not r.is_default]),
        kept_out={kept_out_label(k, catalog): v for k, v in dict(user.get(attrs.LEFT_OUT, {})).items()},
    )


def _production(user: dict[str, Any], doc: ExperimentDoc) -> dict[str, Any] | None:
    """The production ratio a study capped its trials at, as ``show`` prints it (None: none)."""
    if doc.limits.production_data_bytes is None:
        return None
    planned = user.get(attrs.PLANNED_LIMIT, (user.get(attrs.OLD_PRODUCTION) or {}).get("planned_limit_bytes"))
    return {"data_bytes": doc.limits.production_data_bytes, "memory_bytes": doc.limits.production_memory_bytes,
            "planned_limit_bytes": planned}


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


def _machines(study: optuna.Study, trials: list[FrozenTrial]) -> dict[str, dict[str, Any]]:
    """Per machine that ran trials: how many sampled trials, its latest full-size default (raw), its facts."""
    full = _full_rung(study)
    machines: dict[str, dict[str, Any]] = {}
    for record in map(record_of, trials):
        if record.machine is None:
            continue
        facts = study.user_attrs.get(attrs.MACHINE_PREFIX + record.machine, {})
        entry = machines.setdefault(record.machine, {"trials": 0, "default_value": None, "facts": facts})
        run = record.run_at(full)
        if not record.is_default:
            entry["trials"] += 1
        elif run is not None and run.ok:
            entry["default_value"] = run.value
    return machines


def _full_rung(study: optuna.Study) -> int:
    """The index of the full-size rung of the study's workload."""
    return len((study.user_attrs.get(attrs.WORKLOAD) or {}).get("ladder", [1])) - 1


def count_outcomes(trials: list[FrozenTrial]) -> dict[str, int]:
    """Trials per outcome (the default's trial not counted); running and queued ones too."""
    counts: Counter[str] = Counter()
    for trial in trials:
        if attrs.is_default(trial.user_attrs):
            continue
        if trial.state in (TrialState.RUNNING, TrialState.WAITING):
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
    """The default's bottleneck by the system's rules and what the result changed about it (``tuning.guide``);
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


def diagnosis_lines(diagnosis: dict[str, Any]) -> list[str]:
    """The default's bottleneck with its evidence, and what the result changed about it, as lines a person reads."""
    if not diagnosis:
        return []
    if diagnosis.get("unread"):
        return ["the default's bottleneck: not read (the system's rules were off in this study: research.rules = "
                "false; `knobtune diagnose` reads them over one config's run)"]
    found = diagnosis.get("default", [])
    if not found:
        lines = ["the default's bottleneck: no rule of the system's rules fired on its full-size run"]
    else:
        lines = ["what the system's rules found in the default's full-size run:"]
        lines += [f"  {f['finding']} [{f['rule']}]" for f in found]
    result = diagnosis.get("result")
    if result and found:
        for rule in result.get("gone", []):
            lines.append(f"  the result: {rule} no longer fires ({_changes(result, rule)})")
        for rule in result.get("still", []):  # one that neither moved nor was followed (a shape's rule): not said
            if (moved := _changes(result, rule)) != UNMOVED:
                lines.append(f"  the result: {rule} still fires ({moved})")
    for finding in (result or {}).get("new", []):
        lines.append(f"  the result's own: {finding['finding']} [{finding['rule']}]")
    for search in diagnosis.get("narrowed", []):
        lines.append(f"  narrowed first: {search['trials']} trial(s) searched {', '.join(search['knobs'])} within "
                     "the rules' ranges, every other knob over its whole range")
    if diagnosis.get("guided"):
        lines.append("the search started from these findings (docs/diagnosis.md); research.rules = false searches "
                     "without them")
    return lines


UNMOVED = "its evidence unchanged"


def _changes(result: dict[str, Any], rule: str) -> str:
    """``stall_share 0.02 -> 0; moved max_write_buffer_number 2 -> 6``: how a default finding's evidence moved
    under the result, and the knobs it suggests that the result changed (a rule that reads the config, such as
    a bloom filter's absence, shows only the latter)."""
    evidence = {name: pair for name, pair in result["evidence"].get(rule, {}).items()
                if all(isinstance(v, (int, float)) for v in pair) and pair[0] != pair[1]}
    parts = [_arrows(evidence)] if evidence else []
    if moved := result.get("moved", {}).get(rule):
        parts.append("moved " + _arrows(moved))
    return "; ".join(parts) or UNMOVED


def _arrows(pairs: dict[str, list[Any]]) -> str:
    """``stall_share 0.02 -> 0, stalls_memtable 3 -> 0``: each name's value before and after."""
    return ", ".join(f"{name} {_shown(before)} -> {_shown(after)}" for name, (before, after) in pairs.items())


def _shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def describe_costs(cost: dict[str, Any]) -> str:
    """``workload 4.10 s + settle 1.20 s; recovery 0.30 s; peak memory 180.2 MiB``."""
    def seconds(key: str) -> str:
        return f"{cost[key]:.2f} s" if cost.get(key) is not None else "-"

    memory = human_bytes(cost["peak_rss_bytes"]) if cost.get("peak_rss_bytes") else "-"
    return (f"workload {seconds('workload_s')} + settle {seconds('settle_s')}; recovery {seconds('recovery_s')}; "
            f"peak memory {memory}")


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


def capture_lines(capture: CaptureSummary | Mapping[str, Any] | None, counters: Mapping[str, float]) -> list[str]:
    """What a capture study replayed (``capture``: span, sessions, the mix, the costliest fingerprints; never data)
    and how well the default's replay kept the captured pace (its ``counters`` over its full-size run)."""
    if not capture:
        return []
    lines = (capture if isinstance(capture, CaptureSummary) else CaptureSummary.from_record(capture)).lines()
    if "replay_lag_p99_s" in counters:
        lines.append(f"  the default's replay at full size ran behind the captured schedule by "
                     f"{counters['replay_lag_p99_s']:.3f} s at p99 ({counters.get('replay_lag_max_s', 0.0):.3f} s at "
                     "most; 0 when replayed as fast as it can)")
    if counters.get("replay_failed_statements"):
        lines.append(f"  {counters['replay_failed_statements']:,.0f} statements failed under the default's replay "
                     "too (not held against a config)")
    return lines
