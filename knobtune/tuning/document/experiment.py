"""The experiment resolved on this machine: the document (``tuning.document.sections``) with its catalog, workload
and space.

``knobtune tune`` and ``rank`` resolve a document from the command line or a file (``resolve``); the
study's process stores the document and the facts of what happened (``Experiment.facts``); ``worker``,
``explain`` and ``sweep --around`` read them back (``read_experiment``), so each of them runs the same system,
driver, workload at the same size, knobs, objective, settle and limits as the study did. Studies written by
earlier releases read the same way (``document.stored_document``).
"""

from __future__ import annotations

import os
import socket
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna

import knobtune
from knobtune.errors import UsageError
from knobtune.knobs import Catalog, load_catalog
from knobtune.storage import StudyStore
from knobtune.systems import know_system, user_system_file
from knobtune.tuning.records import attrs
from knobtune.tuning.document import sections as document
from knobtune.tuning.document.sections import (
    BudgetSection, ExperimentDoc, LimitsSection, MeasurementSection, PlacementSection, ProofSection, ResearchSection,
    SearchSection, WorkloadSection, differences, stored_document,
)
from knobtune.tuning.search import SearchSpace, build_space
from knobtune.workloads import Objective, Rung, Workload, available_workloads, load_workload


@dataclass(frozen=True)
class Experiment:
    """An experiment document resolved on this machine: its catalog, workload at its size and search space, and
    what the study it runs in has settled (the production ratio's planned memory, a joining worker's seed)."""

    doc: ExperimentDoc  # resolved: study, driver, objective and records filled in
    catalog: Catalog
    workload: Workload
    space: SearchSpace
    ranked_by: dict | None = None  # the ranking the searched knobs came from: {"study", "top_k", "knobs"}
    start_configs: tuple[tuple[str, dict], ...] = ()  # (label, changed knobs) a new study tries first (start_from)
    joining: bool = False  # a worker joining a study: it searches, never verifies, and keeps the study's budget
    sampler_seed: int | None = None  # the sampler's seed when it is not the search's (each worker draws its own)
    planned_limit_bytes: int | None = None  # the production ratio's planned memory for the benchmark (set on open)

    @classmethod
    def of(cls, catalog: Catalog, workload: Workload, space: SearchSpace | None = None, *, study: str,
           driver: str | None = None, start_configs: tuple[tuple[str, dict], ...] = (), **paths: Any) -> Experiment:
        """An experiment built in code (tests, bench arms): the document's defaults with ``paths`` over them (dotted
        paths with ``__`` for the dot: ``budget__trials=5``). Not checked as a read document is: code may ask for
        what a person may not (``budget__trials=0``: the default alone)."""
        doc = ExperimentDoc(system=catalog.system, study=study, workload=WorkloadSection(
            name=workload.name, records=workload.records, driver=driver, objective=workload.objective.value))
        return cls(doc=document.replace(doc, **paths), catalog=catalog, workload=workload,
                   space=space if space is not None else build_space(catalog, driver=driver),
                   start_configs=start_configs)

    @property
    def study_name(self) -> str:
        return str(self.doc.study)

    @property
    def objective(self) -> Objective:
        return Objective(self.doc.workload.objective or self.workload.objective)

    @property
    def driver(self) -> str | None:
        return self.doc.workload.driver

    @property
    def search(self) -> SearchSection:
        return self.doc.search

    @property
    def budget(self) -> BudgetSection:
        return self.doc.budget

    @property
    def measurement(self) -> MeasurementSection:
        return self.doc.measurement

    @property
    def proof(self) -> ProofSection:
        return self.doc.proof

    @property
    def limits(self) -> LimitsSection:
        return self.doc.limits

    @property
    def placement(self) -> PlacementSection:
        return self.doc.placement

    @property
    def research(self) -> ResearchSection:
        return self.doc.research

    def changed(self, **paths: Any) -> Experiment:
        """This experiment with fields of its document changed (``budget__trials=5``: see ``document.replace``)."""
        return replace(self, doc=document.replace(self.doc, **paths))

    def planned_memory_limit(self) -> int | None:
        """The planned memory (caches, buffers) a config may hold: the lower of the memory limit and the production
        ratio's share of the benchmark's data (None: neither)."""
        limits = [limit for limit in (self.limits.memory_limit_bytes, self.planned_limit_bytes) if limit is not None]
        return min(limits) if limits else None

    @property
    def production(self) -> tuple[int, int] | None:
        """(data bytes, memory bytes) in production, or None."""
        data, memory = self.limits.production_data_bytes, self.limits.production_memory_bytes
        return (data, memory) if data is not None and memory is not None else None

    @property
    def rungs(self) -> tuple[Rung, ...]:
        """The rungs a config climbs: the workload's ladder, or the one rung of a ranking (``search.only_rung``)."""
        rungs, only = self.workload.rungs, self.search.only_rung
        return rungs if only is None else (rungs[only],)

    @property
    def rungs_run_scaled(self) -> bool:
        """What happens when small rungs run (``research.scale_rungs`` asks for it): configs scaled to their share
        of the data, when the catalog says how. Not for a capture: its rungs replay its first operations onto all
        the data it started from."""
        return self.research.scale_rungs and self.catalog.scales_rungs and self.workload.capture is None

    def facts(self, driver: str, system_version: str, machine: dict[str, Any], units_machine: str) -> dict[str, Any]:
        """What happened, written once when the study is new (the document is written beside it, by each `tune`)."""
        w = self.workload
        return {
            attrs.TOOL_VERSION: knobtune.__version__,
            **({attrs.TOOL_COMMIT: commit} if (commit := knobtune.source_commit()) else {}),
            attrs.SYSTEM: self.catalog.system,
            **({attrs.SYSTEM_FILE: str(f)} if (f := user_system_file(self.catalog.system)) else {}),
            attrs.SYSTEM_VERSION: system_version,
            attrs.MACHINE: machine,
            attrs.UNITS_MACHINE: units_machine,
            attrs.WORKLOAD: {"name": w.name, "records": w.records, "ladder": list(w.ladder), "key_size": w.key_size,
                             "value_size": w.value_size, "source": str(w.source)},
            **({attrs.CAPTURE: w.capture.record()} if w.capture is not None else {}),
            attrs.SEARCHED_KNOBS: list(self.space.knobs),
            attrs.LEFT_OUT: {k: v.value for k, v in self.space.left_out.items()},
            attrs.RUNGS_RUN_SCALED: self.rungs_run_scaled,
            **({attrs.PLANNED_LIMIT: self.planned_limit_bytes} if self.planned_limit_bytes is not None else {}),
            **({attrs.RANKED_BY: self.ranked_by} if self.ranked_by is not None else {}),
        }

    def check_matches(self, recorded: dict[str, Any]) -> None:
        """Refuse to go on with a study created for another experiment: its values would not compare. The check
        is a diff of the two documents over the fields a resume must keep, one line for each that differs.

        Raises:
            UsageError: the system, workload, its size, objective, settling, scaling or kind of study differ.
        """
        if attrs.SYSTEM not in recorded:
            return  # a new study
        name = self.study_name
        stored = stored_document(recorded, name)
        lines = [f"study '{name}' was created with {path} = {_shown(was)}, not {_shown(now)}: {_KEPT[path]}"
                 for path, was, now in differences(stored, self.doc, tuple(_KEPT))]
        workload = (recorded.get(attrs.WORKLOAD) or {}).get("name")
        if workload is not None and workload != self.workload.name:
            lines.insert(0, f"study '{name}' was created for workload '{workload}', not '{self.workload.name}'. "
                            "Fix: use the same --workload, or another --study name")
        if recorded[attrs.SYSTEM] != self.catalog.system:
            lines.insert(0, f"study '{name}' was created for system {recorded[attrs.SYSTEM]}, not "
                            f"{self.catalog.system}. Fix: use the same system, or another --study name")
        if (scaled := attrs.rungs_run_scaled(recorded)) is not None and scaled != self.rungs_run_scaled:
            lines.append(f"study '{name}' ran its small rungs {'scaled' if scaled else 'unscaled'}: their values "
                         f"would not compare. Fix: set research.scale_rungs = {_shown(scaled)}, or use another "
                         "--study name")
        if lines:
            raise UsageError("\n".join(lines))


