"""Everything that decides what to run and runs it through a target: the Optuna study and its parts."""

from knobtune.tuning.outcomes import Outcome
from knobtune.tuning.space import SearchSpace, build_space, config_hash
from knobtune.tuning.settings import TuneSettings
from knobtune.tuning.study import Progress, Tuner

__all__ = ["Outcome", "Progress", "SearchSpace", "TuneSettings", "Tuner", "build_space", "config_hash"]
