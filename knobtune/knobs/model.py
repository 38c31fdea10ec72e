"""A system's knob catalog as code: its knobs, the relations and implications between them, its memory model.

``knobtune.knobs.catalog`` builds one from the system's TOML file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knobtune.errors import ConfigError
from knobtune.knobs.knob import Condition, Knob, Safety, Value, all_hold
from knobtune.knobs.memory import MemoryModel


@dataclass(frozen=True)
class Relation:
    """``left op factor x right`` must hold between two knobs while ``when`` holds, e.g. stop >= slowdown."""

    left: str
    op: str  # ">=" or "<="
    right: str
    factor: float = 1.0
    when: tuple[Condition, ...] = ()

    def applies(self, config: Mapping[str, Value]) -> bool:
        return all_hold(self.when, config)

    def bound(self, config: Mapping[str, Value]) -> float:
        """What the left side is compared with: ``factor`` x the right side."""
        return self.factor * config[self.right]  # type: ignore[operator]

    def holds(self, config: Mapping[str, Value]) -> bool:
        if not self.applies(config):
            return True
        left, bound = config[self.left], self.bound(config)
        return left >= bound if self.op == ">=" else left <= bound  # type: ignore[operator]

    def __str__(self) -> str:
        right = self.right if self.factor == 1 else f"{self.factor:g} x {self.right}"
        when = f" when {' and '.join(map(str, self.when))}" if self.when else ""
        return f"{self.left} {self.op} {right}{when}"


@dataclass(frozen=True)
class Implication:
    """When every condition holds, the system requires the knobs in ``then`` to hold those values."""

    when: tuple[Condition, ...]
    then: Mapping[str, Value]

    def applies(self, config: Mapping[str, Value]) -> bool:
        return all_hold(self.when, config)

    def __str__(self) -> str:
        return f"{' and '.join(map(str, self.when))} requires " + ", ".join(f"{k}={v}" for k, v in self.then.items())


@dataclass(frozen=True)
class Catalog:
    system: str
    version: str
    description: str
    formats: tuple[str, ...]
    knobs: Mapping[str, Knob]
    relations: tuple[Relation, ...] = ()
    implications: tuple[Implication, ...] = ()
    source: Path | None = None
    memory: MemoryModel = field(default_factory=MemoryModel)

    def __getitem__(self, name: str) -> Knob:
        try:
            return self.knobs[name]
        except KeyError:
            raise ConfigError(_unknown_knob_message(name, self)) from None

    def to_dict(self) -> dict[str, Any]:
        """The catalog as JSON-ready data (``knobtune knobs --json``)."""
        return {"system": self.system, "version": self.version,
                "knobs": [knob.to_dict() for knob in self.knobs.values()],
                "relations": [str(r) for r in self.relations],
                "implications": [str(i) for i in self.implications]}

    def defaults(self) -> dict[str, Value]:
        return {name: knob.default for name, knob in self.knobs.items()}

    def config(self, changes: Mapping[str, Any]) -> dict[str, Value]:
        """The full configuration: defaults overridden by ``changes`` (parsed and range-checked).

        Raises:
            ConfigError: an unknown knob, a bad value, or a broken relation between knobs.
        """
        config = self.defaults()
        for name, raw in changes.items():
            config[name] = self[name].parse(raw)
        for implication in self.implications:
            if implication.applies(config) and any(config[k] != v for k, v in implication.then.items()):
                raise ConfigError(f"{implication}, which this config breaks. Fix: set "
                                  + ", ".join(f"{k}={v}" for k, v in implication.then.items()))
        for relation in self.relations:
            if not relation.holds(config):
                raise ConfigError(
                    f"{relation} does not hold ({relation.left}={config[relation.left]}, "
                    f"{relation.right}={config[relation.right]}). Fix: raise {relation.left} or lower {relation.right}")
        return config

    def at_fraction(self, config: Mapping[str, Value], fraction: float) -> dict[str, Value]:
        """``config`` for a run on ``fraction`` of the full data: every data-sized knob (memtables, caches, file
        and level sizes) scaled by it, so a small rung runs a miniature of the full size (as many memtables
        flushed, files compacted, the same share of the data cached). Values below a knob's search range are
        meant: the result is for running, not for checking."""
        return {name: self.knobs[name].at_fraction(value, fraction) for name, value in config.items()}

    @property
    def scales_rungs(self) -> bool:
        """Whether any knob is data-sized (small rungs run scaled configs)."""
        return any(knob.data_sized for knob in self.knobs.values())

    def changed(self, config: Mapping[str, Value]) -> dict[str, Value]:
        """Only the knobs whose value differs from the default and that apply under ``config``."""
        return {k: v for k, v in config.items() if v != self.knobs[k].default and self.knobs[k].applies(config)}

    def needs_other_driver(self, config: Mapping[str, Value], driver: str) -> dict[str, tuple[str, ...]]:
        """Changed knobs of ``config`` that ``driver`` cannot set, each with the drivers that can."""
        return {k: self.knobs[k].drivers for k in self.changed(config) if not self.knobs[k].settable_by(driver)}

    def unsafe_in(self, config: Mapping[str, Value]) -> dict[str, Safety]:
        """Knobs of ``config`` that hold an unsafe value, with the class each carries."""
        return {k: self.knobs[k].safety for k, v in config.items()
                if self.knobs[k].applies(config) and self.knobs[k].is_unsafe(v)}

def _unknown_knob_message(name: str, catalog: Catalog) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(catalog.knobs), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"unknown knob '{name}' for {catalog.system}.{hint} Fix: see `knobtune knobs {catalog.system}`"