_KEPT = {  # what a resume must keep, and the fix when it differs
    "workload.records": "its default's times would not compare. Fix: use the same --records, or another --study "
                        "name",
    "workload.objective": "its values would not compare. Fix: use the same --objective, or another --study name",
    "research.settle": "settled and unsettled times would not compare. Fix: use the same research.settle, or "
                       "another --study name",
    "search.only_rung": "a ranking study is resumed by `knobtune rank`, a tuning study by `knobtune tune`. Fix: use "
                        "another --study name",
}


def _shown(value: Any) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else repr(value) \
        if isinstance(value, str) else f"{value:,}" if isinstance(value, int) else str(value)


def study_workload(recorded: dict[str, Any]) -> Workload:
    """The workload a study ran (from its record), at the size it ran.

    Raises:
        UsageError: it was a file of the study's first machine that is not here.
    """
    workload = recorded.get(attrs.WORKLOAD) or {}
    source = Path(str(workload.get("source", "")))
    name = str(workload.get("name", "?"))
    if not source.is_file() and name not in available_workloads():
        raise UsageError(f"the study's workload '{name}' is a file of its first machine ({source}), not here. "
                         "Fix: copy it to the same path on this machine")
    spec = load_workload(source if source.is_file() else name)
    records = workload.get("records")
    return spec.scaled(records) if records and records != spec.records else spec


