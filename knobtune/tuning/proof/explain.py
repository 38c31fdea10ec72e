"""Which of a winner's changes earned its gain: the ablation path from the default to the winner.

1. The winner's changes are grouped: knobs tied by a catalog relation or
   implication move together.
2. Greedy order, cheaply: starting from the default, each remaining group is
   added on its own and run once at a small rung (``select_rung``); the group
   whose addition measures best joins the path. n groups cost n(n+1)/2 small
   runs.
3. The path, at full size: the default, each prefix of the path, and the
   winner, interleaved ``repeats`` times. Each step's share of the gain has a
   95% bootstrap interval (analysis.stats.gain_shares).
4. The minimal config: the shortest prefix whose measured gain keeps at least
   ``keep`` (95%) of the winner's. ``export --minimal`` writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import optuna

from knobtune.analysis.stats import gain_shares
from knobtune.errors import UsageError
from knobtune.knobs import Catalog, Value
from knobtune.storage import StudyStore
from knobtune.targets import RunFailure, Target
from knobtune.systems import make_target
from knobtune.tuning.records import attrs
from knobtune.tuning.document import DEFAULT_TIMEOUT_FACTOR, read_experiment, relative_limit_s
from knobtune.tuning.search import mend
from knobtune.tuning.proof.verify import Candidate, run_interleaved
from knobtune.workloads import Objective, Rung

EXPLANATION = attrs.EXPLANATION


def change_groups(catalog: Catalog, changed: Mapping[str, Value]) -> list[tuple[str, ...]]:
    """The changed knobs, grouped so that knobs a relation or an implication ties together stay together."""
    group_of = {name: {name} for name in changed}
    ties = [(r.left, r.right) for r in catalog.relations]
    ties += [(c.knob, b) for i in catalog.implications for c in i.when for b in i.then]
    for a, b in ties:
        if a in group_of and b in group_of and group_of[a] is not group_of[b]:
            merged = group_of[a] | group_of[b]
            for name in merged:
                group_of[name] = merged
    groups = {tuple(sorted(g)) for g in group_of.values()}
    return sorted(groups)


def explain_study(study: optuna.Study, store: StudyStore, winner: Mapping[str, Value], *, repeats: int,
                  select_rung: int, keep: float, note: Callable[[str], None] = lambda message: None) -> dict:
    """``explain`` run on the study's own experiment (system, driver, workload and size, settle, memory limit).

    Raises:
        UsageError: the study's experiment cannot be read back here, or ``select_rung`` is not on its ladder.
    """
    experiment = read_experiment(study)
    rungs = experiment.workload.rungs
    if not 0 <= select_rung < len(rungs):
        raise UsageError(f"--select-rung {select_rung}: the workload has rungs 0-{len(rungs) - 1}. Fix: choose one")
    with make_target(experiment.catalog, experiment.workload, store.worker_scratch(), experiment.driver,
                     settle=experiment.research.settle,
                     memory_limit_bytes=experiment.limits.memory_limit_bytes) as target:
        return explain(study, target, winner, objective=experiment.objective, select_rung=rungs[select_rung],
                       full=experiment.workload.full, repeats=repeats, keep=keep, seed=experiment.search.seed,
                       log_dir=store.artifacts(study.study_name) / "explain", note=note)


def explain(study: optuna.Study, target: Target, winner: Mapping[str, Value], *, objective: Objective,
            select_rung: Rung, full: Rung, repeats: int, keep: float, seed: int, log_dir: Path,
            note: Callable[[str], None] = lambda message: None) -> dict:
    """The ablation path from the default to ``winner`` (its changed knobs), measured; stored on the study.

    Raises:
        UsageError: the winner changes no knob.
    """
    catalog = target.catalog
    groups = change_groups(catalog, winner)
    if not groups:
        raise UsageError("the config changes no knob: there is nothing to explain. Fix: explain a tuned study")
    order = _greedy_order(target, groups, winner, objective, select_rung, seed, log_dir / "select", note)
    prefixes = [(Candidate("default", {}), catalog.defaults())]
    changed: dict[str, Value] = {}
    for step, group in enumerate(order, 1):
        changed.update({name: winner[name] for name in group})
        config, _ = mend(catalog, catalog.config(changed))
        prefixes.append((Candidate(f"step {step}: +{', '.join(group)}", dict(catalog.changed(config))), config))
    note(f"measuring the path at {full}: {len(prefixes)} configs x {repeats} interleaved runs")
    comparison = run_interleaved(target, prefixes, full, repeats=repeats, objective=objective, seed=seed,
                                 timeout_factor=DEFAULT_TIMEOUT_FACTOR, log_dir=log_dir / "path")
    runs = comparison.runs
    failed = [r.candidate.label for r in runs if r.failure or not r.values]
    steps: list[dict] = []
    shares = gain_shares([r.values for r in runs], objective.maximize, seed) if not failed else []
    for index, (group, record) in enumerate(zip(order, runs[1:])):
        entry = {"knobs": list(group), "changes": {name: winner[name] for name in group},
                 "label": record.candidate.label, "median": record.median,
                 "failure": None if record.failure is None else record.failure.reason}
        versus = comparison.speedups.get(record.candidate.label)
        if versus is not None:
            entry |= {"ratio": versus.ratio, "ci_low": versus.ci_low, "ci_high": versus.ci_high}
        if shares:
            entry |= {"share": shares[index].share, "share_low": shares[index].ci_low,
                      "share_high": shares[index].ci_high}
        steps.append(entry)
    result = {"select_rung": select_rung.index, "full_rung": full.index, "repeats": repeats, "keep": keep,
              "default_median": runs[0].median, "noise_cv": comparison.noise, "steps": steps,
              "failed": failed, **_minimal(steps, prefixes, keep)}
    study.set_user_attr(EXPLANATION, result)
    return result


def _greedy_order(target: Target, groups: list[tuple[str, ...]], winner: Mapping[str, Value], objective: Objective,
                  rung: Rung, seed: int, log_dir: Path, note: Callable[[str], None]) -> list[tuple[str, ...]]:
    """Groups in the order greedy single runs at ``rung`` pick them: the best addition first."""
    catalog = target.catalog
    order: list[tuple[str, ...]] = []
    remaining = list(groups)
    changed: dict[str, Value] = {}
    limit_s: float | None = None  # relative to the first run (the default plus one group), once it ran
    while len(remaining) > 1:
        scored = []
        for group in remaining:
            trial = {**changed, **{name: winner[name] for name in group}}
            config, _ = mend(catalog, catalog.config(trial))
            label = "+".join(group)
            try:
                run = target.run(config, rung, timeout_s=limit_s,
                                 log_path=log_dir / f"step{len(order)}-{label[:60]}.log", seed=seed)
                value = run.value(objective)
                limit_s = limit_s or relative_limit_s(run.elapsed_s, DEFAULT_TIMEOUT_FACTOR)
            except RunFailure as failure:
                note(f"  +{label}: failed ({failure.reason})")
                continue
            scored.append((value, group))
        if not scored:  # every addition failed at this rung: keep the catalog's order for the rest
            break
        best = (max if objective.maximize else min)(scored, key=lambda pair: pair[0])
        note(f"step {len(order) + 1}: +{', '.join(best[1])} ({objective.show(best[0])} at {rung}; "
             f"{len(remaining)} candidates)")
        order.append(best[1])
        remaining.remove(best[1])
        changed.update({name: winner[name] for name in best[1]})
    return order + remaining


def _minimal(steps: list[dict], prefixes: list, keep: float) -> dict:
    """The shortest prefix of the path whose measured speedup keeps ``keep`` of the winner's gain."""
    final = steps[-1].get("ratio")
    if final is None or final <= 1.0:
        return {"minimal": None, "minimal_note": "the winner did not measure faster than the default on this path"}
    for index, step in enumerate(steps):
        ratio = step.get("ratio")
        if ratio is not None and ratio - 1.0 >= keep * (final - 1.0):
            candidate = prefixes[index + 1][0]
            return {"minimal": dict(candidate.config), "minimal_steps": index + 1, "minimal_ratio": ratio,
                    "minimal_note": f"{index + 1} of {len(steps)} steps keep {(ratio - 1) / (final - 1) * 100:.0f}% "
                                    f"of the winner's gain ({ratio:.2f}x of {final:.2f}x)"}
    return {"minimal": dict(prefixes[-1][0].config), "minimal_steps": len(steps), "minimal_ratio": final,
            "minimal_note": "every step is needed"}
