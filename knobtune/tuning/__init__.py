"""Everything that decides what to run and runs it through a target: the Optuna study and its parts."""

from knobtune.tuning.document import Experiment, ExperimentDoc, load_document
from knobtune.tuning.records import Outcome, attrs
from knobtune.tuning.loop import Progress, Tuner
from knobtune.tuning.search import SearchSpace, build_space, config_hash

__all__ = ["Experiment", "ExperimentDoc", "Outcome", "Progress", "SearchSpace", "Tuner", "attrs", "build_space",
           "config_hash", "load_document"]
