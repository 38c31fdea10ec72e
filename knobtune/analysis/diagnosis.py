"""A diagnosis as data: rules over a run's counters and the workload's shape, each with its finding and source.

A system's rules file (``systems/SYSTEM/rules.toml``) holds ``[[rules]]``:

- ``name``: how output and the study name the rule;
- ``when``: a condition, one Python-like expression (``stall_share > 0.1 and
  l0_files_end >= 8``) over the run's counters (the system's ``counters.toml``
  names them), the workload's shape (``SHAPE``) and ``config["knob"]``, the
  run's config; evaluated by simpleeval, never by ``eval``;
- ``finding``: the words a person reads, with the evidence filled in from the
  same names (``"writes stalled {stall_share:.0%} of the run"``);
- ``source``: where the knowledge comes from (a manual's page, an advisor rule);
- ``[[rules.suggest]]``: a knob with a ``direction`` (``up``, ``down`` or
  ``to`` a ``value``) and optionally ``low``/``high``: the range the search
  narrows it to first; bounds and values may be numbers or expressions over the
  same names (``"0.5 * data_bytes"``);
- ``[[rules.starts]]``: whole configs to try first: ``label``, ``config``
  (knob -> value) and ``sized`` (knob -> an expression, e.g. a share of
  ``data_bytes``).

A condition that names a counter the run did not record is not evaluated (a
driver that cannot read it): the diagnosis says which rules were skipped and
why. Nothing here runs a process or knows a system: values are plain numbers,
and fitting them to a catalog is the caller's.
"""

from __future__ import annotations

import ast
import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpleeval import NameNotDefined, SimpleEval

from knobtune.datafile import read_toml
from knobtune.errors import CatalogError
from knobtune.knobs.units import human_bytes

# The workload's shape, as every target gives it (``Target.workload_shape``): what a rule may ask besides counters.
SHAPE: Mapping[str, str] = {
    "point_reads_only": "the workload reads single keys (some phase reads) and never scans a range",
    "scans": "the workload reads ranges of keys (a scan, a sequential read, a seek and next)",
    "reads": "the workload reads at all",
    "writes": "the workload writes at all",
    "data_bytes": "the data set's size in bytes (records x (key + value), or the loaded data of a server)",
    "memory_bytes": "the machine's physical memory in bytes",
    "cores": "the machine's CPU cores",
    "clients": "the clients (threads, connections) the benchmark runs at once",
    "key_size": "a key's size in bytes (0: not a key-value workload)",
    "value_size": "a value's size in bytes (0: not a key-value workload)",
    "workload_s": "the run's workload time in seconds, the settle not counted",
}
DIRECTIONS = ("up", "down", "to")
FUNCTIONS = {"min": min, "max": max, "abs": abs, "log2": math.log2}
Number = float | int | bool | str


@dataclass(frozen=True)
class Suggestion:
    """A knob a rule suggests moving: ``up``/``down`` (narrowed to ``low``..``high`` when given) or ``to`` a value.

    ``low``, ``high`` and ``value`` are numbers, enum values or expressions until ``resolved``.
    """

    knob: str
    direction: str
    low: Number | None = None
    high: Number | None = None
    value: Number | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class Start:
    """A whole config a rule offers as a start: fixed values and values sized by expressions."""

    label: str
    config: Mapping[str, Any]
    sized: Mapping[str, Number | None] = field(default_factory=dict)  # expressions, then their values


@dataclass(frozen=True)
class Rule:
    name: str
    when: str
    finding: str
    source: str
    suggest: tuple[Suggestion, ...] = ()
    starts: tuple[Start, ...] = ()
    names: tuple[str, ...] = ()  # every name the rule reads (its condition, finding, bounds and sizes)
    evidence: tuple[str, ...] = ()  # the names its condition and finding read: what a finding shows


@dataclass(frozen=True)
class Finding:
    """A rule that fired on one run: its words with the evidence filled in, and its suggestions resolved."""

    rule: str
    text: str
    evidence: Mapping[str, float]  # the counters and shape the condition read, by name
    source: str
    suggest: tuple[Suggestion, ...]  # bounds and values resolved to numbers (or enum values)
    starts: tuple[Start, ...]  # sized values resolved to numbers

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "finding": self.text, "evidence": dict(self.evidence), "source": self.source,
                "suggest": [s.to_dict() for s in self.suggest],
                "starts": [{"label": s.label, "config": {**s.config, **s.sized}} for s in self.starts]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(data["rule"], data["finding"], dict(data.get("evidence", {})), data.get("source", ""),
                   tuple(Suggestion(**s) for s in data.get("suggest", [])),
                   tuple(Start(s["label"], dict(s["config"])) for s in data.get("starts", [])))


