"""The ``knobtune`` command: thin; parses, builds an experiment, calls the layers below."""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from knobtune import console
from knobtune.errors import KnobtuneError, UsageError
from knobtune.knobs import load_catalog
from knobtune.knobs.units import parse_bytes, parse_duration_s
from knobtune.report import export_config, load_config_file, summarize, write_report
from knobtune.report.summary import describe_costs
from knobtune.storage import open_store
from knobtune.targets import (
    TARGETS, Machine, disk_detection, export_formats, heuristic_config, make_target, resolve_driver, target_class,
    workload_section,
)
from knobtune.tuning import Tuner, TuneSettings, build_space
from knobtune.tuning.explain import EXPLANATION, explain, study_workload
from knobtune.tuning.finish import starting_configs
from knobtune.tuning.ranking import rank_study, ranked_knobs
from knobtune.tuning.samplers import SAMPLERS
from knobtune.tuning.space import left_out_line
from knobtune.tuning.worker import join_settings
from knobtune.tuning.verify import Candidate, run_interleaved
from knobtune.tuning.sweep import plan_sweep, run_sweep
from knobtune.report.sweep import point_lines, write_sweep
from knobtune.workloads import Objective, available_workloads, load_workload

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Find the configuration that makes a database fast for one workload on one machine.")

