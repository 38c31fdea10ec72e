"""A document resolved on this machine (``resolve``: its system, workload at its size, driver, knobs and limits
checked and filled in), and the plan ``tune --dry-run`` prints (``plan_text``).

``knobtune tune`` and ``rank`` resolve the document their options and ``--experiment`` file make; ``compare``,
``sweep`` and ``diagnose`` take its workload and measurement (``measuring``) and leave the search aside. A study's
own processes read the document it stored instead (``experiment.read_experiment``, ``join_experiment``).
"""

from __future__ import annotations

from dataclasses import dataclass

from knobtune.errors import UsageError
from knobtune.knobs import Catalog, load_catalog
from knobtune.names import NAME_CHARS, name_problem, study_name
from knobtune.schema import to_toml
from knobtune.storage import StudyStore
from knobtune.systems import driver_for, make_target, use_system, workload_section
from knobtune.tuning.document import sections
from knobtune.tuning.document.experiment import Experiment
from knobtune.tuning.document.kinds import of_system, tuning_study
from knobtune.tuning.document.narrow import narrowed
from knobtune.tuning.document.sections import ExperimentDoc
from knobtune.tuning.records import starting_configs
from knobtune.tuning.search import build_space, kept_out_label, ranked_knobs
from knobtune.workloads import Objective, Workload, load_workload
from knobtune.workloads.spec import MIN_RUNG_RECORDS


def resolve(doc: ExperimentDoc, store: StudyStore, prefix: str = "") -> Experiment:
    """``doc`` on this machine: its system, workload at its size, driver, knobs and limits checked and filled in
    (``prefix`` goes before the study name made when the document names none: ``rank-``).

    Raises:
        KnobtuneError: one line naming what is wrong (an unknown system, workload, knob, study) and the fix.
    """
    catalog = load_catalog(use_system(doc.system))
    spec, driver = workload_for(catalog, doc.workload.name, doc.workload.records, doc.workload.driver)
    if spec.capture is not None and doc.workload.objective not in (None, spec.objective.value):
        raise UsageError(f"--objective {doc.workload.objective}: a capture's objective goes with its pace "
                         f"({spec.source} says objective = '{spec.objective.value}'). Fix: drop --objective, or set "
                         "pace and objective together in capture.toml (docs/replay.md)")
    name = study_name(doc.study) if doc.study is not None else _default_name(f"{prefix}{catalog.system}-{spec.name}")
    s = doc.search
    searched, ranked_by = list(s.knobs) if s.knobs is not None else None, None
    if s.ranking is not None and s.top_k is not None:
        searched = ranked_knobs(of_system(store.load(s.ranking), catalog.system, "--ranking"), s.top_k)
        ranked_by = {"study": s.ranking, "top_k": s.top_k, "knobs": searched}
    space = build_space(catalog, searched, s.allow_unsafe, driver, allow_operational=s.allow_operational)
    limit = doc.limits.memory_limit_bytes
    if limit is not None and (over := catalog.memory.over_limit(catalog.defaults(), limit)):
        raise UsageError(f"--memory-limit is too low for the default config: {over}. Fix: raise --memory-limit "
                         "(limits.memory_limit_bytes)")
    starts = starting_configs(tuning_study(of_system(store.load(s.start_from), catalog.system, "--start-from"),
                                          "--start-from"), catalog.system) if s.start_from else ()
    resolved = sections.replace(doc, study=name, workload__records=spec.records, workload__driver=driver,
                                workload__objective=(doc.workload.objective or spec.objective.value))
    return Experiment(doc=resolved, catalog=catalog, workload=spec, space=space, ranked_by=ranked_by,
                      start_configs=starts)


@dataclass(frozen=True)
class Measuring:
    """A document as the commands that measure configs outside a study take it (``compare``, ``sweep``,
    ``diagnose``): its workload on this machine, at its size, with the driver that runs it and the objective; the
    seed, the timeout factor, the settle and the memory limit are the document's. Its search, budget and proof are
    a study's and stay aside."""

    doc: ExperimentDoc
    catalog: Catalog
    workload: Workload
    driver: str
    objective: Objective


