"""What a run costs on this machine: its measured time plus the per-run overhead its default's trial showed.

The overhead is a trial's wall-clock time beyond its runs' records (starting the program or server, restoring or
clearing its data), measured on this machine's latest finished default trial. The budget asks it whether a run
fits in the time left; the verification's reserve asks it what verifying will take.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from knobtune.tuning.document import Experiment
from knobtune.tuning.loop.workers import Workers
from knobtune.tuning.records import RungRun, attrs, record_of
from knobtune.workloads import Rung

MIN_RUN_OVERHEAD_S = 0.2  # per run, outside its measured time, at the least (db_bench here: ~0.2 s)


def run_overhead_s(trial: optuna.trial.FrozenTrial) -> float | None:
    """A finished trial's wall-clock time per run beyond what its runs' records account for (starting the
    program or server, restoring or clearing its data); None while it runs or when it ran nothing. The default's
    warm-up is one of its runs: left out, its whole time was counted as overhead (a 30-minute TPC-C study kept
    823 s back for a verification that took 448 s)."""
    record = record_of(trial)
    runs = [run.elapsed_s for run in record.runs.values() if run.ok]
    if record.seconds is None or not runs:
        return None
    if record.warm_up_s is not None:
        runs.append(record.warm_up_s)
    return max(MIN_RUN_OVERHEAD_S, (record.seconds - sum(runs)) / len(runs))


class Costs:
    """The wall-clock time runs take here, from this machine's default."""

    def __init__(self, experiment: Experiment, workers: Workers) -> None:
        self.experiment, self.workers = experiment, workers
        self.overhead_s = MIN_RUN_OVERHEAD_S  # per run beyond its record, as the default's trial measured it

    def measure_overhead(self) -> None:
        """Take the per-run overhead from this machine's latest finished default trial (at least the minimum)."""
        self.overhead_s = self._measured_overhead_s()

    def run_s(self, run: RungRun) -> float:
        """The wall-clock time a run like ``run`` takes here: its measured time plus the per-run overhead measured
        on this machine's default trial (its wall time beyond its runs' records)."""
        return run.elapsed_s + self.overhead_s

    def default_s(self, rung: Rung) -> float:
        """The wall-clock time this machine's default took at ``rung`` (``min_timeout_s`` before it ran)."""
        base = self.workers.own_default(rung)
        return self.experiment.measurement.min_timeout_s if base is None else self.run_s(base)

    def _measured_overhead_s(self) -> float:
        """The per-run overhead of this machine's latest finished default trial (at least the minimum)."""
        study = self.workers.study
        for trial in reversed(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))):
            if attrs.is_default(trial.user_attrs) and self.workers.machine_of(record_of(trial)) == self.workers.machine:
                if (overhead := run_overhead_s(trial)) is not None:
                    return overhead
        return MIN_RUN_OVERHEAD_S
