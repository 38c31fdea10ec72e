"""A kvbench section (``[drivers.kvbench]``: its phases, ``twin``, ``measure``, ``threads``) read through the one
schema (``knobtune.schema``), as kvbench's own spec reader checks it (native/kvbench/workload.cc, ``parse_phase``),
before kvbench is started: a misspelt field at any depth (``thread``, a phase's ``expct``, a mix's ``upsert``) is
refused with the nearest name, a wrong type, choice or range in one line naming the file, the field and the fix,
never a failed run blamed on the machine. What the fields must agree on (a mix's shares, ``measure``'s names, a
scan's lengths) is checked next.

One difference from kvbench, on purpose: a ``mix`` must add up to 1. kvbench divides by the sum, so
``{read = 0.9, update = 0.5}`` would silently run 64% reads; the file is refused instead.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from knobtune import schema
from knobtune.errors import WorkloadError
from knobtune.names import nearest
from knobtune.schema import required, setting
from knobtune.workloads import Workload

KINDS = ("fill", "read", "delete", "readseq", "mix", "flush")
ORDERS = ("sequential", "shuffled", "random")
DISTRIBUTIONS = ("uniform", "zipfian", "latest")
EXPECTS = ("all", "none")
MAX_THREADS = 1024  # kvbench's own limit (native/kvbench/workload.h, kMaxThreads)
SHARE = {"least": 0.0, "most": 1.0, "example": 0.5}


@dataclass(frozen=True, kw_only=True)
class Mix:
    """A mix phase's shares of operations (each from 0 to 1, together 1)."""

    read: float | None = setting(None, **SHARE)
    update: float | None = setting(None, **SHARE)
    insert: float | None = setting(None, **SHARE)
    scan: float | None = setting(None, **SHARE)
    scan_reverse: float | None = setting(None, **SHARE)
    rmw: float | None = setting(None, **SHARE)


MIX_OPERATIONS = tuple(f.name for f in dataclasses.fields(Mix))


@dataclass(frozen=True, kw_only=True)
class PhaseSpec:
    """One phase of a kvbench workload (docs/workloads.md)."""

    name: str | None = setting(None, pattern=r"[\s\S]*\S[\s\S]*", what="a name", example="load")
    kind: str = required(choices=KINDS, what="a kvbench phase kind")
    order: str = setting("sequential", choices=ORDERS, what="an order")
    count: int | None = setting(None, least=1, example=100)
    distribution: str = setting("uniform", choices=DISTRIBUTIONS, what="a key distribution")
    zipfian_constant: float = setting(0.99, positive=True, most=1.0, example=0.99, note="YCSB's")
    scan_length_min: int = setting(1, least=1, example=1)
    scan_length_max: int = setting(100, least=1, example=100)
    mix: Mix | None = None
    expect: str | None = setting(None, choices=EXPECTS, what="what a read expects")


@dataclass(frozen=True, kw_only=True)
class KvbenchSection:
    """A workload's kvbench section: its phases, the twin's, the phases measured, the threads."""

    phases: tuple[PhaseSpec, ...] = required()
    twin: tuple[PhaseSpec, ...] | None = None
    measure: tuple[str, ...] | None = setting(None, example=["run"])
    threads: int = setting(1, least=1, most=MAX_THREADS, example=4)


PHASE_FIELDS = tuple(f.name for f in dataclasses.fields(PhaseSpec))
SECTION_FIELDS = tuple(f.name for f in dataclasses.fields(KvbenchSection))


def read_section(workload: Workload, spelling: str = "kvbench") -> KvbenchSection:
    """``workload``'s kvbench section (spelt ``spelling``), checked whole.

    Raises:
        WorkloadError: one line per problem naming the file, the field and the fix.
    """
    source = f"{workload.source or f'workload {workload.name!r}'}: [drivers.{spelling}]"
    section = schema.read(KvbenchSection, dict(workload.driver(spelling)), schema.Where(source,
                          docs="docs/workloads.md"), WorkloadError)

    def fail(field_name: str, problem: str, fix: str) -> WorkloadError:
        return WorkloadError(f"{source}: {field_name} {problem}. Fix: {fix}")

    names: list[str] = []
    for key, phases in (("phases", section.phases), ("twin", section.twin)):
        if phases is None:
            continue
        if not phases:
            raise fail(key, "is not a non-empty list of phases",
                       f'e.g. {key} = [{{ kind = "fill", order = "shuffled" }}, {{ kind = "read" }}]')
        for index, phase in enumerate(phases):
            _check_phase(phase, f"{key} #{index + 1}", fail)
            if key == "phases":
                names.append(phase.name or phase.kind)
    for name in section.measure if section.measure is not None else names:
        if name not in names:
            raise fail("measure", f"'{name}' is not a phase{nearest(name, names)}", f"name phases of `phases`: {names}")
    if section.measure == ():
        raise fail("measure", "is an empty list", f"name phases of `phases`: {names}")
    return section


def _check_phase(phase: PhaseSpec, at: str, fail: Any) -> None:
    """What one phase's fields must agree on."""
    if phase.count is not None and phase.kind == "mix":
        raise fail(f"{at}.count", "is set: knobtune sets a mix phase's count itself, from the rung (its operations, "
                   "else its records)", "remove it; size the mix with `operations` at the top of the file")
    if phase.scan_length_max < phase.scan_length_min:
        raise fail(f"{at}.scan_length_max", "is below scan_length_min", "give scan_length_min <= scan_length_max")
    if phase.zipfian_constant >= 1:
        raise fail(f"{at}.zipfian_constant", f"{phase.zipfian_constant:g} is not below 1", "e.g. 0.99 (YCSB's)")
    if phase.kind == "mix":
        _check_mix(phase.mix, at, fail)
    elif phase.mix is not None:
        raise fail(f"{at}.mix", f"is set: a {phase.kind} phase has no mix", 'write kind = "mix", or remove the mix')


def _check_mix(mix: Mix | None, at: str, fail: Any) -> None:
    shares = {name: share for name, share in dataclasses.asdict(mix).items() if share is not None} if mix else {}
    if not shares:
        raise fail(f"{at}.mix", "has no shares", "e.g. mix = { read = 0.5, update = 0.5 }")
    total = sum(shares.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise fail(f"{at}.mix", f"shares add up to {total:g}, not 1 (kvbench would scale them silently)",
                   "give shares that add up to 1, e.g. { read = 0.5, update = 0.5 }")

