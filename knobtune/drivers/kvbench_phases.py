"""A kvbench section's phases, checked as kvbench's own spec reader checks them (native/kvbench/workload.cc,
``parse_phase``), before kvbench is started: a phase kvbench would reject is the workload file's error, said in one
line naming the file and the field, never a failed run blamed on the machine.

One difference from kvbench, on purpose: a ``mix`` must add up to 1. kvbench divides by the sum, so
``{read = 0.9, update = 0.5}`` would silently run 64% reads; the file is refused instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from knobtune.errors import WorkloadError
from knobtune.names import nearest

KINDS = ("fill", "read", "delete", "readseq", "mix", "flush")
ORDERS = ("sequential", "shuffled", "random")
DISTRIBUTIONS = ("uniform", "zipfian", "latest")
EXPECTS = ("all", "none")
MIX_OPERATIONS = ("read", "update", "insert", "scan", "scan_reverse", "rmw")
PHASE_FIELDS = ("name", "kind", "order", "count", "distribution", "zipfian_constant", "scan_length_min",
                "scan_length_max", "mix", "expect")

Fail = Callable[[str, str, str], WorkloadError]


def check_phases(section: Mapping[str, Any], where: str, spelling: str) -> None:
    """The section's ``phases`` (and ``twin``, ``measure``), checked.

    Raises:
        WorkloadError: one line naming the file, the field and the fix.
    """
    def fail(field_name: str, problem: str, fix: str) -> WorkloadError:
        return WorkloadError(f"{where}: field 'drivers.{spelling}.{field_name}': {problem}. Fix: {fix}")

    names: list[str] = []
    for key in ("phases", "twin"):
        if key not in section and key == "twin":
            continue
        phases = section.get(key)
        if not isinstance(phases, list) or not phases:
            raise fail(key, f"{phases!r} is not a non-empty list of phases",
                       f'e.g. {key} = [{{ kind = "fill", order = "shuffled" }}, {{ kind = "read" }}]')
        for index, phase in enumerate(phases):
            name = _check_phase(phase, f"{key}[{index}]", fail)
            if key == "phases":
                names.append(name)
    measure = section.get("measure", names)
    if not isinstance(measure, list) or not measure or not all(isinstance(m, str) for m in measure):
        raise fail("measure", f"{measure!r} is not a list of phase names", f"name phases of `phases`: {names}")
    for name in measure:
        if name not in names:
            raise fail("measure", f"'{name}' is not a phase{nearest(name, names)}", f"name phases of `phases`: {names}")


def _check_phase(phase: object, at: str, fail: Fail) -> str:
    """One phase checked; its name (its kind when it has none)."""
    if not isinstance(phase, dict):
        raise fail(at, f"{phase!r} is not a table", 'e.g. { kind = "read", order = "random" }')
    kind = phase.get("kind")
    if "count" in phase and kind == "mix":
        raise fail(f"{at}.count", "knobtune sets a mix phase's count itself, from the rung (its operations, else "
                   "its records)", "remove it; size the mix with `operations` at the top of the file")
    for field_name in phase:
        if field_name not in PHASE_FIELDS:
            raise fail(f"{at}.{field_name}", f"is not a field of a phase{nearest(field_name, PHASE_FIELDS)}",
                       f"use {', '.join(PHASE_FIELDS)}")
    _one_of(phase, "kind", KINDS, None, at, fail)
    _one_of(phase, "order", ORDERS, "sequential", at, fail)
    _one_of(phase, "distribution", DISTRIBUTIONS, "uniform", at, fail)
    _one_of(phase, "expect", EXPECTS, "all", at, fail)
    name = phase.get("name", kind)
    if not isinstance(name, str) or not name:
        raise fail(f"{at}.name", f"{name!r} is not a name", 'e.g. name = "load"')
    for field_name in ("count", "scan_length_min", "scan_length_max"):
        value = phase.get(field_name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(f"{at}.{field_name}", f"{value!r} is not a positive whole number", f"e.g. {field_name} = 100")
    if phase.get("scan_length_max", 100) < phase.get("scan_length_min", 1):
        raise fail(f"{at}.scan_length_max", "is below scan_length_min", "give scan_length_min <= scan_length_max")
    theta = phase.get("zipfian_constant", 0.99)
    if isinstance(theta, bool) or not isinstance(theta, int | float) or not 0 < theta < 1:
        raise fail(f"{at}.zipfian_constant", f"{theta!r} is not a number between 0 and 1", "e.g. 0.99 (YCSB's)")
    if kind == "mix":
        _check_mix(phase, at, fail)
    elif "mix" in phase:
        raise fail(f"{at}.mix", f"a {kind} phase has no mix", 'write kind = "mix", or remove the mix')
    return name


def _one_of(phase: Mapping[str, Any], field_name: str, valid: tuple[str, ...], default: str | None, at: str,
            fail: Fail) -> None:
    value = phase.get(field_name, default)
    if value not in valid:
        hint = nearest(value, valid) if isinstance(value, str) else ""
        raise fail(f"{at}.{field_name}", f"{value!r} is not one of {', '.join(valid)}{hint}",
                   f"write one of {', '.join(valid)}")


def _check_mix(phase: Mapping[str, Any], at: str, fail: Fail) -> None:
    mix = phase.get("mix")
    if not isinstance(mix, dict) or not mix:
        raise fail(f"{at}.mix", f"{mix!r} is not a table of shares", "e.g. mix = { read = 0.5, update = 0.5 }")
    for operation, share in mix.items():
        if operation not in MIX_OPERATIONS:
            raise fail(f"{at}.mix.{operation}", f"is not an operation{nearest(operation, MIX_OPERATIONS)}",
                       f"use {', '.join(MIX_OPERATIONS)}")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise fail(f"{at}.mix.{operation}", f"{share!r} is not a share from 0 to 1", "e.g. 0.5")
    total = sum(mix.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise fail(f"{at}.mix", f"the shares add up to {total:g}, not 1 (kvbench would scale them silently)",
                   "give shares that add up to 1, e.g. { read = 0.5, update = 0.5 }")
