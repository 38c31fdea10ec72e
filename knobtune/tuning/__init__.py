"""Everything that decides what to run and runs it through a target: the Optuna study and its parts."""

from knobtune.tuning.document.sections import ExperimentDoc, load_document
from knobtune.tuning.document.experiment import Experiment
from knobtune.tuning.records import attrs
from knobtune.tuning.records.outcomes import Outcome
from knobtune.tuning.loop.progress import Progress
from knobtune.tuning.search.space import SearchSpace, build_space, config_hash
from knobtune.tuning.loop.study import Tuner

__all__ = ["Experiment", "ExperimentDoc", "Outcome", "Progress", "SearchSpace", "Tuner", "attrs", "build_space",
           "config_hash", "load_document"]
