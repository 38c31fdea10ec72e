"""Commands that measure configs outside a study's search: ``explain``, ``compare``, ``diagnose``, ``sweep``; the
last three take the experiment document (``--experiment`` and the options that set its fields), as ``tune`` does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer

from knobtune import console
from knobtune.errors import ConfigError, UsageError
from knobtune.analysis.diagnosis import Suggestion, diagnose
from knobtune.knobs import Catalog, Value, load_catalog
from knobtune.knobs.display import knob_value
from knobtune.outputs import OutputFile, Written, check_output, check_outputs
from knobtune.report import load_config_file, page_files, summarize
from knobtune.report.sweep import point_lines, write_sweep
from knobtune.storage import StudyStore, open_store
from knobtune.targets import RunFailure
from knobtune.systems import SYSTEMS, make_target, use_system
from knobtune.tuning.sweep import MAX_POINTS, plan_sweep, run_sweep, study_base
from knobtune.tuning.proof import Candidate, CandidateRuns, explain_study, run_interleaved
from knobtune.tuning.document import MAX_REPEATS, measuring, of_system, replace, tuning_study
from knobtune.tuning.search import counter_meanings, rules_of
from knobtune.workloads import Objective
from knobtune.cli.document import experiment_document
from knobtune.cli.options import (
    AllowUnsafeOption, DirOption, DocumentSystemArgument, DriverOption, ExperimentOption, ForceOption, JsonOption,
    MemoryLimitOption, ObjectiveOption, RecordsOption, SeedOption, StorageOption, TimeoutFactorOption, UnsettledOption,
    WorkloadOption, at_least, at_most, output_path, preflight, reclaim, trial_config,
)

# compare's and sweep's --repeats is their own (interleaved runs per config or point), not the proof's repeats
OWN = ("--repeats",)


def explain_command(
    study: str,
    repeats: Annotated[int, typer.Option(help="Interleaved full-size runs of each step of the path.")] = 3,
    select_rung: Annotated[int, typer.Option(help="Rung of the single runs that choose the greedy order (0: the "
                                                  "cheapest).")] = 0,
    keep: Annotated[float,
                    typer.Option(help="The minimal config keeps at least this share of the winner's gain.")] = 0.95,
    trial: Annotated[Optional[int],
                     typer.Option(help="Explain this trial's config instead of the verified result.")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Which of a winner's changes earned the gain: the ablation path from the default, each step measured.

    Example: knobtune explain pgd --repeats 3 && knobtune export pgd --minimal --format rocksdb-options
    """
    at_least("--repeats", repeats, 2, "e.g. --repeats 3 (intervals need repeats)")
    at_most("--repeats", repeats, MAX_REPEATS, "e.g. --repeats 3 (each step runs that often at full size)")
    at_least("--select-rung", select_rung, 0, "e.g. --select-rung 0")
    if not 0 < keep <= 1:
        raise UsageError(f"--keep {keep:g} is not a share. Fix: e.g. --keep 0.95")
    store = open_store(directory, storage)
    loaded = tuning_study(store.load(study), "explain")
    summary = summarize(loaded)
    winner = trial_config(loaded, study, trial) if trial is not None else summary.result_config
    if not winner and trial is not None:
        raise UsageError(f"trial {trial} of study '{study}' changed no knob (it ran the default): there is nothing "
                         f"to explain. Fix: name a trial that changed knobs (`knobtune show {study}` lists them)")
    if not winner:
        raise UsageError(f"study '{study}' has no verified result to explain ({summary.verdict}). "
                         "Fix: name a trial with --trial N")
    reclaim(store, json_output)
    info = console.err if json_output else console.out
    result = explain_study(loaded, store, winner, repeats=repeats, select_rung=select_rung, keep=keep,
                           note=lambda message: info.print(message, markup=False))
    if json_output:
        console.print_json(result)
    else:
        console.explanation_text(result, summary.objective, study)


