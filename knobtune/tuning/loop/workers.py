"""This process among the study's workers: its machine, its own default, the study's units, heartbeats.

Several processes may work on one study (``knobtune worker``, docs/workers.md).
Each machine measures the default first; every run records the machine it ran
on and its ratio to that machine's latest default; a run on another machine
than the first is told to Optuna in the first machine's units (its ratio
times the first machine's default), so pruning and the best compare like with
like. A trial whose process stops sending heartbeats is run again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.trial import TrialState

from knobtune.errors import StorageError, UsageError
from knobtune.storage import GRACE_S, HEARTBEAT_S
from knobtune.tuning.records import RungRun, TrialRecord, attrs, records
from knobtune.tuning.document import Experiment
from knobtune.tuning.loop.machine import differences, machine_facts
from knobtune.tuning.loop.progress import Reporter
from knobtune.workloads import Rung


@contextlib.contextmanager
def optuna_warnings_silenced() -> Iterator[None]:
    """Optuna marks the heartbeat API experimental and warns that heartbeats belong to ``Study.optimize``: a study
    here records them itself (``Workers.heartbeat``) around each trial it asks for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        yield


# The default's counted full-size run slower than its warm-up by more than this: one of the two was off, and the
# pruner's "beats the default" leans on the counted run until the first control. Of 46 RocksDB and PostgreSQL
# studies on one machine (2026-11-29) two were past it: at 1.27x the later controls ran 1.26x faster than the
# counted run (every config until the first control looked 1.26x better than it was); at 1.11x they confirmed it.
UNCONFIRMED = 1.10