@dataclass(frozen=True)
class Diagnosis:
    """What the rules say about one run: the findings, and the rules that could not be read (name -> why)."""

    findings: tuple[Finding, ...]
    skipped: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings], "skipped": dict(self.skipped)}

    def fired(self) -> set[str]:
        return {f.rule for f in self.findings}


def load_rules(path: Path, counters: Mapping[str, Any] | None = None) -> tuple[Rule, ...]:
    """The rules of ``path``, checked: every field present and typed, every condition parseable, every name it reads
    a counter (of ``counters``, when given), a shape name or ``config``.

    Raises:
        CatalogError: one line naming the rule, the field and the fix.
    """
    data = read_toml(path, CatalogError, "diagnosis rules")
    known = set(SHAPE) | {"config"} | (set(counters) if counters is not None else set())
    rules, seen = [], set()
    for i, raw in enumerate(data.get("rules", [])):
        where = f"{path}: rules[{i}]" + (f" ({raw['name']})" if isinstance(raw, dict) and "name" in raw else "")

        def fail(problem: str, fix: str) -> CatalogError:
            return CatalogError(f"{where}: {problem}. Fix: {fix}")

        if not isinstance(raw, dict):
            raise fail("is not a table", "write each rule as a [[rules]] table")
        for key in ("name", "when", "finding", "source"):
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise fail(f"has no {key}", f"give {key} = \"...\" (every rule has a name, when, finding and source)")
        unknown = set(raw) - {"name", "when", "finding", "source", "suggest", "starts"}
        if unknown:
            raise fail(f"has unknown fields {', '.join(sorted(unknown))}",
                       "use name, when, finding, source, [[rules.suggest]], [[rules.starts]]")
        if raw["name"] in seen:
            raise fail("repeats a rule name", "give every rule a name of its own")
        seen.add(raw["name"])
        evidence = _names(raw["when"], fail) | _format_names(raw["finding"], fail)
        names = set(evidence)
        suggest = tuple(_suggestion(s, fail) for s in raw.get("suggest", []))
        starts = tuple(_start(s, fail) for s in raw.get("starts", []))
        for bound in [v for s in suggest for v in (s.low, s.high) if isinstance(v, str)]:
            names |= _names(bound, fail)  # a bound is a number: a bare word is a name ("data_bytes")
        for expression in [s.value for s in suggest if isinstance(s.value, str)] \
                + [str(v) for s in starts for v in s.sized.values()]:
            names |= _names(expression, fail, enum_ok=True)
        if counters is not None and (unknown_names := names - known):
            raise fail(f"reads {', '.join(sorted(unknown_names))}, neither a counter of the system nor a shape name",
                       f"use the names of the system's counters.toml or of the shape ({', '.join(SHAPE)})")
        rules.append(Rule(raw["name"], raw["when"], raw["finding"], raw["source"], suggest, starts,
                          tuple(sorted(names - {"config"})), tuple(sorted(evidence - {"config"}))))
    return tuple(rules)


def diagnose(rules: tuple[Rule, ...], counters: Mapping[str, float], shape: Mapping[str, Any],
             config: Mapping[str, Any]) -> Diagnosis:
    """Read ``rules`` over one run: its ``counters``, the workload's ``shape`` and the ``config`` it ran."""
    names = {**shape, **counters}
    evaluator = SimpleEval(names={**names, "config": dict(config)}, functions=FUNCTIONS)
    findings, skipped = [], {}
    for rule in rules:
        missing = [n for n in rule.names if n not in names]
        if missing:
            skipped[rule.name] = f"not recorded for this run: {', '.join(missing)}"
            continue
        try:
            if not evaluator.eval(rule.when):
                continue
            text = rule.finding.format_map(_Shown(names))
            suggest = tuple(Suggestion(s.knob, s.direction, _bound(evaluator, s.low), _bound(evaluator, s.high),
                                       _value(evaluator, s.value)) for s in rule.suggest)
            starts = tuple(Start(s.label, dict(s.config), {k: _value(evaluator, v) for k, v in s.sized.items()})
                           for s in rule.starts)
        except (NameNotDefined, KeyError) as exc:
            skipped[rule.name] = f"not recorded for this run: {exc}"
            continue
        except (ArithmeticError, TypeError, ValueError) as exc:
            skipped[rule.name] = f"could not be read: {exc}"
            continue
        evidence = {n: float(names[n]) for n in rule.evidence if isinstance(names[n], (int, float))}
        findings.append(Finding(rule.name, text, evidence, rule.source, suggest, starts))
    return Diagnosis(tuple(findings), skipped)


