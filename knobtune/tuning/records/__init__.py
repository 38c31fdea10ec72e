"""What a study stores, read back typed: every key (``attrs``), how a trial ended (``outcomes``), its trials and
runs (``trials``)."""

from knobtune.tuning.records import attrs
from knobtune.tuning.records.outcomes import Outcome
from knobtune.tuning.records.trials import (
    RungRun, TrialRecord, record_of, records, starting_configs, store_run, top_trials, value_of, winner_trial)

__all__ = ["Outcome", "RungRun", "TrialRecord", "attrs", "record_of", "records", "starting_configs", "store_run",
           "top_trials", "value_of", "winner_trial"]