class Workers:
    """This process's place in a study shared by workers on one or several machines."""

    def __init__(self, study: optuna.Study, storage: optuna.storages.BaseStorage, experiment: Experiment,
                 reporter: Reporter) -> None:
        self.study, self.storage, self.experiment, self.reporter = study, storage, experiment, reporter
        if not isinstance(storage, BaseHeartbeat):  # Storage.storage() opens one: RDBStorage or ReconnectingStorage
            raise TypeError(f"{type(storage).__name__} records no heartbeats: open the storage with Storage.storage()")
        self.heartbeats: BaseHeartbeat = storage  # the same storage, typed for its heartbeat calls
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.machine = experiment.placement.machine or socket.gethostname()
        self.units_machine = attrs.units_machine(study.user_attrs) or self.machine

    def check_machine(self, scratch_root: Path, system_version: str) -> dict[str, object]:
        """Record this machine's facts on the study and return them; refuse a machine of another kind.

        Raises:
            UsageError: this machine differs from the study's first one and --allow-mixed-machines is missing.
        """
        facts = machine_facts(scratch_root, self.machine, system_version)
        first = self.study.user_attrs.get(attrs.MACHINE) or {}
        if first and (differ := differences(facts, first)) and not self.experiment.placement.allow_mixed_machines:
            raise UsageError(f"this machine ({self.machine}) is not of the kind study '{self.study.study_name}' runs "
                             f"on ({first.get('name', first.get('host'))}): {'; '.join(differ)}. Fix: run it on a "
                             "machine like the first, or add --allow-mixed-machines (each trial is still compared "
                             "with its own machine's default)")
        self.study.set_user_attr(attrs.MACHINE_PREFIX + self.machine, facts)
        return facts

    # ------------------------------------------------------------ this machine's default and the study's units

    def machine_of(self, record: TrialRecord) -> str:
        return record.machine or self.units_machine  # trials before workers ran on the first machine

    def mine(self) -> list[TrialRecord]:
        """The study's trials that ran on this machine, by number."""
        return [r for r in records(self.study) if self.machine_of(r) == self.machine]

    def own_default(self, rung: Rung) -> RungRun | None:
        """The latest run of the default at ``rung`` on this machine (None before there is one)."""
        for record in reversed(records(self.study)):
            run = record.run_at(rung.index)
            if record.is_default and self.machine_of(record) == self.machine and run is not None and run.ok:
                return run
        return None

    def on_this_machine(self, rung: Rung, run: RungRun, is_default: bool) -> RungRun:
        """``run`` with its machine, its ratio to this machine's latest default (above 1: better) and its value in
        the study's units: the raw value on the first machine, elsewhere the first machine's default times the ratio."""
        own = run if is_default else self.own_default(rung)
        if own is None or run.value is None or own.value is None:
            return dataclasses.replace(run, machine=self.machine)
        ratio = run.value / own.value if self.experiment.objective.maximize else own.value / run.value
        return dataclasses.replace(run, machine=self.machine, ratio=ratio,
                                   study_value=self.in_study_units(rung, run.value, own))

    def in_study_units(self, rung: Rung, raw: float, own: RungRun | None = None) -> float:
        """A value measured on this machine at ``rung``, scaled to the first machine's (unchanged on the first);
        ``own``: this machine's default to scale by (default: its latest)."""
        stored = attrs.default_by_rung(self.study.user_attrs).get(str(rung.index))
        own = own or self.own_default(rung)
        if self.machine == self.units_machine or stored is None or own is None or own.value is None:
            return raw
        return RungRun.from_stored(stored).in_study_units * raw / own.value

    def keep_units_default(self, rung: Rung, run: RungRun) -> None:
        """Store the default's run at ``rung`` as the study's units, when this is the units machine."""
        if self.machine == self.units_machine:
            by_rung = attrs.default_by_rung(self.study.user_attrs)
            by_rung[str(rung.index)] = run.to_stored()
            self.study.set_user_attr(attrs.DEFAULT_BY_RUNG, by_rung)

    # ------------------------------------------------------------ other workers

    def default_running_elsewhere(self) -> bool:
        """Whether another live process on this machine is measuring its default right now."""
        return any(r.is_default and self.machine_of(r) == self.machine and r.worker != self.worker
                   for r in records(self.study, (TrialState.RUNNING,)))

    def others_running(self) -> list[TrialRecord]:
        return [r for r in records(self.study, (TrialState.RUNNING,)) if r.worker != self.worker]

    def ask_default(self, role: str) -> optuna.Trial:
        """A new trial of the default config for this machine, started now rather than queued: another worker
        must not take it. Its params are fixed the way Optuna's own ``enqueue_trial`` fixes them."""
        e = self.experiment
        params = e.space.params_of(e.catalog.defaults())
        template = optuna.trial.create_trial(state=TrialState.RUNNING, system_attrs={"fixed_params": params},
                                             user_attrs={attrs.ROLE: role})
        trial_id = self.storage.create_new_trial(self.storage.get_study_id_from_name(self.study.study_name),
                                                 template_trial=template)
        return optuna.Trial(self.study, trial_id)

    def control_due(self) -> str | None:
        """Why the default is to run again as a control now (None: not yet): ``control_every`` trials have run at
        full size since the default last ran on this machine, or its first counted run was slower than its warm-up
        by more than ``UNCONFIRMED`` (a control checks it before the pruner leans on it for long).

        Counting full-size runs (not all trials) keeps the controls' cost near
        1/control_every of the full-size work, however many trials are pruned early; a trial whose runs were
        reused from an earlier one of the same config ran nothing and is not counted.
        """
        every = self.experiment.measurement.control_every
        if every <= 0:
            return None
        since = 0
        for record in reversed(self.mine()):
            if record.is_default:
                if (slower := self._slower_than_warm_up(record)) is not None:
                    return f"its first run was {slower:.2f}x slower than its warm-up: a control checks it now"
                return "drift check" if since >= every else None
            if record.state == TrialState.COMPLETE and record.reused_from is None:
                since += 1
        return None

    def _slower_than_warm_up(self, record: TrialRecord) -> float | None:
        """How many times slower the default's counted full-size run was than its warm-up, when by more than
        ``UNCONFIRMED`` (None otherwise, and for a control: it has no warm-up)."""
        run = record.run_at(self.experiment.rungs[-1].index)
        if record.warm_up_value is None or run is None or not run.ok or not run.value:
            return None
        slower = self.experiment.objective.speedup(record.warm_up_value, run.value)
        return slower if slower > UNCONFIRMED else None

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(
            self.storage.get_study_id_from_name(self.study.study_name), number)

    def still_running(self, number: int) -> bool:
        """Whether the storage still has trial ``number`` running (not yet told how it ended)."""
        return self.storage.get_trial(self.trial_id(number)).state == TrialState.RUNNING

    def fail_stale(self) -> None:
        """Fail (and so queue again, through the storage's callback) the running trials of dead workers: those whose
        heartbeat stopped (Optuna's), and those no worker ever took (``fail_unowned``)."""
        with optuna_warnings_silenced():
            optuna.storages.fail_stale_trials(self.study)
        fail_unowned(self.study, self.storage, GRACE_S)

    @contextlib.contextmanager
    def heartbeat(self, trial: optuna.Trial) -> Iterator[None]:
        """Record a heartbeat for ``trial`` every HEARTBEAT_S while it runs, so other workers know it is alive.

        The first is stored before the block runs, so a trial is never named a worker's (``attrs.WORKER``) without
        a heartbeat: a process that dies before its first beat leaves an unnamed trial, which ``fail_unowned``
        fails; one that dies after it leaves a heartbeat that stops, which Optuna's stale check fails. Either way
        the trial is run again; none is left running for good.
        """
        trial_id, stop = self.trial_id(trial.number), threading.Event()
        self.heartbeats.record_heartbeat(trial_id)

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                try:
                    self.heartbeats.record_heartbeat(trial_id)  # waits while a server storage is away (reconnecting)
                except StorageError:
                    return  # gone for good: the trial's own next call to the storage says so, in one line

        thread = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def fail_unowned(study: optuna.Study, storage: optuna.storages.BaseStorage, grace_s: float) -> list[int]:
    """Fail, and queue again as a stale trial is, every running trial no worker ever took; the numbers failed.

    Optuna sees a trial's heartbeat stop only once it has beaten: a trial whose process lost the storage after asking
    for it but before its first heartbeat (and so before naming itself its worker: ``Workers.heartbeat``) would stay
    RUNNING for good, and a verifier would wait on it for ever. One still unnamed ``grace_s`` after it began is
    failed (its start is the asking process's clock: workers keep their clocks in step, docs/workers.md).
    """
    callback = storage.get_heartbeat_stale_trial_callback() if isinstance(storage, BaseHeartbeat) else None
    study_id = storage.get_study_id_from_name(study.study_name)
    now, failed = datetime.datetime.now(), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if attrs.WORKER in trial.user_attrs or trial.datetime_start is None \
                or (now - trial.datetime_start).total_seconds() < grace_s:
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        try:
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:
            continue  # it ended meanwhile
        failed.append(trial.number)
        if callback is not None:
            callback(study, storage.get_trial(trial_id))
    return failed
