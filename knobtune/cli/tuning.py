"""Commands that run a study: ``tune``, ``worker``, ``rank``."""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Optional

import typer

from knobtune import console
from knobtune.errors import UsageError
from knobtune.knobs import load_catalog
from knobtune.report import export_beside, summarize
from knobtune.storage import StudyStore, open_store
from knobtune.tuning import Tuner, Experiment, build_space
from knobtune.tuning.finish import starting_configs
from knobtune.tuning.ranking import rank_study, ranked_knobs
from knobtune.tuning.samplers import SAMPLERS
from knobtune.tuning.space import kept_out_label, left_out_line
from knobtune.tuning.experiment import join_experiment
from knobtune.tuning.owner import refuse_if_running
from knobtune.cli.options import (
    production_ratio,
    SystemArgument,
    AllowOperationalOption, DirOption, DriverOption, JsonOption, MachineOption, MemoryLimitOption, MixedOption,
    ObjectiveOption, RecordsOption, StorageOption, TimeoutFactorOption, UnscaledRungsOption, UnsettledOption,
    WorkloadOption, at_least, check_records, check_seed, duration_option, knob_list, memory_limit_option,
    objective_option, preflight, reclaim, workload_for,
)
from knobtune.names import NAME_CHARS, name_problem, study_name