def compare(
    ctx: typer.Context,
    system: DocumentSystemArgument = None,
    workload: WorkloadOption = None,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="'default', a JSON file, or study:NAME (its result). Repeat; the others are measured against "
                         "the first.")] = None,
    repeats: Annotated[int, typer.Option(help="Interleaved runs per config.")] = 5,
    records: RecordsOption = None,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    seed: SeedOption = None,
    timeout_factor: TimeoutFactorOption = None,
    unsettled: UnsettledOption = False,
    memory_limit: MemoryLimitOption = None,
    experiment: ExperimentOption = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Measure configs side by side, interleaved, with medians and 95% intervals against the first.

    Example: knobtune compare rocksdb --workload put-get-delete --config default --config best.json --repeats 5

    The workload and measurement of an experiment file (docs/experiment.md): knobtune compare --experiment pgd.toml
    --config default --config study:pgd
    """
    if len(config or []) < 2:
        raise UsageError("compare needs at least two --config. Fix: e.g. --config default --config best.json")
    at_least("--repeats", repeats, 1, "e.g. --repeats 5")
    at_most("--repeats", repeats, MAX_REPEATS, "e.g. --repeats 5 (each config runs that often at full size)")
    runs = measuring(experiment_document(ctx, experiment, system, own=OWN))  # the options above that name a field
    catalog, spec, doc = runs.catalog, runs.workload, runs.doc
    settle, limit = doc.research.settle, doc.limits.memory_limit_bytes
    store = open_store(directory, storage)
    candidates = [_candidate(label, catalog, store) for label in config or []]
    preflight(catalog, spec, runs.driver, store, settle=settle, memory_limit_bytes=limit)
    reclaim(store, json_output)
    with make_target(catalog, spec, store.worker_scratch(), runs.driver, settle=settle,
                     memory_limit_bytes=limit) as target:
        comparison = run_interleaved(
            target, candidates, spec.full, repeats=repeats, objective=runs.objective, seed=doc.search.seed,
            timeout_factor=doc.measurement.timeout_factor, log_dir=store.home / "compare",
            on_run=None if json_output else _print_run(runs.objective))
    unsafe = {candidate.label: {k: v.value for k, v in catalog.unsafe_in(full).items()}
              for candidate, full in candidates}
    if json_output:
        data = comparison.to_dict()
        for entry in data["candidates"]:
            entry["unsafe_knobs"] = unsafe[entry["label"]]
        console.print_json(data)
        return
    console.comparison_text(comparison, runs.objective, unsafe, settled=settle)


def sweep_command(
    ctx: typer.Context,
    system: DocumentSystemArgument = None,
    workload: WorkloadOption = None,
    knob: Annotated[Optional[list[str]], typer.Option(
        "--knob", help="The knob to sweep; a second --knob sweeps a 2-D grid.")] = None,
    around: Annotated[Optional[str], typer.Option("--around", help="Keep the other knobs at this study's result (its "
                                                                   "verified winner) instead of the defaults.")] = None,
    points: Annotated[Optional[int], typer.Option(
        help="Grid steps per numeric knob (default 7; 5 x 5 for two knobs); the default, the study's value and "
             "special values are added.")] = None,
    repeats: Annotated[int, typer.Option(help="Interleaved runs per point.")] = 3,
    records: RecordsOption = None,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    seed: SeedOption = None,
    timeout_factor: TimeoutFactorOption = None,
    allow_unsafe: AllowUnsafeOption = False,
    unsettled: UnsettledOption = False,
    memory_limit: MemoryLimitOption = None,
    experiment: ExperimentOption = None,
    out: Annotated[Optional[Path], typer.Option(
        "-o", "--output", "--out", help="The HTML file to write, its JSON beside it (default: in the studies folder); "
                                        "--out is the older spelling.")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
    force: ForceOption = False,
) -> None:
    """Measure the objective over a grid of one knob (or two), each point repeated and interleaved; draw it.

    Example: knobtune sweep leveldb --workload fillrandom --knob write_buffer_size --around wbs --repeats 3
    """
    at_least("--points", points, 2, "e.g. --points 7 (a grid needs two steps)")
    at_most("--points", points, MAX_POINTS, f"e.g. --points 7 (at most {MAX_POINTS} steps per knob)")
    at_least("--repeats", repeats, 1, "e.g. --repeats 3")
    at_most("--repeats", repeats, MAX_REPEATS, "e.g. --repeats 3 (each point runs that often at full size)")
    doc = experiment_document(ctx, experiment, system, own=OWN)  # the options above that name a field
    knobs = knob or []
    out = output_path(out)
    if out is not None:
        html_path, json_path = page_files(out)
        check_outputs([OutputFile(html_path, Written.HTML)] if html_path else [], force=force)
        check_output(OutputFile(json_path, Written.JSON), force=force)
    catalog = load_catalog(use_system(doc.system))
    store = open_store(directory, storage)
    base, base_from = {}, None
    if around is not None:  # the study's size, driver and objective, unless given
        centre = study_base(tuning_study(store.load(around), "--around"), catalog.system, doc.workload.name)
        base, base_from, w = dict(centre.config), dict(centre.around), doc.workload
        doc = replace(doc, workload__records=w.records or centre.records, workload__driver=w.driver or centre.driver,
                      workload__objective=w.objective or centre.objective.value)
    runs = measuring(doc, catalog)
    spec, settle = runs.workload, doc.research.settle
    target = make_target(catalog, spec, store.worker_scratch(), runs.driver, settle=settle,
                         memory_limit_bytes=doc.limits.memory_limit_bytes)
    plan = plan_sweep(catalog, knobs, points=points, base=base, around=base_from, allow_unsafe=doc.search.allow_unsafe,
                      impossible=target.impossible_values(), driver=runs.driver)
    target.preflight()
    reclaim(store, json_output)
    folder = (store.artifacts(around) / f"sweep-{'-'.join(knobs)}" if around
              else store.artifacts(f"sweep-{catalog.system}-{spec.name}-{'-'.join(knobs)}"))
    info = console.err if json_output else console.out
    with target:
        result = run_sweep(target, plan, spec.full, repeats=repeats, objective=runs.objective, seed=doc.search.seed,
                           log_dir=folder / "runs", timeout_factor=doc.measurement.timeout_factor,
                           min_timeout_s=doc.measurement.min_timeout_s,
                           note=lambda message: info.print(message, markup=False))
    data = result.to_dict() | {"logs": str(folder / "runs")}
    html_path, json_path = write_sweep(data, out or folder / "sweep.html")
    if json_output:
        console.print_json(data)
    else:
        for line in point_lines(data) + [data["verdict"]]:
            console.out.print(line, markup=False)
    info.print(f"wrote {html_path} and {json_path}", markup=False)


def diagnose_command(
    ctx: typer.Context,
    system: DocumentSystemArgument = None,
    workload: WorkloadOption = None,
    config: Annotated[Optional[str], typer.Option("--config", help="'default' (the default), a JSON file, or "
                                                                   "study:NAME (its result).")] = None,
    records: RecordsOption = None,
    driver: DriverOption = None,
    seed: SeedOption = None,
    unsettled: UnsettledOption = False,
    memory_limit: MemoryLimitOption = None,
    experiment: ExperimentOption = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Run one config at full size and say what the system's rules find in its counters, with the evidence.

    Example: knobtune diagnose rocksdb --workload put-get-delete --config best.json
    """
    runs = measuring(experiment_document(ctx, experiment, system))  # the options above that name a field
    catalog, spec, doc, driver = runs.catalog, runs.workload, runs.doc, runs.driver
    system, settle, limit = catalog.system, doc.research.settle, doc.limits.memory_limit_bytes
    rules = rules_of(system)
    store = open_store(directory, storage)
    candidate, full = _candidate(config or "default", catalog, store)
    preflight(catalog, spec, driver, store, settle=settle, memory_limit_bytes=limit)
    reclaim(store, json_output)
    if not json_output:
        console.out.print(f"running {system} / {spec.name} under {candidate.label} at {spec.full}", markup=False)
    with make_target(catalog, spec, store.worker_scratch(), driver, settle=settle,
                     memory_limit_bytes=limit) as target:
        target.keep_costly_counters()  # one run, compared with none: every counter a rule may read
        try:
            measurement = target.run(full, spec.full, timeout_s=None, log_path=store.home / "diagnose" / "run.log",
                                     seed=doc.search.seed)
        except RunFailure as failure:
            raise UsageError(f"{candidate.label} did not run ({failure.kind}): {failure.reason}. Fix: diagnose "
                             "another config; its log is " + str(failure.log_path or store.home / "diagnose")) from None
        shape = {**target.workload_facts().shape(), "workload_s": measurement.workload_s}
    found = diagnose(rules, measurement.counters, shape, full)
    if json_output:
        console.print_json({"system": system, "workload": spec.name, "driver": driver, "config": candidate.label,
                            "changed": dict(candidate.config), "measurement": measurement.summary(),
                            "shape": shape, **found.to_dict()})
        return
    meanings = counter_meanings(catalog.system)
    console.out.print(f"{candidate.label}: {runs.objective.show(measurement.value(runs.objective))}; "
                      f"{len(measurement.counters)} counters read (their meanings: {SYSTEMS[catalog.system].counters})",
                      markup=False)
    for finding in found.findings:
        console.out.print(f"finding [{finding.rule}]: {finding.text}", markup=False)
        for suggestion in finding.suggest:
            console.out.print(f"  suggests {_suggested(suggestion, catalog)}", markup=False)
        for start in finding.starts:
            console.out.print(f"  offers the start {start.label}", markup=False)
        console.out.print(f"  source: {finding.source}", markup=False)
    if not found.findings:
        console.out.print("no rule fired: nothing in this run's counters points at a knob", markup=False)
    for rule, why in found.skipped.items():
        console.out.print(f"not read: {rule} ({why})", markup=False)
    read = sorted({n for r in rules for n in r.names} & set(measurement.counters))
    for name in read:
        meaning = meanings[name].meaning if name in meanings else ""
        console.out.print(f"  {name} = {measurement.counters[name]:.4g}" + (f"  ({meaning})" if meaning else ""),
                          markup=False)


