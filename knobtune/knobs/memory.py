"""The memory model of a catalog: what a config will hold in memory, planned from its knobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from knobtune.knobs.knob import Value
from knobtune.units import human_bytes

Product = tuple[str | float, ...]  # knob names and constant factors, multiplied


@dataclass(frozen=True)
class MemoryModel:
    """What a config will hold in memory, planned from its knobs: sums of products (see docs/catalog-format.md).

    ``planned`` is a floor (caches and write buffers, not the process itself);
    the measured peak is the truth. ``write_buffers`` is what the store can
    hold before it must write anything to table files.
    """

    planned: tuple[Product, ...] = ()
    write_buffers: tuple[Product, ...] = ()

    def planned_bytes(self, config: Mapping[str, Value]) -> int:
        return _sum_of_products(self.planned, config)

    def write_buffer_bytes(self, config: Mapping[str, Value]) -> int:
        return _sum_of_products(self.write_buffers, config)

    def knobs(self) -> set[str]:
        """The knobs the plan reads."""
        return {factor for term in self.planned for factor in term if isinstance(factor, str)}

    def ceiling(self, knob: str, config: Mapping[str, Value], limit_bytes: int) -> float | None:
        """The highest value of ``knob`` whose plan, the rest of ``config`` unchanged, is within ``limit_bytes`` (never
        below its value in ``config``); None when the plan does not grow with it. A plan is a sum of products, so
        it grows linearly with each knob."""
        at_zero = _sum_of_products(self.planned, {**config, knob: 0})
        per_unit = _sum_of_products(self.planned, {**config, knob: 1 << 30}) - at_zero
        if per_unit <= 0:
            return None
        return max((limit_bytes - at_zero) / per_unit * (1 << 30), float(config[knob]))

    def over_limit(self, config: Mapping[str, Value], limit_bytes: int | None) -> str | None:
        """Why ``config`` is not to be run under ``limit_bytes``; None when its plan fits (or there is no limit)."""
        planned = self.planned_bytes(config)
        if limit_bytes is None or planned <= limit_bytes:
            return None
        return (f"planned memory {human_bytes(planned)} (caches and write buffers) is over the memory limit "
                f"{human_bytes(limit_bytes)}; not run")


def _sum_of_products(terms: tuple[Product, ...], config: Mapping[str, Value]) -> int:
    total = 0.0
    for term in terms:
        product = 1.0
        for factor in term:
            product *= max(float(config[factor]), 0.0) if isinstance(factor, str) else factor
        total += product
    return int(total)