def measuring(doc: ExperimentDoc, catalog: Catalog | None = None) -> Measuring:
    """``doc``'s workload on this machine (``catalog``: its system's, when the caller has loaded it).

    Raises:
        KnobtuneError: one line naming what is wrong (an unknown system or workload, a driver that cannot run it)
            and the fix.
    """
    catalog = catalog or load_catalog(use_system(doc.system))
    spec, driver = workload_for(catalog, doc.workload.name, doc.workload.records, doc.workload.driver)
    objective = Objective(doc.workload.objective) if doc.workload.objective is not None else spec.objective
    return Measuring(doc, catalog, spec, driver, objective)


def workload_for(catalog: Catalog, name: str, records: int | None, driver: str | None) -> tuple[Workload, str]:
    """The workload ``name`` at ``records`` (None: its own size) and the driver that runs it (None: the system's)
    for ``catalog``'s system.

    Raises:
        UsageError: the size is below what a rung measures, the workload is for another system, or the driver
            cannot run it.
    """
    spec = load_workload(name)
    if records is not None and records != spec.records:  # a resolved document names the workload's own size
        if spec.capture is not None:
            raise UsageError(f"--records {records:,}: a capture replays what it captured ({spec.records:,} "
                             f"{spec.counts}). Fix: drop --records (its ladder in {spec.source} sets the smaller "
                             "rungs)")
        _check_records(records, spec)
        spec = spec.scaled(records)
    if spec.systems and catalog.system not in spec.systems:
        raise UsageError(f"workload '{spec.name}' is for {', '.join(spec.systems)}, not {catalog.system}. "
                         "Fix: choose a workload listed by `knobtune systems`")
    driver = driver_for(catalog.system, driver, spec)
    workload_section(catalog.system, driver, spec)  # the workload must say how this driver runs it
    return spec, driver


def _check_records(records: int, workload: Workload) -> None:
    """Raises UsageError when --records is below 1, or, for a workload that counts records, below the smallest data
    set a rung runs (it would be raised silently)."""
    if records < 1:
        raise UsageError(f"--records {records} is below 1. Fix: e.g. --records 100000, or leave it out for the "
                         "workload's own size")
    if workload.counts == "records" and records < MIN_RUNG_RECORDS:
        raise UsageError(f"--records {records} is below {MIN_RUNG_RECORDS}. Fix: e.g. --records 100000 (knobtune "
                         f"measures no data set under {MIN_RUNG_RECORDS} records), or leave it out for the workload's "
                         "own size")


def _default_name(name: str) -> str:
    """The study name made from a system and a workload, when none is given.

    Raises:
        UsageError: the system's or the workload's name makes no valid study name.
    """
    if (problem := name_problem(name)) is not None:
        raise UsageError(f"the study name made from the system and the workload, {name!r}, {problem}. Fix: name the "
                         f"study with --study ({NAME_CHARS})")
    return name


def plan_text(experiment: Experiment, store: StudyStore) -> str:
    """``tune --dry-run``: the resolved document as TOML (``--experiment`` takes it back), then, as comments, the
    search after this machine and the limits have narrowed it: what will run. Nothing is opened or started."""
    notes: list[str] = []
    e = experiment
    target = make_target(e.catalog, e.workload, store.worker_scratch(), e.driver, settle=e.research.settle,
                         memory_limit_bytes=e.limits.memory_limit_bytes)
    e = narrowed(e, target, notes.append)  # nothing is opened: the target only says what this machine refuses
    space = e.space
    lines = [f"study {e.study_name} in {store.shown_url}; {len(space.knobs)} knobs searched: " + ", ".join(space.knobs),
             "ladder: " + "; ".join(str(r) for r in e.rungs),
             "kept out (unsafe): " + (", ".join(f"{kept_out_label(k, e.catalog)} ({v})"
                                                for k, v in space.left_out.items()) or "none"),
             *([note] if (note := space.driver_note()) else []), *notes]
    return to_toml(e.doc) + "\n" + "\n".join(f"# {line}" for line in lines) + "\n"
