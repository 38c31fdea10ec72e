"""A worker joins a study another process started: the same experiment, rebuilt from what the study recorded.

``knobtune tune`` records on the study everything a worker needs (system,
driver, workload and its size, searched knobs, objective, settle, limits,
sampler and budget). A worker on any machine that reaches the storage loads
that record and runs trials until the study's budget is spent; it draws its
own configs (its sampler's seed is its own) and never verifies: the process
that started the study does, on its machine, once the others have stopped.
"""

from __future__ import annotations

import os
import socket
import zlib
from pathlib import Path

from knobtune.errors import UsageError
from knobtune.knobs import load_catalog
from knobtune.storage import StudyStore
from knobtune.tuning import attrs
from knobtune.tuning.settings import TuneSettings
from knobtune.tuning.space import build_space
from knobtune.workloads import Objective, available_workloads, load_workload


def join_settings(store: StudyStore, study_name: str, machine: str | None = None,
                  allow_mixed_machines: bool = False) -> TuneSettings:
    """The settings of ``study_name`` for a worker on this machine.

    Raises:
        StudyNotFoundError: no such study in the storage.
        UsageError: the study is a ranking, was made by an older knobtune, or its workload file is not here.
    """
    recorded = store.load(study_name).user_attrs
    if attrs.ONLY_RUNG in recorded:
        raise UsageError(f"study '{study_name}' is a knob ranking: its Latin hypercube is drawn by one process. "
                         "Fix: resume it with `knobtune rank`, or join a tuning study")
    shared = recorded.get(attrs.SETTINGS)
    if shared is None or attrs.SYSTEM not in recorded:
        raise UsageError(f"study '{study_name}' has no record of how it searches (it was never started, or by a "
                         "knobtune before workers). Fix: start it with `knobtune tune` first")
    catalog = load_catalog(recorded[attrs.SYSTEM])
    workload = recorded[attrs.WORKLOAD]
    source = Path(workload["source"])
    if not source.exists() and workload["name"] not in available_workloads():
        raise UsageError(f"the study's workload '{workload['name']}' is a file of its first machine ({source}), "
                         "not here. Fix: copy it to the same path on this machine")
    spec = load_workload(source if source.exists() else workload["name"]).scaled(workload["records"])
    driver = recorded.get(attrs.DRIVER)
    space = build_space(catalog, recorded[attrs.SEARCHED_KNOBS], recorded.get(attrs.ALLOW_UNSAFE, False), fmt=driver,
                        allow_operational=recorded.get(attrs.ALLOW_OPERATIONAL, False))
    worker = f"{machine or socket.gethostname()}:{socket.gethostname()}:{os.getpid()}"  # seeds differ per process
    return TuneSettings(
        study_name=study_name, catalog=catalog, workload=spec, space=space,
        objective=Objective(recorded[attrs.OBJECTIVE]), driver=driver, seed=recorded.get(attrs.SEED, 42),
        settle=recorded.get(attrs.SETTLED, True), scale_rungs=recorded.get(attrs.SCALED_RUNGS, False),
        memory_limit_bytes=recorded.get(attrs.MEMORY_LIMIT),
        max_recovery_s=recorded.get(attrs.MAX_RECOVERY), ranking=recorded.get(attrs.RANKED_BY),
        machine=machine, allow_mixed_machines=allow_mixed_machines, joining=True,
        sampler_seed=recorded.get(attrs.SEED, 42) + zlib.crc32(worker.encode()) % 100_000 + 1,
        **{key: shared[key] for key in TuneSettings.SHARED if key in shared})
