"""The search narrowed to what this machine and the experiment's limits allow, each narrowing said once.

``Tuner`` narrows before it opens the study; ``tune --dry-run`` narrows the same way, so the plan it prints is the
plan that runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from knobtune.knobs import KnobType
from knobtune.knobs.display import knob_value
from knobtune.units import human_bytes
from knobtune.targets import Target
from knobtune.tuning.document.experiment import Experiment


def narrowed(e: Experiment, target: Target, note: Callable[[str], None]) -> Experiment:
    """``e`` without the values this machine refuses, with the production ratio's planned memory settled, and its
    memory knobs capped under the planned-memory limit."""
    return _capped(_production_limit(_without_impossible(e, target, note), target, note), note)


def _without_impossible(e: Experiment, target: Target, note: Callable[[str], None]) -> Experiment:
    """The experiment without the values this machine refuses."""
    impossible = {k: v for k, v in target.impossible_values().items() if k in e.space.knobs}
    if not impossible:
        return e
    note("left out, this machine refuses them: "
         + ", ".join(f"{k}={'/'.join(map(str, v))}" for k, v in impossible.items()))
    return replace(e, space=e.space.excluding(impossible))


def _production_limit(e: Experiment, target: Target, note: Callable[[str], None]) -> Experiment:
    """With a production ratio (--production-data, --production-memory): the planned memory a config may hold on
    the benchmark's data, at the same memory-to-data ratio (never below the default's own plan: the default is
    what production runs anyway)."""
    if e.production is None or e.planned_limit_bytes is not None:
        return e
    data, memory = e.production
    benchmark = target.workload_facts().data_bytes
    default_plan = e.catalog.memory.planned_bytes(e.catalog.defaults())
    limit = max(int(benchmark * memory / data), default_plan)
    note(f"capped at production's memory-to-data ratio ({human_bytes(memory)} for {human_bytes(data)} of data, "
         f"1:{data / memory:.3g}): configs may plan {human_bytes(limit)} of caches and buffers for the benchmark's "
         f"{human_bytes(benchmark)}" + (" (the default's own plan)" if limit == default_plan else ""))
    return replace(e, planned_limit_bytes=limit)


def _capped(e: Experiment, note: Callable[[str], None]) -> Experiment:
    """With a limit on the planned memory (--memory-limit, the production ratio): the memory knobs searched only
    up to what fits it, each on its own (``SearchSpace.capped_under``)."""
    space = e.space.capped_under(e.planned_memory_limit())
    if space.ceilings and space.planned_limit is not None:  # capped_under sets both
        knobs = e.catalog.knobs
        note(f"capped at {human_bytes(space.planned_limit)} of planned memory: a sampled config planning more is "
             "scaled down to it; searched up to " + ", ".join(
                 f"{name} <= {knob_value(knobs[name], int(top) if knobs[name].type != KnobType.FLOAT else top)}"
                 for name, top in space.ceilings.items()))
    return replace(e, space=space)
