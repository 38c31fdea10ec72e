"""Studies that learn from earlier ones: a new study looks in its storage for earlier studies of the same system, on
a machine of the same kind with the same build of it (``machine.KIND``), whose workload had a similar shape, and
tries their best configs first, as ``--start-from`` does for a study named by the user; a sampler that models the
study's trials is also shown theirs (``tuning.search.prior``).

The shape is what the target says of its workload (``Target.workload_facts``: whether it reads, writes, scans or
reads single keys only; key and value sizes; the data set against the machine's memory; clients), stored on each
study when it is new (``attrs.SHAPE``). Two workloads are alike when they read, write and scan alike, their data sits
on the same side of memory, and their sizes and clients are within ``NEAR`` of each other; the nearest come first.
Nothing here runs a config: what an earlier study measured is a guess for this one, measured again here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from knobtune.tuning.loop.machine import differences
from knobtune.tuning.records import attrs, record_of, records, top_trials, winner_trial

KINDS = ("reads", "writes", "scans", "point_reads_only")  # each the same in alike workloads
SIZES = ("key_size", "value_size", "clients")  # each within NEAR of the other's
NEAR = 2.0  # at most this many times larger or smaller
MOST_STUDIES = 3  # the nearest earlier studies a new one learns from
MOST_CONFIGS = 3  # the configs it tries first from them (as many as --start-from)
ENDED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)  # a trial that measured its config


def stored_shape(shape: Mapping[str, Any]) -> dict[str, Any]:
    """What a study stores of its workload's shape (``Target.workload_facts``) to be found by later studies."""
    kept: dict[str, Any] = {k: bool(shape[k]) for k in KINDS if k in shape}
    kept |= {k: float(shape[k]) for k in SIZES if isinstance(shape.get(k), (int, float)) and shape[k] > 0}
    if shape.get("data_bytes") and shape.get("memory_bytes"):
        kept["data_to_memory"] = float(shape["data_bytes"]) / float(shape["memory_bytes"])
    return kept


def distance(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> float | None:
    """How far two stored shapes are apart (0: the same), or None when the workloads are not alike."""
    if any(mine.get(k) != theirs.get(k) for k in KINDS):
        return None
    far = 0.0
    for key in (*SIZES, "data_to_memory"):
        a, b = mine.get(key), theirs.get(key)
        if a is None or b is None:
            if a != b:
                return None
            continue
        apart = abs(math.log(a / b))
        if key == "data_to_memory" and (a > 1) != (b > 1):
            return None  # one fits in memory, the other does not
        if apart > math.log(NEAR) * (2 if key == "data_to_memory" else 1):
            return None
        far += apart
    return far


@dataclass(frozen=True)
class Earlier:
    """The earlier studies a new one learns from, nearest first, and the configs it tries first from them."""

    studies: tuple[optuna.Study, ...]  # loaded
    starts: tuple[tuple[str, dict], ...]  # (label, changed knobs), as ``records.starting_configs`` gives them
    tried: frozenset[str] = frozenset()  # labels of configs they tried first that gained there nowhere
    as_started: Mapping[str, str] = field(default_factory=dict)  # a label of ``starts`` -> the start it was there

    @property
    def names(self) -> list[str]:
        return [study.study_name for study in self.studies]


NO_EARLIER = Earlier((), ())  # a study that learns from no earlier one


def find_earlier(storage: optuna.storages.BaseStorage, name: str, system: str, machine: Mapping[str, Any],
                 shape: Mapping[str, Any]) -> Earlier:
    """The earlier tuning studies in ``storage`` alike to the study ``name`` (``shape`` its stored shape, ``machine``
    this machine's facts), up to ``MOST_CONFIGS`` of their configs, each study's winner before its best others, and
    the labels of the configs they tried first (known configs, the rules' starts) that ran to an end there without
    a gain in any of them (pruned, or no faster than the default at full size): not worth a full-size run before
    this study's search. A known config that gained there goes again, though not among their best: their best are
    fit to their workload, and a known config is not (bench earlier-studies-pgd-today, seed 1: the earlier study's
    three best ran 1.37x-1.39x on the later workload, the universal-compaction config it had ranked below them,
    1.43x there, ran 1.53x in the later study without earlier studies). Of their best configs, those that were a
    start there (a known config, a rule's start) name it: this study tries its own version of that start in their
    place when it plans the same (``Queue.learn_from``).

    A study of another system, on a machine of another kind or another build, a knob ranking, one with no stored
    shape (made before shapes were stored) or no complete config, is never read.
    """
    alike: list[tuple[float, str]] = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        theirs = summary.user_attrs
        if summary.study_name == name or theirs.get(attrs.SYSTEM) != system or attrs.is_ranking(theirs) \
                or attrs.SHAPE not in theirs or differences(dict(machine), dict(theirs.get(attrs.MACHINE) or {})) \
                or not (theirs.get(attrs.MACHINE) or {}).get("system_version"):
            continue
        if (far := distance(shape, theirs[attrs.SHAPE])) is not None:
            alike.append((far, summary.study_name))
    studies: list[optuna.Study] = []
    candidates: list[tuple[bool, float, str, optuna.trial.FrozenTrial]] = []
    for _, other in sorted(alike)[:MOST_STUDIES]:
        study = optuna.load_study(study_name=other, storage=storage)
        winner = winner_trial(study)
        best = sorted(top_trials(study, MOST_CONFIGS), key=lambda t: t.number != winner)
        if best:
            studies.append(study)
            candidates += [(t.number == winner, _ratio(t), other, t) for t in best]
    candidates.sort(key=lambda c: (not c[0], -c[1]))  # verified winners first, then the best ratio to its default
    starts: list[tuple[str, dict]] = []
    as_started: dict[str, str] = {}
    seen: set[str | None] = set()
    for _, _, other, trial in candidates:
        digest = trial.user_attrs.get(attrs.CONFIG_HASH)
        if digest not in seen and len(starts) < MOST_CONFIGS:
            seen.add(digest)
            label = attrs.EARLIER_CONFIG.format(study=other, number=trial.number)
            starts.append((label, dict(trial.user_attrs[attrs.CONFIG])))
            if started := trial.user_attrs.get(attrs.STARTED_FROM):
                as_started[label] = started
    ended = [(record.started_from, record) for study in studies for record in records(study, ENDED)
             if record.started_from]
    gained = {label for label, record in ended
              if record.state == optuna.trial.TrialState.COMPLETE and (record.reached_ratio or 0) > 1}
    tried = frozenset(label for label, _ in ended) - gained - {label for label, _ in starts} \
        - set(as_started.values())
    return Earlier(tuple(studies), tuple(starts), tried, as_started)  # the ones chosen here go first, or their own


def still_stored(storage: optuna.storages.BaseStorage, names: Sequence[str]) -> list[optuna.Study]:
    """The studies called ``names`` (in their order) that are still in ``storage``: one may have been removed since a
    study learned from it."""
    kept = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    return [optuna.load_study(study_name=name, storage=storage) for name in names if name in kept]


def _ratio(trial: optuna.trial.FrozenTrial) -> float:
    """The trial's full-size ratio to its machine's default (above 1: better), 0 when it was not stored."""
    return record_of(trial).reached_ratio or 0.0
