"""Commands that run a study: ``tune``, ``worker``, ``rank``."""

from __future__ import annotations

import shlex
from typing import Annotated, Optional

import typer

from knobtune import console
from knobtune.errors import UsageError
from knobtune.knobs import load_catalog
from knobtune.report import export_beside, summarize
from knobtune.storage import open_store
from knobtune.tuning import ExperimentDoc, Tuner
from knobtune.tuning.search import left_out_line, rank_study
from knobtune.tuning.document import MAX_TRIALS, join_experiment, of_system, plan_text, resolve
from knobtune.tuning.loop import refuse_if_running
from knobtune.cli.document import experiment_document
from knobtune.cli.options import (
    SystemArgument,
    AllowOperationalOption, AllowUnsafeOption, DirOption, DocumentSystemArgument, DriverOption, ExperimentOption,
    JsonOption, KnobsOption, MachineOption, MemoryLimitOption, MixedOption, ObjectiveOption, RecordsOption, SeedOption,
    StorageOption, StudyOption, TimeOption, TimeoutFactorOption, WorkloadOption, at_least, at_most, field_option,
    preflight, reclaim,
)
from knobtune.names import study_name


W, S, M, P, L, K = "Workload", "Search", "Measurement", "Proof", "Limits", "Workers"  # tune's help sections