def _suggested(suggestion: Suggestion, catalog: Catalog) -> str:
    """``write_buffer_size up (64.0 MiB..1.0 GiB)`` as a person reads it."""
    knob = catalog.knobs.get(suggestion.knob)
    if suggestion.direction == "to" or knob is None:
        return f"{suggestion.knob} = {suggestion.value}"
    bounds = [b for b in (suggestion.low, suggestion.high) if isinstance(b, (int, float))]
    shown = "..".join(knob_value(knob, int(b) if knob.type.value in ("int", "bytes") else b) for b in bounds)
    return f"{suggestion.knob} {suggestion.direction}" + (f" (bound {shown})" if shown else "")


def _print_run(goal: Objective) -> Callable[[int, CandidateRuns, float | None], None]:
    """A line for each run of ``compare`` as it finishes."""
    def on_run(repeat: int, runs: CandidateRuns, value: float | None) -> None:
        shown = goal.show(value) if value is not None else f"failed: {runs.failure}"
        console.out.print(f"round {repeat + 1} {runs.candidate.label}: {shown}")
    return on_run


def _candidate(label: str, catalog: Catalog, store: StudyStore) -> tuple[Candidate, dict[str, Value]]:
    """A --config of ``compare``: 'default', study:NAME (its result) or a JSON file; with its full config."""
    if label == "default":
        return Candidate("default", {}), catalog.defaults()
    if label.startswith("study:"):
        study = of_system(store.load(label.removeprefix("study:")), catalog.system, f"--config {label}")
        summary = summarize(tuning_study(study, f"--config {label}"), catalog)
        return Candidate(label, summary.result_config), catalog.config(summary.result_config)
    changed = load_config_file(Path(label), catalog.system)
    try:
        return Candidate(label, changed), catalog.config(changed)
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc}") from None