def read_experiment(study: optuna.Study, *, machine: str | None = None, joining: bool = False,
                    allow_mixed_machines: bool = False) -> Experiment:
    """The experiment a study stored, to run more of it: a worker joining it (``joining``, on this machine, as
    ``machine``), an explanation, a sweep around its result.

    Raises:
        UsageError: the study was never started; a worker cannot join a ranking; its workload file is not on this
            machine.
    """
    recorded = study.user_attrs
    name = study.study_name
    if attrs.SYSTEM not in recorded or (joining and attrs.EXPERIMENT not in recorded
                                        and attrs.OLD_SETTINGS not in recorded):
        raise UsageError(f"study '{name}' has no record of how it searches (it was never started, or by a "
                         "knobtune before workers). Fix: start it with `knobtune tune` first")
    doc = stored_document(recorded, name)
    if joining and doc.search.only_rung is not None:
        raise UsageError(f"study '{name}' is a knob ranking: its Latin hypercube is drawn by one process. "
                         "Fix: resume it with `knobtune rank`, or join a tuning study")
    know_system(recorded[attrs.SYSTEM], recorded.get(attrs.SYSTEM_FILE))
    catalog = load_catalog(recorded[attrs.SYSTEM])
    space = build_space(catalog, recorded[attrs.SEARCHED_KNOBS], doc.search.allow_unsafe, driver=doc.workload.driver,
                        allow_operational=doc.search.allow_operational)
    doc = document.replace(doc, study=name, placement__machine=machine,
                           placement__allow_mixed_machines=allow_mixed_machines)
    worker = f"{machine or socket.gethostname()}:{socket.gethostname()}:{os.getpid()}"  # seeds differ per process
    planned = recorded.get(attrs.PLANNED_LIMIT, (recorded.get(attrs.OLD_PRODUCTION) or {}).get("planned_limit_bytes"))
    return Experiment(doc=doc, catalog=catalog, workload=study_workload(recorded), space=space,
                      ranked_by=recorded.get(attrs.RANKED_BY), joining=joining, planned_limit_bytes=planned,
                      sampler_seed=doc.search.seed + zlib.crc32(worker.encode()) % 100_000 + 1 if joining else None)


def join_experiment(store: StudyStore, study_name: str, machine: str | None = None,
                    allow_mixed_machines: bool = False) -> Experiment:
    """The experiment of ``study_name`` for a worker on this machine: it draws its own configs (its sampler's seed
    is its own) and never verifies; the process that started the study does, once the others have stopped.

    Raises:
        StudyNotFoundError: no such study in the storage.
        UsageError: see ``read_experiment``.
    """
    return read_experiment(store.load(study_name), machine=machine, joining=True,
                           allow_mixed_machines=allow_mixed_machines)