def tune(
    system: SystemArgument,
    workload: WorkloadOption,
    trials: Annotated[Optional[int],
                      typer.Option(help="Total sampled trials of the study (the default not counted).")] = None,
    time: Annotated[Optional[str], typer.Option("--time", help="Wall-clock budget of this run, e.g. 90s, 20m.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name; running again with it resumes the study.")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    sampler: Annotated[str, typer.Option(help=f"One of {', '.join(SAMPLERS)}.")] = "tpe",
    seed: Annotated[int, typer.Option(help="Seed of the sampler and of the workload's keys.")] = 42,
    knobs: Annotated[Optional[str],
                     typer.Option("--knobs", help="Comma-separated knobs to search (default: all safe ones).")] = None,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe",
                                               help="Also search knobs that trade durability or data.")] = False,
    allow_operational: AllowOperationalOption = False,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    records: RecordsOption = None,
    timeout_factor: TimeoutFactorOption = 3.0,
    reduction_factor: Annotated[int, typer.Option(help="Successive halving keeps 1/N of the trials at each rung.")] = 3,
    verify_top: Annotated[int,
                          typer.Option(help="Candidates re-measured against the default at the end (0: none).")] = 3,
    repeats: Annotated[int, typer.Option(help="Interleaved runs per candidate when verifying.")] = 5,
    control_every: Annotated[int, typer.Option(help="Re-run the default after every N trials that reached full size, "
                                                    "to track drift (0: never).")] = 10,
    unsettled: UnsettledOption = False,
    unscaled_rungs: UnscaledRungsOption = False,
    no_warm_up: Annotated[bool, typer.Option(
        "--no-warm-up", help="Count the default's first full-size run (by default it runs once more, before its "
                             "ladder, not counted: a first run on a fresh machine is often slow).")] = False,
    memory_limit: MemoryLimitOption = None,
    production_data: Annotated[Optional[str], typer.Option(
        "--production-data", help="The data size in production, e.g. 500GiB: with --production-memory, configs are "
                                  "held to production's memory-to-data ratio on the benchmark's data.")] = None,
    production_memory: Annotated[Optional[str], typer.Option(
        "--production-memory", help="The memory the system gets in production, e.g. 64GiB "
                                    "(with --production-data).")] = None,
    max_recovery_time: Annotated[Optional[str], typer.Option(
        "--max-recovery-time", help="Full-size runs whose reopen after a crash takes longer are infeasible, "
                                    "e.g. 30s.")] = None,
    start_from: Annotated[Optional[str], typer.Option(
        "--start-from", help="A previous study of the same system: a new study tries its winner and best configs "
                             "first.")] = None,
    no_rules: Annotated[bool, typer.Option("--no-rules", help="Search without the diagnosis: no starts from the "
                                                              "system's rules, no narrowed first search "
                                                              "(docs/diagnosis.md).")] = False,
    ranking: Annotated[Optional[str], typer.Option("--ranking", help="A study holding a knob ranking (`knobtune "
                                                                     "rank`): search only its --top-k knobs.")] = None,
    top_k: Annotated[Optional[int],
                     typer.Option("--top-k", help="With --ranking: how many of its top knobs to search.")] = None,
    machine: MachineOption = None,
    allow_mixed_machines: MixedOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the search space and plan; run nothing.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Tune SYSTEM for a workload: the default first, then sampled configs up a fidelity ladder, then proof.

    Example: knobtune tune rocksdb --workload put-get-delete --time 20m --study pgd
    """
    at_least("--trials", trials, 1, "e.g. --trials 50")
    check_records(records)
    check_seed(seed)
    at_least("--repeats", repeats, 2, "e.g. --repeats 5 (an interval needs two runs; --verify-top 0: no verification)")
    at_least("--verify-top", verify_top, 0, "e.g. --verify-top 3 (0: no verification)")
    at_least("--control-every", control_every, 0, "e.g. --control-every 10 (0: never)")
    at_least("--reduction-factor", reduction_factor, 2, "e.g. --reduction-factor 3 (halving keeps 1/N per rung)")
    at_least("--timeout-factor", timeout_factor, 1.0, "e.g. --timeout-factor 3 (a run may take 3x the default's time)")
    if (ranking is None) != (top_k is None):
        raise UsageError("--ranking and --top-k go together. Fix: e.g. --ranking rank-pgd --top-k 5")
    if ranking is not None and knobs:
        raise UsageError("--knobs and --ranking both choose the knobs to search. Fix: give one of them")
    if sampler not in SAMPLERS:
        raise UsageError(f"unknown sampler '{sampler}'. Fix: use one of {', '.join(SAMPLERS)}")
    catalog = load_catalog(system)
    spec, driver = workload_for(catalog, workload, records, driver)
    name = study_name(study) if study is not None else _default_name(f"{catalog.system}-{spec.name}")
    store = open_store(directory, storage)
    searched, ranked_by = _searched_knobs(store, knobs, ranking, top_k)
    space = build_space(catalog, searched, allow_unsafe, driver, allow_operational=allow_operational)
    goal = objective_option(objective) or spec.objective
    limit = memory_limit_option(memory_limit, catalog)
    settings = Experiment(
        study_name=name, catalog=catalog, workload=spec, space=space,
        objective=goal, driver=driver, sampler=sampler, seed=seed, trials=trials,
        time_budget_s=duration_option(time), timeout_factor=timeout_factor, reduction_factor=reduction_factor,
        verify_top=verify_top, verify_repeats=repeats, control_every=control_every, warm_up=not no_warm_up,
        settle=not unsettled,
        scale_rungs=not unscaled_rungs, memory_limit_bytes=limit,
        production=production_ratio(production_data, production_memory),
        max_recovery_s=duration_option(max_recovery_time, "--max-recovery-time"), ranking=ranked_by, machine=machine,
        allow_mixed_machines=allow_mixed_machines, try_known_configs=True, use_rules=not no_rules,
        start_configs=starting_configs(store.load(start_from), catalog.system) if start_from else ())
    store.storage()  # a storage URL that cannot be opened says so now, before anything is announced
    if trials is None and time is None:  # what was named is checked first, then what is missing
        raise UsageError("no budget given. Fix: add --trials N or --time 20m")
    preflight(catalog, spec, driver, store, settle=not unsettled, memory_limit_bytes=limit)
    if dry_run:
        _print_plan(settings, store)
        return
    refuse_if_running(store, settings.study_name)  # before anything is said or run
    reclaim(store, json_output)
    info = console.err if json_output else console.out  # keep stdout pure JSON under --json
    if space.left_out:
        info.print(left_out_line(space.left_out, catalog), markup=False)
    if space.driver_note():
        info.print(space.driver_note(), markup=False)
    if spec.raised_note():
        info.print(spec.raised_note(), markup=False)
    info.print(f"study [bold]{settings.study_name}[/bold] in {store.shown_url}; raw output in "
               f"{store.artifacts(settings.study_name)}")
    result = Tuner(settings, store, on_progress=None if json_output else console.progress_line).run()
    summary = summarize(result, catalog)
    if json_output:
        console.print_json(summary.to_dict())
    else:
        console.summary_text(summary, catalog)
        where = (f" --dir {shlex.quote(str(store.home))}" if directory else "") + \
            (f" --storage {shlex.quote(store.shown_url)}" if storage else "")  # pasted as it is, but for a password
        first = summary.export_formats[0]
        beside = export_beside(summary, catalog, first)
        console.out.print(f"export: knobtune export {settings.study_name} --format {first}{where}"
                          + (f" -o FILE ({'; '.join(b.note for b in beside)})" if beside else ""), markup=False)
        if summary.verified and len(summary.result_config) > 3:
            console.out.print(f"which of its {len(summary.result_config)} changes carry the gain: knobtune explain "
                              f"{settings.study_name}{where}, then export --minimal", markup=False)


def _default_name(name: str) -> str:
    """The study name made from a system and a workload, when --study is not given.

    Raises:
        UsageError: the system's or the workload's name makes no valid study name.
    """
    if (problem := name_problem(name)) is not None:
        raise UsageError(f"the study name made from the system and the workload, {name!r}, {problem}. Fix: name the "
                         f"study with --study ({NAME_CHARS})")
    return name


def _searched_knobs(store: StudyStore, knobs: str | None, ranking: str | None,
                    top_k: int | None) -> tuple[list[str] | None, dict[str, Any] | None]:
    """The knobs to search (--knobs, or the --top-k of a --ranking study; None: all safe ones) and, for a ranking,
    what to record about it."""
    if ranking is None or top_k is None:
        return knob_list(knobs), None
    searched = ranked_knobs(store.load(ranking), top_k)
    return searched, {"study": ranking, "top_k": top_k, "knobs": searched}


def _print_plan(settings: Experiment, store: StudyStore) -> None:
    """``tune --dry-run``: the study, the knobs searched and kept out, the ladder; nothing is run."""
    space = settings.space
    console.out.print(f"study {settings.study_name} in {store.shown_url}; {len(space.knobs)} knobs searched: "
                      + ", ".join(space.knobs))
    console.out.print("ladder: " + "; ".join(str(r) for r in settings.workload.rungs))
    console.out.print("kept out (unsafe): " + (", ".join(f"{kept_out_label(k, settings.catalog)} ({v})"
                                                         for k, v in space.left_out.items()) or "none"))
    if space.driver_note():
        console.out.print(space.driver_note(), markup=False)


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
    study_name(study)
    store = open_store(directory, storage)
    settings = join_experiment(store, study, machine, allow_mixed_machines)
    reclaim(store)
    console.out.print(f"joined study [bold]{study}[/bold] in {store.shown_url} ({settings.catalog.system}, "
                      f"{settings.workload.name}, {len(settings.space.knobs)} knobs); raw output in "
                      f"{store.artifacts(study)}")
    tuner = Tuner(settings, store, on_progress=console.progress_line)
    tuner.run()
    console.out.print(f"worker done: {tuner.trials_run} trial(s) run here; see `knobtune show {study}`")


def rank(
    system: SystemArgument,
    workload: WorkloadOption,
    samples: Annotated[int, typer.Option(
        help="Latin-hypercube configs to run (a resumed study adds up to this total).")] = 100,
    rung: Annotated[int,
                    typer.Option(help="The ladder rung every sample runs at (0: the smallest, the cheapest).")] = 0,
    time: Annotated[Optional[str],
                    typer.Option("--time", help="Wall-clock budget of this run, e.g. 30m; rank what finished.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name; running again with it resumes the samples.")] = None,
    from_study: Annotated[Optional[str], typer.Option("--from-study", help="Rank an existing study's trials at --rung "
                                                                           "instead (no new runs).")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    seed: Annotated[int, typer.Option(help="Seed of the design, the workload's keys and the models.")] = 42,
    knobs: Annotated[Optional[str],
                     typer.Option("--knobs", help="Comma-separated knobs to rank (default: all safe ones).")] = None,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe",
                                               help="Also sample knobs that trade durability or data.")] = False,
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
    at_least("--samples", samples, 8, "e.g. --samples 200 (a ranking needs at least 8 measured configs)")
    at_least("--rung", rung, 0, "e.g. --rung 0 (the smallest)")
    at_least("--timeout-factor", timeout_factor, 1.0, "e.g. --timeout-factor 3")
    check_records(records)
    check_seed(seed)
    catalog = load_catalog(system)
    store = open_store(directory, storage)
    info = console.err if json_output else console.out
    if from_study is not None:
        loaded = store.load(from_study)
        reclaim(store, json_output)
    else:
        spec, driver = workload_for(catalog, workload, records, driver)
        if rung >= len(spec.rungs):
            raise UsageError(f"--rung {rung}: workload '{spec.name}' has rungs 0-{len(spec.rungs) - 1}. "
                             "Fix: choose one of them")
        name = study_name(study) if study is not None else _default_name(f"rank-{catalog.system}-{spec.name}")
        limit = memory_limit_option(memory_limit, catalog)
        settings = Experiment(
            study_name=name, catalog=catalog, workload=spec,
            space=build_space(catalog, knob_list(knobs), allow_unsafe, driver, allow_operational=allow_operational),
            objective=objective_option(objective) or spec.objective, driver=driver, sampler="lhs", seed=seed,
            trials=samples, time_budget_s=duration_option(time), timeout_factor=timeout_factor, verify_top=0,
            settle=not unsettled, scale_rungs=not unscaled_rungs, memory_limit_bytes=limit, only_rung=rung)
        store.storage()
        preflight(catalog, spec, driver, store, settle=not unsettled, memory_limit_bytes=limit)
        reclaim(store, json_output)
        if settings.space.driver_note():
            info.print(settings.space.driver_note(), markup=False)
        if spec.raised_note():
            info.print(spec.raised_note(), markup=False)
        info.print(f"ranking study [bold]{settings.study_name}[/bold] in {store.shown_url}: {samples} Latin-hypercube "
                   "samples "
                   f"of {len(settings.space.knobs)} knobs at {spec.rungs[rung]}")
        loaded = Tuner(settings, store, on_progress=None if json_output else console.progress_line).run()
    result = rank_study(loaded, catalog, rung, seed=seed)
    if json_output:
        console.print_json({"study": loaded.study_name, "rung": rung, **result.to_dict()})
    else:
        workload_name = (loaded.user_attrs.get("workload") or {}).get("name", workload)
        console.ranking_text(result, loaded.study_name, catalog.system, workload_name)

