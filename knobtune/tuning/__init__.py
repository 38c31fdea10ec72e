"""Everything that decides what to run and runs it through a target: the Optuna study and its parts."""

from knobtune.tuning.document import ExperimentDoc, load_document
from knobtune.tuning.experiment import Experiment
from knobtune.tuning.outcomes import Outcome
from knobtune.tuning.progress import Progress
from knobtune.tuning.space import SearchSpace, build_space, config_hash
from knobtune.tuning.study import Tuner

__all__ = ["Experiment", "ExperimentDoc", "Outcome", "Progress", "SearchSpace", "Tuner", "build_space", "config_hash",
           "load_document"]
