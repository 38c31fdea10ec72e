"""Which knobs matter in a study: its measured configs, as knob values, handed to analysis.ranking.

A ranking study (``knobtune rank``) runs Latin-hypercube samples at one
rung; any other study can be ranked from the values its trials measured at
one rung (``--from-study``). Either way a ranking is of knobs: each row is a
trial's whole config (a special value such as -1 = auto is a number like any
other), never Optuna's params.
"""

from __future__ import annotations

from collections.abc import Sequence

import optuna

from knobtune.analysis.ranking import Ranking, rank_knobs, top_k
from knobtune.errors import UsageError
from knobtune.knobs import Catalog, KnobType
from knobtune.tuning.records import attrs, records

MIN_SAMPLES = 8


def rank_study(study: optuna.Study, catalog: Catalog, rung: int, *, seed: int = 0) -> Ranking:
    """Rank the knobs a study searched by the values its trials measured at ``rung``; stored on the study.

    Raises:
        UsageError: fewer than MIN_SAMPLES trials measured a value at that rung.
    """
    knobs: Sequence[str] = study.user_attrs.get(attrs.SEARCHED_KNOBS) or list(catalog.knobs)
    rows, values = [], []
    for record in records(study):
        run = record.run_at(rung)
        if record.is_default or run is None or not run.ok:
            continue
        config = catalog.config(record.config)
        rows.append({name: config[name] for name in knobs})
        values.append(float(run.value))  # type: ignore[arg-type]
    if len(rows) < MIN_SAMPLES:
        raise UsageError(f"study '{study.study_name}' has {len(rows)} configs measured at rung {rung}; a ranking needs "
                         f"at least {MIN_SAMPLES}. Fix: run more samples (`knobtune rank --samples N`), or rank "
                         "another rung with --rung")
    kinds = {name: _kind(catalog.knobs[name].type) for name in knobs}
    ranking = rank_knobs(rows, values, kinds=kinds, seed=seed)
    study.set_user_attr(attrs.RANKING, {"rung": rung, **ranking.to_dict()})
    return ranking


def stored_ranking(study: optuna.Study) -> Ranking | None:
    """The ranking ``rank_study`` stored on a study, if any."""
    data = study.user_attrs.get(attrs.RANKING)
    if not data:
        return None
    return Ranking.from_dict({k: v for k, v in data.items() if k != "rung"})


def ranked_knobs(study: optuna.Study, k: int) -> list[str]:
    """The top ``k`` knobs of a study's stored ranking.

    Raises:
        UsageError: the study holds no ranking, or k is not positive or above the knobs it ranked.
    """
    ranking = stored_ranking(study)
    if ranking is None:
        raise UsageError(f"study '{study.study_name}' holds no knob ranking. "
                         f"Fix: run `knobtune rank SYSTEM --workload W --study {study.study_name}` first")
    if k < 1:
        raise UsageError(f"--top-k must be at least 1 (got {k}). Fix: e.g. --top-k 5")
    if k > len(ranking.order):
        raise UsageError(f"--top-k {k} is above the {len(ranking.order)} knobs study '{study.study_name}' ranked. "
                         f"Fix: e.g. --top-k {min(5, len(ranking.order))}, or leave out --ranking to search them all")
    return list(top_k(ranking, k))


def _kind(knob_type: KnobType) -> str:
    if knob_type is KnobType.BOOL:
        return "bool"
    if knob_type is KnobType.ENUM:
        return "enum"
    return "numeric"
