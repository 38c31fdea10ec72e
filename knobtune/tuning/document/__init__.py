"""The experiment: the typed document a study is asked to do, and that document resolved on this machine."""

from knobtune.tuning.document.experiment import Experiment, join_experiment, read_experiment, study_workload
from knobtune.tuning.document.kinds import of_system, tuning_study
from knobtune.tuning.document.narrow import narrowed
from knobtune.tuning.document.resolve import Measuring, measuring, plan_text, resolve, workload_for
from knobtune.tuning.document.sections import (
    DEFAULT_TIMEOUT_FACTOR, MAX_REPEATS, MAX_SEED, MAX_TRIALS, MIN_MEMORY_LIMIT_BYTES, MIN_TIMEOUT_S, OPTIONS,
    ExperimentDoc, ExperimentError, load_document, merged, read_document, relative_limit_s, replace, stored_document)

__all__ = ["DEFAULT_TIMEOUT_FACTOR", "MAX_REPEATS", "MAX_SEED", "MAX_TRIALS", "MIN_MEMORY_LIMIT_BYTES", "MIN_TIMEOUT_S",
           "OPTIONS", "Experiment", "ExperimentDoc", "ExperimentError", "Measuring", "join_experiment",
           "load_document", "measuring", "merged", "narrowed", "of_system", "plan_text", "read_document",
           "read_experiment", "relative_limit_s", "replace", "resolve", "stored_document", "study_workload",
           "tuning_study", "workload_for"]