def tune(
    ctx: typer.Context,
    system: DocumentSystemArgument = None,
    workload: WorkloadOption = None,
    trials: Annotated[Optional[int], field_option("--trials")] = None,
    time: TimeOption = None,
    study: StudyOption = None,
    knobs: KnobsOption = None,
    experiment: ExperimentOption = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the experiment as it will run (TOML that "
                                                            "--experiment takes back) and the search; run "
                                                            "nothing.")] = False,
    json_output: JsonOption = False,
    # the options below set the document's fields (their help is the schema's), each in its section of --help
    records: Annotated[Optional[int], field_option("--records", W)] = None,
    driver: Annotated[Optional[str], field_option("--driver", W)] = None,
    objective: Annotated[Optional[str], field_option("--objective", W)] = None,
    sampler: Annotated[Optional[str], field_option("--sampler", S)] = None,
    seed: Annotated[Optional[int], field_option("--seed", S)] = None,
    allow_unsafe: Annotated[bool, field_option("--allow-unsafe", S)] = False,
    allow_operational: Annotated[bool, field_option("--allow-operational", S)] = False,
    ranking: Annotated[Optional[str], field_option("--ranking", S)] = None,
    top_k: Annotated[Optional[int], field_option("--top-k", S)] = None,
    start_from: Annotated[Optional[str], field_option("--start-from", S)] = None,
    reduction_factor: Annotated[Optional[int], field_option("--reduction-factor", S)] = None,
    timeout_factor: Annotated[Optional[float], field_option("--timeout-factor", M)] = None,
    control_every: Annotated[Optional[int], field_option("--control-every", M)] = None,
    verify_top: Annotated[Optional[int], field_option("--verify-top", P)] = None,
    repeats: Annotated[Optional[int], field_option("--repeats", P)] = None,
    max_rounds: Annotated[Optional[int], field_option("--max-rounds", P)] = None,
    memory_limit: Annotated[Optional[str], field_option("--memory-limit", L)] = None,
    production_data: Annotated[Optional[str], field_option("--production-data", L)] = None,
    production_memory: Annotated[Optional[str], field_option("--production-memory", L)] = None,
    max_recovery_time: Annotated[Optional[str], field_option("--max-recovery-time", L)] = None,
    machine: Annotated[Optional[str], field_option("--machine", K)] = None,
    allow_mixed_machines: Annotated[bool, field_option("--allow-mixed-machines", K)] = False,
    no_earlier_studies: Annotated[bool, field_option("--no-earlier-studies", S)] = False,
    # research switches, for bench arms: [research] in the document (docs/experiment.md), not in --help
    no_rules: Annotated[bool, field_option("--no-rules", hidden=True)] = False,
    unsettled: Annotated[bool, field_option("--unsettled", hidden=True)] = False,
    unscaled_rungs: Annotated[bool, field_option("--unscaled-rungs", hidden=True)] = False,
    no_warm_up: Annotated[bool, field_option("--no-warm-up", hidden=True)] = False,
) -> None:
    """Tune SYSTEM for a workload: the default first, then sampled configs up a fidelity ladder, then proof.

    Example: knobtune tune rocksdb --workload put-get-delete --time 20m --study pgd

    The whole experiment as a file (docs/experiment.md): knobtune tune --experiment pgd.toml --time 5m
    """
    doc = experiment_document(ctx, experiment, system)  # the options above that name a field reach it from ctx
    store = open_store(directory, storage)
    settings = resolve(doc, store)
    store.check_url()  # a storage URL that cannot be opened says so now; nothing is made before every check
    if (missing := doc.budget_problem()) is not None:  # what was named is checked first, then what is missing
        raise UsageError(missing)
    catalog, spec, space = settings.catalog, settings.workload, settings.space
    if (existing := store.find(settings.study_name)) is not None:  # a resume: the study must be this experiment's
        settings.check_matches(existing.user_attrs)  # before anything is said or run (nothing is made here)
    preflight(catalog, spec, settings.driver, store, settle=settings.research.settle,
              memory_limit_bytes=settings.limits.memory_limit_bytes)
    if dry_run:
        console.out.print(plan_text(settings, store), markup=False, end="")
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
        first = summary.heading.export_formats[0]
        beside = export_beside(summary, catalog, first)
        console.out.print(f"export: knobtune export {settings.study_name} --format {first}{where}"
                          + (f" -o FILE ({'; '.join(b.note for b in beside)})" if beside else ""), markup=False)
        if summary.verified and len(summary.result_config) > 3:
            console.out.print(f"which of its {len(summary.result_config)} changes carry the gain: knobtune explain "
                              f"{settings.study_name}{where}, then export --minimal", markup=False)


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
    ctx: typer.Context,
    system: SystemArgument,
    workload: WorkloadOption,
    samples: Annotated[int, typer.Option(
        help="Latin-hypercube configs to run (a resumed study adds up to this total).")] = 100,
    rung: Annotated[int,
                    typer.Option(help="The ladder rung every sample runs at (0: the smallest, the cheapest).")] = 0,
    time: TimeOption = None,
    study: StudyOption = None,
    from_study: Annotated[Optional[str], typer.Option("--from-study", help="Rank an existing study's trials at --rung "
                                                                           "instead (no new runs).")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    seed: SeedOption = None,
    knobs: KnobsOption = None,
    allow_unsafe: AllowUnsafeOption = False,
    allow_operational: AllowOperationalOption = False,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    records: RecordsOption = None,
    timeout_factor: TimeoutFactorOption = None,
    memory_limit: MemoryLimitOption = None,
    json_output: JsonOption = False,
) -> None:
    """Which knobs matter: run Latin-hypercube samples at one cheap rung, then rank the knobs by several methods;
    with --time, rank what finished.

    Example: knobtune rank rocksdb --workload put-get-delete --samples 200 --study rank-pgd
    """
    at_least("--samples", samples, 8, "e.g. --samples 200 (a ranking needs at least 8 measured configs)")
    at_most("--samples", samples, MAX_TRIALS, "e.g. --samples 200 (a month's budget runs no more)")
    at_least("--rung", rung, 0, "e.g. --rung 0 (the smallest)")
    catalog = load_catalog(system)
    store = open_store(directory, storage)
    info = console.err if json_output else console.out
    if from_study is not None:
        loaded = of_system(store.load(from_study), catalog.system, "--from-study")
        reclaim(store, json_output)
    else:
        doc = experiment_document(ctx, None, system, fixed={
            "budget.trials": samples, "search.only_rung": rung, "search.sampler": "lhs", "proof.verify_top": 0,
            "research.rules": False, "research.try_known_configs": False})
        settings = resolve(doc, store, prefix="rank-")
        spec = settings.workload
        if rung >= len(spec.rungs):
            raise UsageError(f"--rung {rung}: workload '{spec.name}' has rungs 0-{len(spec.rungs) - 1}. "
                             "Fix: choose one of them")
        if (existing := store.find(settings.study_name)) is not None:  # a resume: the study must be a ranking
            settings.check_matches(existing.user_attrs)  # of this experiment, said before anything is run
        preflight(catalog, spec, settings.driver, store, settle=settings.research.settle,
                  memory_limit_bytes=settings.limits.memory_limit_bytes)
        reclaim(store, json_output)
        if settings.space.driver_note():
            info.print(settings.space.driver_note(), markup=False)
        if spec.raised_note():
            info.print(spec.raised_note(), markup=False)
        info.print(f"ranking study [bold]{settings.study_name}[/bold] in {store.shown_url}: {samples} Latin-hypercube "
                   f"samples of {len(settings.space.knobs)} knobs at {spec.rungs[rung]}")
        loaded = Tuner(settings, store, on_progress=None if json_output else console.progress_line).run()
    result = rank_study(loaded, catalog, rung, seed=ExperimentDoc().search.seed if seed is None else seed)
    if json_output:
        console.print_json({"study": loaded.study_name, "rung": rung, **result.to_dict()})
    else:
        workload_name = str((loaded.user_attrs.get("workload") or {}).get("name") or workload or "")
        console.ranking_text(result, loaded.study_name, catalog.system, workload_name)