DirOption = Annotated[Optional[Path], typer.Option("--dir", help="Studies folder (default ./knobtune-studies or $KNOBTUNE_HOME).")]
StorageOption = Annotated[Optional[str], typer.Option("--storage", help="Optuna storage URL (default: SQLite in --dir).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
UnsettledOption = Annotated[bool, typer.Option("--unsettled", help="Measure the raw window: leave out the flush, compaction and reopen a run leaves behind.")]
MemoryLimitOption = Annotated[Optional[str], typer.Option("--memory-limit", help="Configs planned or measured above this peak memory are infeasible, e.g. 2GiB.")]
WorkloadOption = Annotated[str, typer.Option(help="Workload name (see `knobtune systems`) or a .toml file.")]
ObjectiveOption = Annotated[Optional[str], typer.Option(help="elapsed_s, ops_per_s or p99_us (default: the workload's).")]
DriverOption = Annotated[Optional[str], typer.Option(help="Benchmark driver (default: the system's).")]
RecordsOption = Annotated[Optional[int], typer.Option(help="Override the workload's full size (records).")]
TimeoutFactorOption = Annotated[float, typer.Option(help="Stop a run taking longer than this times the default's.")]
MachineOption = Annotated[Optional[str], typer.Option("--machine", help="This machine's name in a study shared by workers (default: the host name).")]
UnscaledRungsOption = Annotated[bool, typer.Option("--unscaled-rungs", help="Run small rungs with the config as it is, not with its memtables, caches and file sizes scaled to the rung's share of the data.")]
AllowOperationalOption = Annotated[bool, typer.Option("--allow-operational", help="Also search operational values (auto-compaction off): nothing is lost, but the store never settles by itself.")]
MixedOption = Annotated[bool, typer.Option("--allow-mixed-machines", help="Let a machine of another kind (CPU, memory, disk, OS, version) work on the study.")]


@app.command()
def systems(json_output: JsonOption = False) -> None:
    """Systems, drivers and workloads available here.

    Example: knobtune systems --json
    """
    rows = []
    for (system, driver), target in TARGETS.items():
        binary = target.installed()
        rows.append({"system": system, "driver": driver, "installed": binary is not None, "path": binary,
                     "formats": [f.name for f in export_formats(system, driver)] + ["json"]})
    workloads = []
    for name in available_workloads():
        workload = load_workload(name)
        sections = workload.drivers
        verifiable = {}
        for driver, section in sections.items():
            runs = [target_class(system, driver) for system in workload.systems]
            verifiable[driver] = any(cls is not None and cls.checks_reads(section) for cls in runs)
        twins = {d: list(s["twin"]) for d, s in sections.items() if "twin" in s}
        workloads.append({"name": name, "systems": list(workload.systems), "objective": workload.objective.value,
                          "records": workload.records, "ladder": list(workload.ladder),
                          "verifiable": verifiable, "verifiable_twin": twins, "description": workload.description})
    if json_output:
        console.print_json({"systems": rows, "workloads": workloads})
        return
    for row in rows:
        state = "installed" if row["installed"] else "[red]not installed[/red]"
        console.out.print(f"{row['system']} --driver {row['driver']}: {state}")
    for w in workloads:
        checks = ", ".join(f"{d}: {'reads checked' if v else 'NOT verifiable' + (' (twin checks the winner)' if d in w['verifiable_twin'] else '')}"
                           for d, v in w["verifiable"].items())
        console.out.print(f"  workload {w['name']}: {w['description']} ({w['objective']}; {checks})", markup=False)


@app.command()
def knobs(system: str, json_output: JsonOption = False) -> None:
    """The knob catalog of SYSTEM, with each knob's safety class.

    Example: knobtune knobs rocksdb --json
    """
    catalog = load_catalog(system)
    if json_output:
        console.print_json({"system": catalog.system, "version": catalog.version, "knobs": [
            {"name": k.name, "group": k.group, "type": k.type.value, "default": k.default, "min": k.min,
             "max": k.max, "log": k.log, "choices": list(k.choices),
             "special": {str(v): label for v, label in k.special.items()}, "unit": k.unit,
             "restart": k.restart, "safety": k.safety.value, "safety_note": k.safety_note,
             "unsafe_values": None if k.unsafe_values is None else list(k.unsafe_values),
             "conditions": [{"knob": c.knob, "values": list(c.values)} for c in k.conditions],
             "names": dict(k.names), "description": k.description, "tunable": k.tunable, "drivers": list(k.drivers)}
            for k in catalog.knobs.values()],
            "relations": [str(r) for r in catalog.relations],
            "implications": [str(i) for i in catalog.implications]})
        return
    console.out.print(console.catalog_table(catalog))
    console.out.print("relations: " + "; ".join(map(str, catalog.relations)))
    console.out.print("implications: " + "; ".join(map(str, catalog.implications)))


@app.command()
def tune(
    system: str,
    workload: WorkloadOption,
    trials: Annotated[Optional[int], typer.Option(help="Total sampled trials of the study (the default not counted).")] = None,
    time: Annotated[Optional[str], typer.Option("--time", help="Wall-clock budget of this run, e.g. 90s, 20m.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name; running again with it resumes the study.")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    sampler: Annotated[str, typer.Option(help=f"One of {', '.join(SAMPLERS)}.")] = "tpe",
    seed: Annotated[int, typer.Option(help="Seed of the sampler and of the workload's keys.")] = 42,
    knobs: Annotated[Optional[str], typer.Option("--knobs", help="Comma-separated knobs to search (default: all safe ones).")] = None,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe", help="Also search knobs that trade durability or data.")] = False,
    allow_operational: AllowOperationalOption = False,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    records: RecordsOption = None,
    timeout_factor: TimeoutFactorOption = 3.0,
    reduction_factor: Annotated[int, typer.Option(help="Successive halving keeps 1/N of the trials at each rung.")] = 3,
    verify_top: Annotated[int, typer.Option(help="Candidates re-measured against the default at the end (0: none).")] = 3,
    repeats: Annotated[int, typer.Option(help="Interleaved runs per candidate when verifying.")] = 5,
    control_every: Annotated[int, typer.Option(help="Re-run the default after every N trials that reached full size, to track drift (0: never).")] = 10,
    unsettled: UnsettledOption = False,
    unscaled_rungs: UnscaledRungsOption = False,
    memory_limit: MemoryLimitOption = None,
    max_recovery_time: Annotated[Optional[str], typer.Option("--max-recovery-time", help="Full-size runs whose reopen after a crash takes longer are infeasible, e.g. 30s.")] = None,
    start_from: Annotated[Optional[str], typer.Option("--start-from", help="A previous study of the same system: a new study tries its winner and best configs first.")] = None,
    ranking: Annotated[Optional[str], typer.Option("--ranking", help="A study holding a knob ranking (`knobtune rank`): search only its --top-k knobs.")] = None,
    top_k: Annotated[Optional[int], typer.Option("--top-k", help="With --ranking: how many of its top knobs to search.")] = None,
    machine: MachineOption = None,
    allow_mixed_machines: MixedOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the search space and plan; run nothing.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Tune SYSTEM for a workload: the default first, then sampled configs up a fidelity ladder, then proof.

    Example: knobtune tune rocksdb --workload put-get-delete --time 20m --study pgd
    """
    if trials is None and time is None:
        raise UsageError("no budget given. Fix: add --trials N or --time 20m")
    _at_least("--trials", trials, 1, "e.g. --trials 50")
    _at_least("--records", records, 1, "e.g. --records 100000, or leave it out for the workload's own size")
    _at_least("--repeats", repeats, 0, "e.g. --repeats 5 (0: no verification)")
    _at_least("--verify-top", verify_top, 0, "e.g. --verify-top 3 (0: no verification)")
    _at_least("--control-every", control_every, 0, "e.g. --control-every 10 (0: never)")
    _at_least("--reduction-factor", reduction_factor, 2, "e.g. --reduction-factor 3 (halving keeps 1/N per rung)")
    _at_least("--timeout-factor", timeout_factor, 1.0, "e.g. --timeout-factor 3 (a run may take 3x the default's time)")
    if (ranking is None) != (top_k is None):
        raise UsageError("--ranking and --top-k go together. Fix: e.g. --ranking rank-pgd --top-k 5")
    if ranking is not None and knobs:
        raise UsageError("--knobs and --ranking both choose the knobs to search. Fix: give one of them")
    catalog = load_catalog(system)
    spec, driver = _workload_for(catalog, workload, records, driver)
    knob_list = _knob_list(knobs)
    store = open_store(directory, storage)
    ranked_by = None
    if ranking is not None:
        knob_list = ranked_knobs(store.load(ranking), top_k)  # type: ignore[arg-type]
        ranked_by = {"study": ranking, "top_k": top_k, "knobs": knob_list}
    space = build_space(catalog, knob_list, allow_unsafe, fmt=driver, allow_operational=allow_operational)
    goal = _objective(objective) or spec.objective
    settings = TuneSettings(
        study_name=study or f"{catalog.system}-{spec.name}", catalog=catalog, workload=spec, space=space,
        objective=goal, driver=driver, sampler=sampler, seed=seed, trials=trials,
        time_budget_s=_duration(time), timeout_factor=timeout_factor, reduction_factor=reduction_factor,
        verify_top=verify_top, verify_repeats=repeats, control_every=control_every, settle=not unsettled,
        scale_rungs=not unscaled_rungs, memory_limit_bytes=_bytes_option("--memory-limit", memory_limit),
        max_recovery_s=_duration(max_recovery_time, "--max-recovery-time"), ranking=ranked_by, machine=machine,
        allow_mixed_machines=allow_mixed_machines, start_from_baselines=True,
        start_configs=starting_configs(store.load(start_from), catalog.system) if start_from else ())
    if dry_run:
        console.out.print(f"study {settings.study_name} in {store.url}; {len(space.knobs)} knobs searched: "
                          + ", ".join(space.knobs))
        console.out.print("ladder: " + "; ".join(str(r) for r in spec.rungs))
        console.out.print("kept out (unsafe): " + (", ".join(f"{k} ({v})" for k, v in space.left_out.items()) or "none"))
        if space.driver_note():
            console.out.print(space.driver_note(), markup=False)
        return
    info = console.err if json_output else console.out  # keep stdout pure JSON under --json
    if space.left_out:
        info.print(left_out_line(space.left_out), markup=False)
    if space.driver_note():
        info.print(space.driver_note(), markup=False)
    info.print(f"study [bold]{settings.study_name}[/bold] in {store.url}; raw output in "
               f"{store.artifacts(settings.study_name)}")
    result = Tuner(settings, store, on_progress=None if json_output else console.progress_line).run()
    summary = summarize(result, catalog)
    if json_output:
        console.print_json(summary.to_dict())
    else:
        console.summary_text(summary, catalog)
        console.out.print(f"export: knobtune export {settings.study_name} --format {summary.export_formats[0]}"
                          + (f" --dir {store.home}" if directory else ""))


@app.command()
def worker(
    study: Annotated[str, typer.Option(help="The study to join (started by `knobtune tune` with the same --storage).")],
    storage: StorageOption = None,
    directory: DirOption = None,
    machine: MachineOption = None,
    allow_mixed_machines: MixedOption = False,
) -> None:
    """Join a running study and run its trials until its budget is spent (any number of workers, any machines).

    The study's process verifies the result; see docs/workers.md.
    Example: knobtune worker --study pgd --storage postgresql+psycopg://knobtune@db-host/studies
    """
    store = open_store(directory, storage)
    settings = join_settings(store, study, machine, allow_mixed_machines)
    console.out.print(f"joined study [bold]{study}[/bold] in {store.url} ({settings.catalog.system}, "
                      f"{settings.workload.name}, {len(settings.space.knobs)} knobs); raw output in "
                      f"{store.artifacts(study)}")
    tuner = Tuner(settings, store, on_progress=console.progress_line)
    tuner.run()
    console.out.print(f"worker done: {tuner.trials_run} trial(s) run here; see `knobtune show {study}`")


@app.command()
def rank(
    system: str,
    workload: WorkloadOption,
    samples: Annotated[int, typer.Option(help="Latin-hypercube configs to run (a resumed study adds up to this total).")] = 100,
    rung: Annotated[int, typer.Option(help="The ladder rung every sample runs at (0: the smallest, the cheapest).")] = 0,
    time: Annotated[Optional[str], typer.Option("--time", help="Wall-clock budget of this run, e.g. 30m; rank what finished.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name; running again with it resumes the samples.")] = None,
    from_study: Annotated[Optional[str], typer.Option("--from-study", help="Rank an existing study's trials at --rung instead (no new runs).")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    seed: Annotated[int, typer.Option(help="Seed of the design, the workload's keys and the models.")] = 42,
    knobs: Annotated[Optional[str], typer.Option("--knobs", help="Comma-separated knobs to rank (default: all safe ones).")] = None,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe", help="Also sample knobs that trade durability or data.")] = False,
    allow_operational: AllowOperationalOption = False,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    records: RecordsOption = None,
    timeout_factor: TimeoutFactorOption = 3.0,
    unsettled: UnsettledOption = False,
    unscaled_rungs: UnscaledRungsOption = False,
    memory_limit: MemoryLimitOption = None,
    json_output: JsonOption = False,
) -> None:
    """Which knobs matter: run Latin-hypercube samples at one cheap rung, then rank the knobs by several methods.

    Example: knobtune rank rocksdb --workload put-get-delete --samples 200 --study rank-pgd
    """
    _at_least("--samples", samples, 8, "e.g. --samples 200 (a ranking needs at least 8 measured configs)")
    _at_least("--rung", rung, 0, "e.g. --rung 0 (the smallest)")
    _at_least("--timeout-factor", timeout_factor, 1.0, "e.g. --timeout-factor 3")
    catalog = load_catalog(system)
    store = open_store(directory, storage)
    info = console.err if json_output else console.out
    if from_study is not None:
        loaded = store.load(from_study)
    else:
        spec, driver = _workload_for(catalog, workload, records, driver)
        if rung >= len(spec.rungs):
            raise UsageError(f"--rung {rung}: workload '{spec.name}' has rungs 0-{len(spec.rungs) - 1}. "
                             "Fix: choose one of them")
        settings = TuneSettings(
            study_name=study or f"rank-{catalog.system}-{spec.name}", catalog=catalog, workload=spec,
            space=build_space(catalog, _knob_list(knobs), allow_unsafe, fmt=driver, allow_operational=allow_operational),
            objective=_objective(objective) or spec.objective, driver=driver, sampler="lhs", seed=seed,
            trials=samples, time_budget_s=_duration(time), timeout_factor=timeout_factor, verify_top=0,
            settle=not unsettled, scale_rungs=not unscaled_rungs,
            memory_limit_bytes=_bytes_option("--memory-limit", memory_limit), only_rung=rung)
        if settings.space.driver_note():
            info.print(settings.space.driver_note(), markup=False)
        info.print(f"ranking study [bold]{settings.study_name}[/bold] in {store.url}: {samples} Latin-hypercube samples "
                   f"of {len(settings.space.knobs)} knobs at {spec.rungs[rung]}")
        loaded = Tuner(settings, store, on_progress=None if json_output else console.progress_line).run()
    result = rank_study(loaded, catalog, rung, seed=seed)
    if json_output:
        console.print_json({"study": loaded.study_name, "rung": rung, **result.to_dict()})
    else:
        workload_name = (loaded.user_attrs.get("workload") or {}).get("name", workload)
        console.ranking_text(result, loaded.study_name, catalog.system, workload_name)


@app.command()
def show(study: str, storage: StorageOption = None, directory: DirOption = None, json_output: JsonOption = False) -> None:
    """Progress and result of a study: counts, best against the default, the verdict.

    Example: knobtune show rocksdb-put-get-delete --json
    """
    store = open_store(directory, storage)
    loaded = store.load(study)
    summary = summarize(loaded)
    if json_output:
        console.print_json(summary.to_dict())
    else:
        console.summary_text(summary, load_catalog(summary.system))


@app.command()
def export(
    study: str,
    format: Annotated[str, typer.Option("--format", help="The system's own format or a driver's (`show` lists a study's formats); json always.")] = "json",
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write to this file instead of stdout.")] = None,
    trial: Annotated[Optional[int], typer.Option(help="Export this trial's config instead of the result.")] = None,
    minimal: Annotated[bool, typer.Option("--minimal", help="Export the smallest set of the result's changes that keeps 95% of its gain (`knobtune explain` first).")] = False,
    storage: StorageOption = None,
    directory: DirOption = None,
) -> None:
    """A study's result in the system's own format.

    Example: knobtune export rocksdb-put-get-delete --format rocksdb-options -o OPTIONS.ini
    """
    store = open_store(directory, storage)
    loaded = store.load(study)
    summary = summarize(loaded)
    catalog = load_catalog(summary.system)
    config = None
    if minimal and trial is not None:
        raise UsageError("--minimal and --trial both choose the config. Fix: give one of them")
    if minimal:
        explained = loaded.user_attrs.get(EXPLANATION) or {}
        if explained.get("minimal") is None:
            raise UsageError(f"study '{study}' has no minimal config"
                             + (f" ({explained['minimal_note']})" if explained.get("minimal_note") else "")
                             + f". Fix: run `knobtune explain {study}` first")
        config = dict(explained["minimal"])
        console.err.print(f"minimal config: {explained['minimal_note']}", markup=False)
    elif trial is not None:
        if not 0 <= trial < len(loaded.trials):
            raise UsageError(f"study '{study}' has no trial {trial}. Fix: see `knobtune show {study}`")
        config = dict(loaded.trials[trial].user_attrs.get("config", {}))
    elif summary.result_trial is None:
        console.err.print(f"note: {summary.verdict}; exporting the default config")
    text = export_config(summary, catalog, format, config)
    if output:
        output.write_text(text)
        console.err.print(f"wrote {output}")
    else:
        sys.stdout.write(text)


@app.command("explain")
def explain_command(
    study: str,
    repeats: Annotated[int, typer.Option(help="Interleaved full-size runs of each step of the path.")] = 3,
    select_rung: Annotated[int, typer.Option(help="Rung of the single runs that choose the greedy order (0: the cheapest).")] = 0,
    keep: Annotated[float, typer.Option(help="The minimal config keeps at least this share of the winner's gain.")] = 0.95,
    trial: Annotated[Optional[int], typer.Option(help="Explain this trial's config instead of the verified result.")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Which of a winner's changes earned the gain: the ablation path from the default, each step measured.

    Example: knobtune explain pgd --repeats 3 && knobtune export pgd --minimal --format rocksdb-options
    """
    _at_least("--repeats", repeats, 2, "e.g. --repeats 3 (intervals need repeats)")
    if not 0 < keep <= 1:
        raise UsageError(f"--keep {keep:g} is not a share. Fix: e.g. --keep 0.95")
    store = open_store(directory, storage)
    loaded = store.load(study)
    summary = summarize(loaded)
    catalog = load_catalog(summary.system)
    if trial is not None:
        if not 0 <= trial < len(loaded.trials):
            raise UsageError(f"study '{study}' has no trial {trial}. Fix: see `knobtune show {study}`")
        winner = dict(loaded.trials[trial].user_attrs.get("config", {}))
    else:
        winner = summary.result_config
    if not winner:
        raise UsageError(f"study '{study}' has no verified result to explain ({summary.verdict}). "
                         "Fix: name a trial with --trial N")
    spec = study_workload(loaded)
    _at_least("--select-rung", select_rung, 0, "e.g. --select-rung 0")
    if select_rung >= len(spec.rungs):
        raise UsageError(f"--select-rung {select_rung}: the workload has rungs 0-{len(spec.rungs) - 1}. Fix: choose one")
    info = console.err if json_output else console.out
    with make_target(catalog, spec, store.worker_scratch(), summary.experiment.get("driver"), settle=summary.settled,
                     memory_limit_bytes=summary.limits.get("memory_limit_bytes")) as target:
        result = explain(loaded, target, winner, objective=summary.objective,
                         select_rung=spec.rungs[select_rung], full=spec.full, repeats=repeats, keep=keep,
                         seed=int(summary.experiment.get("seed") or 42), log_dir=store.artifacts(study) / "explain",
                         note=lambda message: info.print(message, markup=False))
    if json_output:
        console.print_json(result)
    else:
        console.explanation_text(result, summary.objective, study)


@app.command()
def compare(
    system: str,
    workload: WorkloadOption,
    config: Annotated[list[str], typer.Option("--config", help="'default', a JSON file, or study:NAME (its result). Repeat; the first is the baseline.")],
    repeats: Annotated[int, typer.Option(help="Interleaved runs per config.")] = 5,
    records: RecordsOption = None,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    seed: Annotated[int, typer.Option(help="Seed of the workload's keys.")] = 42,
    timeout_factor: TimeoutFactorOption = 3.0,
    unsettled: UnsettledOption = False,
    memory_limit: MemoryLimitOption = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Measure configs side by side, interleaved, with medians and 95% intervals against the first.

    Example: knobtune compare rocksdb --workload put-get-delete --config default --config best.json --repeats 5
    """
    if len(config) < 2:
        raise UsageError("compare needs at least two --config. Fix: e.g. --config default --config best.json")
    _at_least("--repeats", repeats, 1, "e.g. --repeats 5")
    _at_least("--records", records, 1, "e.g. --records 100000, or leave it out for the workload's own size")
    _at_least("--timeout-factor", timeout_factor, 1.0, "e.g. --timeout-factor 3 (a run may take 3x the first config's)")
    catalog = load_catalog(system)
    spec = load_workload(workload)
    spec = spec.scaled(records) if records else spec
    goal = _objective(objective) or spec.objective
    store = open_store(directory, storage)
    candidates = [_candidate(label, catalog, store) for label in config]
    with make_target(catalog, spec, store.worker_scratch(), driver, settle=not unsettled,
                     memory_limit_bytes=_bytes_option("--memory-limit", memory_limit)) as target:
        comparison = run_interleaved(
            target, candidates, spec.full, repeats=repeats, objective=goal, seed=seed, timeout_factor=timeout_factor,
            log_dir=store.home / "compare", on_run=None if json_output else _print_run(goal))
    unsafe = {candidate.label: {k: v.value for k, v in catalog.unsafe_in(full).items()} for candidate, full in candidates}
    if json_output:
        data = comparison.to_dict()
        for entry in data["candidates"]:
            entry["unsafe_knobs"] = unsafe[entry["label"]]
        console.print_json(data)
        return
    for runs in comparison.runs:
        label = runs.candidate.label
        if unsafe[label]:
            console.out.print(f"[bold red]{label} holds unsafe values:[/bold red] "
                              + ", ".join(f"{k} ({v})" for k, v in unsafe[label].items()))
        if runs.failure:
            console.out.print(f"{label}: [red]failed[/red]: {runs.failure}")
            continue
        versus = comparison.speedups.get(label)
        console.out.print(f"{label}: median {goal.show(runs.median)} over {len(runs.values)} runs"
                          + (f"; {versus.describe()} vs {comparison.baseline.candidate.label}" if versus else ""))
        console.out.print("    " + describe_costs(runs.costs()) + " (medians)", markup=False)
        for phase, percentiles in runs.latency_us().items():
            console.out.print(f"    {phase} latency (µs, median of runs): "
                              + ", ".join(f"{k} {v:,.1f}" for k, v in percentiles.items()))
    console.out.print(f"noise of {comparison.baseline.candidate.label}: {comparison.noise * 100:.1f}%; "
                      + ("settled runs (each includes the work it leaves behind: restart as after a crash, flush or checkpoint, compaction)" if not unsettled
                         else "UNSETTLED runs: raw window, the work a run leaves behind is not counted"))


@app.command("sweep")
def sweep_command(
    system: str,
    workload: WorkloadOption,
    knob: Annotated[list[str], typer.Option("--knob", help="The knob to sweep; a second --knob sweeps a 2-D grid.")],
    around: Annotated[Optional[str], typer.Option("--around", help="Hold the other knobs at this study's result (its verified winner) instead of the defaults.")] = None,
    points: Annotated[Optional[int], typer.Option(help="Grid steps per numeric knob (default 7; 5 x 5 for two knobs); the default, the study's value and special values are added.")] = None,
    repeats: Annotated[int, typer.Option(help="Interleaved runs per point.")] = 3,
    records: RecordsOption = None,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    seed: Annotated[int, typer.Option(help="Seed of the run order and of the workload's keys.")] = 42,
    timeout_factor: TimeoutFactorOption = 3.0,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe", help="Also sweep knobs and values that trade durability or data.")] = False,
    unsettled: UnsettledOption = False,
    memory_limit: MemoryLimitOption = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="The HTML file to write, its JSON beside it (default: in the studies folder).")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Measure the objective over a grid of one knob (or two), each point repeated and interleaved; draw it.

    Example: knobtune sweep leveldb --workload fillrandom --knob write_buffer_size --around wbs --repeats 3
    """
    _at_least("--points", points, 2, "e.g. --points 7 (a grid needs two steps)")
    _at_least("--repeats", repeats, 1, "e.g. --repeats 3")
    _at_least("--records", records, 1, "e.g. --records 100000, or leave it out for the workload's own size")
    _at_least("--timeout-factor", timeout_factor, 1.0, "e.g. --timeout-factor 3")
    catalog = load_catalog(system)
    store = open_store(directory, storage)
    held, held_from, goal = {}, None, _objective(objective)
    if around is not None:
        held, held_from, records, driver, goal = _sweep_around(store, around, catalog, workload, records, driver, goal)
    spec, driver = _workload_for(catalog, workload, records, driver)
    target = make_target(catalog, spec, store.worker_scratch(), driver, settle=not unsettled,
                         memory_limit_bytes=_bytes_option("--memory-limit", memory_limit))
    plan = plan_sweep(catalog, knob, points=points, held=held, around=held_from, allow_unsafe=allow_unsafe,
                      impossible=target.impossible_values(), driver=driver)
    folder = (store.artifacts(around) / f"sweep-{'-'.join(knob)}" if around
              else store.artifacts(f"sweep-{catalog.system}-{spec.name}-{'-'.join(knob)}"))
    info = console.err if json_output else console.out
    with target:
        result = run_sweep(target, plan, spec.full, repeats=repeats, objective=goal or spec.objective, seed=seed,
                           log_dir=folder / "runs", timeout_factor=timeout_factor,
                           note=lambda message: info.print(message, markup=False))
    data = result.to_dict() | {"logs": str(folder / "runs")}
    html_path, json_path = write_sweep(data, out or folder / "sweep.html")
    if json_output:
        console.print_json(data)
    else:
        for line in point_lines(data) + [data["verdict"]]:
            console.out.print(line, markup=False)
    info.print(f"wrote {html_path} and {json_path}", markup=False)


def _sweep_around(store, study: str, catalog, workload: str, records: int | None, driver: str | None,  # noqa: ANN001
                  goal: Objective | None) -> tuple:
    """--around: the study's result to hold, what to say about it, and its size, driver and objective as defaults.

    Raises:
        UsageError: the study tuned another system or workload, or has no result.
    """
    loaded = store.load(study)
    summary = summarize(loaded)
    if summary.system != catalog.system:
        raise UsageError(f"study '{study}' tuned {summary.system}, not {catalog.system}. "
                         f"Fix: sweep {summary.system}, or --around a {catalog.system} study")
    studied = study_workload(loaded)
    if load_workload(workload).name != studied.name:
        raise UsageError(f"study '{study}' tuned workload '{studied.name}', not '{workload}'. "
                         f"Fix: sweep with --workload "
                         f"{studied.name if studied.name in available_workloads() else studied.source}")
    if not summary.result_config:
        raise UsageError(f"study '{study}' has no result to sweep around ({summary.verdict}). "
                         "Fix: leave out --around to sweep around the defaults")
    held_from = {"study": study, "trial": summary.result_trial, "verified": summary.verified,
                 "verdict": summary.verdict}
    return (summary.result_config, held_from, records or studied.records,
            driver or summary.experiment.get("driver"), goal or summary.objective)


@app.command()
def baseline(
    system: str,
    profile: Annotated[Optional[str], typer.Option(help="PostgreSQL (PGTune): the database type, web, oltp, dw, desktop or mixed.")] = None,
    disk: Annotated[Optional[str], typer.Option(help="ssd, hdd or san (default: hdd when a disk here says it spins, else ssd).")] = None,
    connections: Annotated[Optional[int], typer.Option(help="Client connections expected (default: the profile's max_connections).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Another known config of the system, e.g. db-bench-universal (RocksDB: the configs published for db_bench).")] = None,
    json_output: JsonOption = False,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write it as JSON, for `compare --config FILE`.")] = None,
) -> None:
    """The heuristic config users start from (PGTune for PostgreSQL, the tuning guide's for RocksDB), to compare against.

    Example: knobtune baseline postgresql --profile oltp -o pgtune.json
    """
    result = heuristic_config(system, Machine.from_host(disk, connections), profile, name)
    told = [disk_detection()] if disk is None and result.name == "pgtune" else []  # a fixed config ignores the disk
    if output:
        try:
            output.write_text(result.to_json())
        except OSError as exc:
            raise UsageError(f"cannot write {output} ({exc.strerror}). Fix: choose a writable path for -o") from None
        told.append(f"wrote {output}; measure it: knobtune compare {system} --workload WORKLOAD "
                    f"--config default --config {output}")
    for line in told:
        console.err.print(line, markup=False)
    if json_output:
        console.print_json(result.to_dict())
        return
    for line in result.describe():
        console.out.print(line, markup=False)


@app.command()
def report(
    study: str,
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write (its JSON goes beside it).")] = Path("report.html"),
    storage: StorageOption = None,
    directory: DirOption = None,
) -> None:
    """One self-contained HTML report of a study (opens offline), and the same data as JSON.

    Example: knobtune report rocksdb-put-get-delete -o report.html
    """
    html_path, json_path = write_report(open_store(directory, storage).load(study), output)
    console.err.print(f"wrote {html_path} and {json_path}")


def _workload_for(catalog, name: str, records: int | None, driver: str | None):  # noqa: ANN001, ANN202
    """The workload (at --records) and the driver that runs it for ``catalog``'s system.

    Raises:
        UsageError: the workload is for another system, or the driver cannot run it.
    """
    spec = load_workload(name)
    if records is not None:
        spec = spec.scaled(records)
    if spec.systems and catalog.system not in spec.systems:
        raise UsageError(f"workload '{spec.name}' is for {', '.join(spec.systems)}, not {catalog.system}. "
                         "Fix: choose a workload listed by `knobtune systems`")
    driver = resolve_driver(catalog.system, driver)
    workload_section(catalog.system, driver, spec)  # the workload must say how this driver runs it
    return spec, driver


def _knob_list(knobs: str | None) -> list[str] | None:
    """--knobs as a list of names (None: not given)."""
    return [k.strip() for k in knobs.split(",") if k.strip()] if knobs else None


def _print_run(goal: Objective):  # noqa: ANN202 - a small callback factory
    def on_run(repeat: int, runs, value: float | None) -> None:  # noqa: ANN001
        shown = goal.show(value) if value is not None else f"failed: {runs.failure}"
        console.out.print(f"round {repeat + 1} {runs.candidate.label}: {shown}")
    return on_run


def _candidate(label: str, catalog, store):  # noqa: ANN001, ANN202
    if label == "default":
        return Candidate("default", {}), catalog.defaults()
    if label.startswith("study:"):
        summary = summarize(store.load(label.removeprefix("study:")), catalog)
        return Candidate(label, summary.result_config), catalog.config(summary.result_config)
    changed = load_config_file(Path(label))
    return Candidate(label, changed), catalog.config(changed)


def _at_least(option: str, value: float | None, least: float, fix: str) -> None:
    if value is not None and value < least:
        raise UsageError(f"{option} {value:g} is below {least:g}. Fix: {fix}")


def _objective(name: str | None) -> Objective | None:
    if name is None:
        return None
    try:
        return Objective(name)
    except ValueError:
        raise UsageError(f"--objective '{name}' is not an objective. "
                         f"Fix: use one of {', '.join(o.value for o in Objective)}") from None


def _duration(text: str | None, option: str = "--time") -> float | None:
    return _positive(option, text, parse_duration_s, "duration", "30s or 10m")


def _bytes_option(option: str, text: str | None) -> int | None:
    return _positive(option, text, parse_bytes, "size", "2GiB")


def _positive(option: str, text: str | None, parse: Callable[[str], Any], what: str, example: str) -> Any:
    """``text`` parsed by ``parse``; None when not given.

    Raises:
        UsageError: it does not parse, or is not above zero.
    """
    if text is None:
        return None
    try:
        value = parse(text)
    except ValueError as exc:
        raise UsageError(f"{option} {exc}") from None
    if value <= 0:
        raise UsageError(f"{option} {text!r} is not a positive {what}. Fix: write e.g. {example}")
    return value


def main() -> None:
    """Entry point: a KnobtuneError becomes one line on stderr and exit status 2; Ctrl-C exits 130."""
    try:
        code = app(standalone_mode=False)  # typer returns 130 for Ctrl-C, and the code of an explicit Exit
    except KnobtuneError as exc:
        console.err.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except typer.Abort:
        code = 130
    except typer.TyperException as exc:  # usage errors (unknown option, missing argument): typer shows them
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    if code == 130:
        console.err.print("interrupted: finished trials are kept; run the same command to resume", markup=False)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
