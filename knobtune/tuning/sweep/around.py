"""A sweep around a study's result (``sweep --around STUDY``): its base config and the experiment it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from knobtune.errors import UsageError
from knobtune.knobs import Value
from knobtune.tuning.document import read_experiment
from knobtune.tuning.proof import study_result
from knobtune.workloads import Objective, available_workloads, load_workload


@dataclass(frozen=True)
class StudyBase:
    """A study's result as a sweep's base config (the other knobs stay at it while some are swept), with what the
    sweep takes from its experiment."""

    config: Mapping[str, Value]  # the result's changed knobs
    around: Mapping[str, Any]  # what the sweep says about it: study, trial, verified, verdict
    records: int  # the workload's size the study ran
    driver: str | None
    objective: Objective


def study_base(study: optuna.Study, system: str, workload: str) -> StudyBase:
    """The result of ``study`` to sweep around, for ``system`` and ``workload`` (a name or a file).

    Raises:
        UsageError: the study tuned another system or workload, or has no result.
    """
    experiment = read_experiment(study)
    name = study.study_name
    if experiment.catalog.system != system:
        raise UsageError(f"study '{name}' tuned {experiment.catalog.system}, not {system}. "
                         f"Fix: sweep {experiment.catalog.system}, or --around a {system} study")
    studied = experiment.workload
    if load_workload(workload).name != studied.name:
        raise UsageError(f"study '{name}' tuned workload '{studied.name}', not '{workload}'. Fix: sweep with "
                         f"--workload {studied.name if studied.name in available_workloads() else studied.source}")
    result = study_result(study)
    if not result.config:
        raise UsageError(f"study '{name}' has no result to sweep around ({result.verdict}). "
                         "Fix: leave out --around to sweep around the defaults")
    around = {"study": name, "trial": result.trial, "verified": result.verified, "verdict": result.verdict}
    return StudyBase(result.config, around, studied.records, experiment.driver, experiment.objective)
