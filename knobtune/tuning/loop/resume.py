"""What a study runs again or first: interrupted trials re-queued, and the known configs a new study tries first.

A study killed mid-trial is resumed by running ``tune`` again: the interrupted
trial is marked and its config queued again (a known config stays one, so it
is still never pruned). A trial whose worker died (no heartbeat) is queued
again the same way. A new study tries the known configs right after the
default: the target's (PGTune, the RocksDB guide, the starts the workload's
shape suggests) and a previous study's best (``--start-from``).
"""

from __future__ import annotations

import json
import socket

import optuna
from optuna.trial import TrialState

from knobtune.processes import pid_alive
from knobtune.targets import KnownConfig
from knobtune.tuning.records import Outcome, attrs, records
from knobtune.tuning.loop.progress import Reporter
from knobtune.tuning.loop.workers import Workers
from knobtune.tuning.search import composed_here


class Queue:
    """Re-queues interrupted trials, and keeps the known configs pending until this machine's default has run."""

    def __init__(self, workers: Workers, reporter: Reporter) -> None:
        self.workers, self.reporter = workers, reporter
        self._pending: list[tuple[str, dict]] = []  # (label, changed knobs) to try first, once the default ran
        self._tried_elsewhere: frozenset[str] = frozenset()  # labels the earlier studies alike ran without a gain
        self._as_started: dict[str, str] = {}  # an earlier study's config (label) -> the start it was there

    # ------------------------------------------------------------ interrupted trials

    def recover_interrupted(self) -> None:
        """Trials left RUNNING by a dead process on this host: mark them and queue their configs again."""
        study, storage, host = self.workers.study, self.workers.storage, socket.gethostname()
        for record in records(study, (TrialState.RUNNING,)):
            worker_host, _, pid = (record.worker or "").rpartition(":")
            if worker_host != host or not pid.isdigit() or pid_alive(int(pid)):
                continue  # another machine's or a live process's trial
            trial_id = self.workers.trial_id(record.number)
            try:
                storage.set_trial_user_attr(trial_id, attrs.OUTCOME, Outcome.INTERRUPTED.value)
                storage.set_trial_user_attr(trial_id, attrs.REASON, "knobtune was stopped during this trial")
                study.tell(record.number, state=TrialState.FAIL)
            except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError):
                continue  # another worker (or the heartbeat check) ended it first and queued it again
            frozen = study.get_trials(deepcopy=False)[record.number]
            self.requeue(frozen.params, frozen.user_attrs, record.number)
            self.reporter.note(f"trial {record.number} was interrupted; its config is queued again")

    def requeue_stale(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """Optuna found a running trial without a heartbeat (its process or machine died) and failed it: run it
        again. The storage calls this (``StudyStore.storage(on_stale=...)``)."""
        self.requeue(trial.params, trial.user_attrs, trial.number, study)
        self.reporter.note(f"trial {trial.number} lost its worker ({trial.user_attrs.get(attrs.WORKER, 'unknown')}); "
                           "its config is queued again")

    def requeue(self, params: dict, user_attrs: dict, number: int, study: optuna.Study | None = None) -> None:
        """Queue an interrupted trial's config again, once (a default is not: each machine re-runs its own when due);
        a known config the study tried first stays one (never pruned)."""
        study = study or self.workers.study
        if attrs.is_default(user_attrs) or self.retry_of(number, study) is not None:
            return
        known = {k: user_attrs[k] for k in (attrs.STARTED_FROM, attrs.IN_PLACE_OF) if k in user_attrs}
        study.enqueue_trial(params, user_attrs={attrs.RETRY_OF: number, **known}, skip_if_exists=False)

    def retry_of(self, number: int, study: optuna.Study | None = None) -> int | None:
        """The number of the trial queued to run trial ``number``'s config again (None: none is)."""
        return next((t.number for t in (study or self.workers.study).get_trials(deepcopy=False)
                     if t.user_attrs.get(attrs.RETRY_OF) == number), None)

    # ------------------------------------------------------------ known configs first

    def plan_known_configs(self, known: tuple[KnownConfig, ...]) -> None:
        """A new study tries known configs first, right after the default: the target's ``known`` (when the
        experiment asks: ``try_known_configs``) and ``start_configs`` (--start-from), each as far as the search
        space can take it. They are queued when the default has run (``release_known_configs``), so that trial 0
        stays the default."""
        e = self.workers.experiment
        if e.joining or any(not r.is_default for r in records(self.workers.study)):
            return
        self._pending = self._new_here([(k.label, dict(k.changed)) for k in known]) if e.research.try_known_configs \
            else []
        self._pending += list(e.start_configs)

    def plan(self, starts: list[tuple[str, dict]]) -> None:
        """Queue ``starts`` (label, changed knobs) with the next release: the starts the diagnosis suggests from a run
        of this study, less the known configs a rule names that the earlier studies alike ran (``_new_here``)."""
        self._pending += self._new_here(starts)

    def learn_from(self, starts: list[tuple[str, dict]], as_started: dict[str, str]) -> None:
        """Queue the earlier studies' best configs (``starts``) with the next release. ``as_started``: the start each
        one was there (its label: a known config, a rule's start from the default's run); where this study plans
        the same start too, that is tried in its place (``_sized_here``)."""
        self._as_started = dict(as_started)
        self._pending += starts

    def tried_elsewhere(self, labels: frozenset[str]) -> None:
        """The configs (by label) that the earlier studies alike this one learns from tried first and measured
        without a gain (``earlier.find_earlier``): the known configs among them are not tried first again, not being
        worth a full-size run before the search (the sampler that learns from their trials is shown how they ran).
        Tried again, they filled the search of a later study with half the budget (bench question
        earlier-studies). Set before anything is planned."""
        self._tried_elsewhere = labels

    def _new_here(self, starts: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
        """``starts`` less the known configs the earlier studies alike ran without a gain (``tried_elsewhere``),
        which the output names. The config the rules compose from this study's own run (``search.composed_here``)
        always goes: it moves every knob the findings name from this run's config and counters, and the earlier
        study's composition of the same label measured another workload's. Bench earlier-studies-third-pair
        (f761acc): on uniform updates of 3 KiB values, the rules' composed start from the default's run was the
        3-minute cold study's result in 4 of 4 seeds (1.75x-2.01x); the earlier study, of 2 KiB values, had ranked
        its own below its three best in all 4, and 7 of 8 later studies left it out (the earlier configs they tried
        instead ran 1.00x-1.73x there)."""
        if again := [label for label, _ in starts if label in self._tried_elsewhere and not composed_here(label)]:
            self.reporter.note(f"not tried first, the earlier studies alike ran {'them' if len(again) > 1 else 'it'} "
                               f"without a gain: {', '.join(again)}")
        return [(label, changed) for label, changed in starts if label not in again]

    def release_known_configs(self) -> None:
        """Queue the known configs planned (once this machine's default has run); none that the space makes the
        default, or another of them."""
        e, pending = self.workers.experiment, self._sized_here(self._pending)
        self._pending = []
        queued = {json.dumps(e.space.params_of(e.catalog.defaults()), sort_keys=True, default=str)}  # the default ran
        trials = e.budget.trials
        room = None if trials is None else trials - sum(not r.is_default for r in records(self.workers.study))
        for label, changed, in_place_of in pending:
            if room is not None and room <= 0:
                self.reporter.note(f"not tried, --trials {e.budget.trials} is reached: {label}")
                continue
            params = e.space.params_of(e.space.within(e.catalog.config(changed)))
            key = json.dumps(params, sort_keys=True, default=str)
            if key in queued:
                continue  # within this space it is the default, or queued already: nothing new to try
            queued.add(key)
            self.workers.study.enqueue_trial(params, user_attrs={attrs.STARTED_FROM: label} | (
                {attrs.IN_PLACE_OF: in_place_of} if in_place_of else {}))
            self.reporter.note(f"queued first: {label}" + (f", sized for this workload, in place of {in_place_of} "
                                                           "(the same start there)" if in_place_of else ""))
            room = None if room is None else room - 1

    def _sized_here(self, pending: list[tuple[str, dict]]) -> list[tuple[str, dict, str | None]]:
        """``pending`` with each earlier study's config that was a start this study plans too (by label: a known
        config, a rule's start from the default's run) replaced by this study's own, in the earlier config's place,
        named as such (label, changed knobs, the earlier config's label or None).

        A rule sizes its start for the workload (RocksDB's hash memtable: 0.4 of the data set), so the same start
        composed for another workload carries that workload's sizes. Bench earlier-studies (cc1b753, seed 1): the
        earlier study's winner, rocksdb-point-lookups-universal composed for 8 KiB values, ran 1.12x and 1.18x the
        default of the 5 KiB workload in the two later studies that tried it first; composed for the 5 KiB workload,
        the same start was verified 1.68x and 1.57x there (seed 2, the two studies that did not learn from it). Where
        this study does not plan the start (its rule does not fire here, the rules are off), the earlier config
        itself is tried."""
        planned = {label: changed for label, changed in pending if label not in self._as_started}
        sized_as = {label: start for label, _ in pending if (start := self._as_started.get(label, "")) in planned}
        sized: list[tuple[str, dict, str | None]] = []
        for label, changed in pending:
            if (own := sized_as.get(label)) is None:
                if label not in sized_as.values():  # else tried in an earlier config's place
                    sized.append((label, changed, None))
            elif all(s != own for s, _, _ in sized):  # two earlier configs of one start: it is tried once
                sized.append((own, planned[own], label))
        return sized
