"""A sweep around a study's result (``sweep --around STUDY``): the config to hold and the experiment it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from knobtune.errors import UsageError
from knobtune.knobs import Value
from knobtune.tuning.experiment import read_experiment
from knobtune.tuning.finish import study_result
from knobtune.workloads import Objective, available_workloads, load_workload


@dataclass(frozen=True)
class HeldResult:
    """A study's result to hold while other knobs are swept, with what the sweep takes from its experiment."""

    config: Mapping[str, Value]  # the result's changed knobs
    held_from: Mapping[str, Any]  # what the sweep says about it: study, trial, verified, verdict
    records: int  # the workload's size the study ran
    driver: str | None
    objective: Objective


def held_result(study: optuna.Study, system: str, workload: str) -> HeldResult:
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
    held_from = {"study": name, "trial": result.trial, "verified": result.verified, "verdict": result.verdict}
    return HeldResult(result.config, held_from, studied.records, experiment.driver, experiment.objective)
