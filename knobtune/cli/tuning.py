"""Commands that run a study: ``tune``, ``worker``, ``rank``."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from knobtune import console
from knobtune.errors import UsageError
from knobtune.knobs import load_catalog
from knobtune.report import export_beside, summarize
from knobtune.storage import open_store
from knobtune.tuning import Tuner
from knobtune.tuning.search import SAMPLERS, left_out_line, rank_study
from knobtune.tuning.document import MAX_TRIALS, join_experiment, of_system, plan_text, resolve
from knobtune.tuning.loop import refuse_if_running
from knobtune.cli.document import experiment_document
from knobtune.cli.options import (
    SystemArgument,
    AllowOperationalOption, DirOption, DriverOption, JsonOption, MachineOption, MemoryLimitOption, MixedOption,
    ObjectiveOption, RecordsOption, StorageOption, WorkloadOption, at_least, at_most,
    preflight, reclaim,
)
from knobtune.names import study_name


W, S, M, P, L, K = "Workload", "Search", "Measurement", "Proof", "Limits", "Workers"  # tune's help sections


def tune(
    ctx: typer.Context,
    system: Annotated[Optional[str], typer.Argument(
        help="A system's name (see `knobtune systems`) or a system file (.toml, docs/system-file.md); may be left "
             "to --experiment.", show_default=False)] = None,
    workload: Annotated[Optional[str], typer.Option(
        help="Workload name (see `knobtune systems`) or a .toml file.")] = None,
    trials: Annotated[Optional[int],
                      typer.Option(help="Total sampled trials of the study (the default not counted).")] = None,
    time: Annotated[Optional[str], typer.Option("--time", help="Wall-clock budget of this run, e.g. 90s, 20m.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name; running again with it resumes the study.")] = None,
    knobs: Annotated[Optional[str],
                     typer.Option("--knobs", help="Comma-separated knobs to search (default: all safe ones).")] = None,
    experiment: Annotated[Optional[Path], typer.Option(
        "--experiment", help="The whole experiment as a TOML file (docs/experiment.md; `--dry-run` writes one); the "
                             "options given beside it override its fields.")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the experiment as it will run (TOML that "
                                                            "--experiment takes back) and the search; run "
                                                            "nothing.")] = False,
    json_output: JsonOption = False,
    records: Annotated[Optional[int], typer.Option(help="Override the workload's full size (records).",
                                                   rich_help_panel=W)] = None,
    driver: Annotated[Optional[str], typer.Option(help="Benchmark driver (default: the system's).",
                                                  rich_help_panel=W)] = None,
    objective: Annotated[Optional[str], typer.Option(help="elapsed_s, ops_per_s or p99_us (default: the "
                                                          "workload's).", rich_help_panel=W)] = None,
    sampler: Annotated[Optional[str], typer.Option(help=f"One of {', '.join(SAMPLERS)} (default: tpe).",
                                                   rich_help_panel=S)] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the sampler and of the workload's keys (default: 42).",
                                                rich_help_panel=S)] = None,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe", help="Also search knobs that trade durability or "
                                                                      "data.", rich_help_panel=S)] = False,
    allow_operational: Annotated[bool, typer.Option("--allow-operational", help="Also search operational values "
                                                    "(auto-compaction off): nothing is lost, but the store never "
                                                    "settles by itself.", rich_help_panel=S)] = False,
    ranking: Annotated[Optional[str], typer.Option("--ranking", help="A study holding a knob ranking (`knobtune "
                                                   "rank`): search only its --top-k knobs.", rich_help_panel=S)] = None,
    top_k: Annotated[Optional[int], typer.Option("--top-k", help="With --ranking: how many of its top knobs to "
                                                                 "search.", rich_help_panel=S)] = None,
    start_from: Annotated[Optional[str], typer.Option(
        "--start-from", help="A previous study of the same system: a new study tries its winner and best configs "
                             "first.", rich_help_panel=S)] = None,
    reduction_factor: Annotated[Optional[int], typer.Option(
        help="Successive halving keeps 1/N of the trials at each rung (default: 3).", rich_help_panel=S)] = None,
    timeout_factor: Annotated[Optional[float], typer.Option(
        help="Stop a run taking longer than this times the default's (default: 3).", rich_help_panel=M)] = None,
    control_every: Annotated[Optional[int], typer.Option(
        help="Re-run the default after every N trials that reached full size, to track drift (0: never; default: "
             "10).", rich_help_panel=M)] = None,
    verify_top: Annotated[Optional[int], typer.Option(
        help="Candidates re-measured against the default at the end (0: none; default: 3).", rich_help_panel=P)] = None,
    repeats: Annotated[Optional[int], typer.Option(help="Interleaved runs per candidate when verifying (default: 5).",
                                                   rich_help_panel=P)] = None,
    max_rounds: Annotated[Optional[int], typer.Option(
        "--max-rounds", help="While a candidate's interval straddles 1, add rounds up to this many, in the time budget "
                             "(default: 4 x --repeats).", rich_help_panel=P)] = None,
    memory_limit: Annotated[Optional[str], typer.Option(
        "--memory-limit", help="Configs planned or measured above this peak memory are infeasible, e.g. 2GiB.",
        rich_help_panel=L)] = None,
    production_data: Annotated[Optional[str], typer.Option(
        "--production-data", help="The data size in production, e.g. 500GiB: with --production-memory, configs are "
                                  "capped at production's memory-to-data ratio on the benchmark's data.",
        rich_help_panel=L)] = None,
    production_memory: Annotated[Optional[str], typer.Option(
        "--production-memory", help="The memory the system gets in production, e.g. 64GiB (with --production-data).",
        rich_help_panel=L)] = None,
    max_recovery_time: Annotated[Optional[str], typer.Option(
        "--max-recovery-time", help="Full-size runs whose reopen after a crash takes longer are infeasible, e.g. 30s.",
        rich_help_panel=L)] = None,
    machine: Annotated[Optional[str], typer.Option(
        "--machine", help="This machine's name in a study shared by workers (default: the host name).",
        rich_help_panel=K)] = None,
    allow_mixed_machines: Annotated[bool, typer.Option(
        "--allow-mixed-machines", help="Let a machine of another kind (CPU, memory, disk, OS, version) work on the "
                                       "study.", rich_help_panel=K)] = False,
    no_earlier_studies: Annotated[bool, typer.Option(
        "--no-earlier-studies", help="A new study does not try the best configs of earlier studies of a workload "
                                     "alike (same system, machine and build) first.", rich_help_panel=S)] = False,
    # research switches, for bench arms: [research] in the document (docs/experiment.md), not in --help
    no_rules: Annotated[bool, typer.Option("--no-rules", hidden=True)] = False,
    unsettled: Annotated[bool, typer.Option("--unsettled", hidden=True)] = False,
    unscaled_rungs: Annotated[bool, typer.Option("--unscaled-rungs", hidden=True)] = False,
    no_warm_up: Annotated[bool, typer.Option("--no-warm-up", hidden=True)] = False,
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
    time: Annotated[Optional[str],
                    typer.Option("--time", help="Wall-clock budget of this run, e.g. 30m; rank what finished.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name; running again with it resumes the samples.")] = None,
    from_study: Annotated[Optional[str], typer.Option("--from-study", help="Rank an existing study's trials at --rung "
                                                                           "instead (no new runs).")] = None,
    storage: StorageOption = None,
    directory: DirOption = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the design, the workload's keys and the models "
                                                     "(default: 42).")] = None,
    knobs: Annotated[Optional[str],
                     typer.Option("--knobs", help="Comma-separated knobs to rank (default: all safe ones).")] = None,
    allow_unsafe: Annotated[bool, typer.Option("--allow-unsafe",
                                               help="Also sample knobs that trade durability or data.")] = False,
    allow_operational: AllowOperationalOption = False,
    objective: ObjectiveOption = None,
    driver: DriverOption = None,
    records: RecordsOption = None,
    timeout_factor: Annotated[Optional[float], typer.Option(
        help="Stop a run taking longer than this times the default's (default: 3).")] = None,
    memory_limit: MemoryLimitOption = None,
    json_output: JsonOption = False,
) -> None:
    """Which knobs matter: run Latin-hypercube samples at one cheap rung, then rank the knobs by several methods.

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
    result = rank_study(loaded, catalog, rung, seed=42 if seed is None else seed)
    if json_output:
        console.print_json({"study": loaded.study_name, "rung": rung, **result.to_dict()})
    else:
        workload_name = (loaded.user_attrs.get("workload") or {}).get("name", workload)
        console.ranking_text(result, loaded.study_name, catalog.system, workload_name)