class _Shown(dict):
    """Names for ``str.format_map``: numbers as they are (the finding chooses the format); ``NAME_h`` as bytes read
    by a person (``data_bytes_h`` -> "1.2 GiB")."""

    def __missing__(self, key: str) -> str:
        if key.endswith("_h") and key[:-2] in self:
            return human_bytes(int(self[key[:-2]]))
        raise KeyError(key)


def _value(evaluator: SimpleEval, value: Number | None) -> Number | None:
    """A suggestion's bound or value: an expression evaluated, a number or an enum value as it is."""
    if isinstance(value, str) and _is_expression(value):
        return evaluator.eval(value)
    return value


def _bound(evaluator: SimpleEval, bound: Number | None) -> Number | None:
    """A suggestion's ``low`` or ``high``: always a number, so a text is an expression (a bare word a name)."""
    return evaluator.eval(bound) if isinstance(bound, str) else bound


def _is_expression(text: str) -> bool:
    """Whether ``text`` is an expression rather than an enum value (an enum value is one bare word or a literal)."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return not isinstance(tree, (ast.Name, ast.Constant))


def _names(expression: str, fail: Any, enum_ok: bool = False) -> set[str]:
    """The names an expression reads (a bare word is an enum value when ``enum_ok``)."""
    if enum_ok and not _is_expression(expression):
        return set()
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise fail(f"cannot parse {expression!r} ({exc.msg})",
                   "write one expression such as \"stall_share > 0.1 and l0_files_end >= 8\"") from None
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    if unknown := calls - set(FUNCTIONS):
        raise fail(f"calls {', '.join(sorted(unknown))}", f"use only {', '.join(FUNCTIONS)}")
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - calls


def _format_names(text: str, fail: Any) -> set[str]:
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
    except ValueError as exc:
        raise fail(f"finding cannot be formatted ({exc})", "write {name} or {name:.0%} around counter names") from None
    return {f[:-2] if f.endswith("_h") else f for f in fields}


def _suggestion(raw: Any, fail: Any) -> Suggestion:
    if not isinstance(raw, dict) or not isinstance(raw.get("knob"), str):
        raise fail("has a suggestion without a knob", "write [[rules.suggest]] knob = \"...\" direction = \"up\"")
    if raw.get("direction") not in DIRECTIONS:
        raise fail(f"suggests {raw['knob']} in direction {raw.get('direction')!r}",
                   f"give direction = one of {', '.join(DIRECTIONS)}")
    if raw["direction"] == "to" and "value" not in raw:
        raise fail(f"suggests {raw['knob']} 'to' no value", "give value = ...")
    if unknown := set(raw) - {"knob", "direction", "low", "high", "value"}:
        raise fail(f"suggests {raw['knob']} with unknown fields {', '.join(sorted(unknown))}",
                   "use knob, direction, low, high, value")
    return Suggestion(raw["knob"], raw["direction"], raw.get("low"), raw.get("high"), raw.get("value"))


def _start(raw: Any, fail: Any) -> Start:
    if not isinstance(raw, dict) or not isinstance(raw.get("label"), str):
        raise fail("has a start without a label", "write [[rules.starts]] label = \"...\" config = {...}")
    config, sized = raw.get("config", {}), raw.get("sized", {})
    if not isinstance(config, dict) or not isinstance(sized, dict) or not (config or sized):
        raise fail(f"start {raw['label']} has no config",
                   "give config = {knob = value} and/or sized = {knob = \"expr\"}")
    if bad := [k for k, v in sized.items() if not isinstance(v, str)]:
        raise fail(f"start {raw['label']} sizes {', '.join(bad)} without an expression",
                   "write sized values as expressions in quotes, e.g. \"0.4 * data_bytes\"")
    return Start(raw["label"], dict(config), dict(sized))
