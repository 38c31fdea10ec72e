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
import dataclasses
import math
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simpleeval import NameNotDefined, SimpleEval

from knobtune import schema
from knobtune.datafile import read_toml
from knobtune.errors import CatalogError
from knobtune.units import human_bytes
from knobtune.schema import TEXT, required, setting, table

# The workload's shape, as every target gives it (``Target.workload_facts``): what a rule may ask besides counters.
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


EXPRESSION = "an expression over the counters, the shape and config (docs/diagnosis.md)"


@dataclass(frozen=True)
class Suggestion:
    """A knob a rule suggests moving: ``up``/``down`` (narrowed to ``low``..``high`` when given) or ``to`` a value.

    ``low``, ``high`` and ``value`` are numbers, enum values or expressions until ``resolved``.
    """

    knob: str = required(**TEXT, example="max_background_jobs", note="a knob of the system's catalog")
    direction: str = required(choices=DIRECTIONS, what="a direction")
    low: int | float | str | None = setting(None, example="data_bytes / 2", note=f"a number, or {EXPRESSION}")
    high: int | float | str | None = setting(None, example="2 * cores", note=f"a number, or {EXPRESSION}")
    value: int | float | bool | str | None = setting(None, example="universal",
                                                     note=f"with direction \"to\": a value, or {EXPRESSION}")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class Start:
    """A whole config a rule offers as a start: fixed values and values sized by expressions."""

    label: str = required(**TEXT, example="rocksdb-point-lookups")
    config: Mapping[str, Any] = table(note="knob -> value, as the catalog spells them")
    sized: Mapping[str, str] = table(**TEXT, example="0.4 * data_bytes", note=f"knob -> {EXPRESSION}")


@dataclass(frozen=True, kw_only=True)
class RuleDoc:
    """One ``[[rules]]`` table as its file writes it (docs/diagnosis.md)."""

    name: str = required(**TEXT, example="write-stalls-level0", note="each rule's own")
    when: str = required(**TEXT, example="stall_share > 0.1", note="the condition: " + EXPRESSION)
    finding: str = required(**TEXT, example="writes stalled {stall_share:.0%} of the run",
                            note="the words a person reads, the evidence in {braces}")
    source: str = required(**TEXT, example="https://github.com/facebook/rocksdb/wiki/Write-Stalls",
                           note="where the knowledge comes from")
    suggest: tuple[Suggestion, ...] = ()
    starts: tuple[Start, ...] = ()


@dataclass(frozen=True)
class RulesFile:
    """A system's diagnosis rules (``systems/SYSTEM/rules.toml``)."""

    rules: tuple[RuleDoc, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Rule(RuleDoc):
    """A rule as read, with the names it reads."""

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
    starts: tuple[Start, ...]  # sized values resolved to numbers, into each start's config

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
    """The rules of ``path``, read through the schema (``RulesFile``), then checked: rule names each once, every
    condition, finding and expression readable, every name it reads a counter (of ``counters``, when given), a shape
    name or ``config``.

    Raises:
        CatalogError: one line per problem naming the file, the field and the fix.
    """
    document = schema.read(RulesFile, read_toml(path, CatalogError, "diagnosis rules"),
                           schema.Where(str(path), docs="docs/diagnosis.md"), CatalogError)
    known = set(SHAPE) | {"config"} | (set(counters) if counters is not None else set())
    rules: list[Rule] = []
    for i, doc in enumerate(document.rules):
        where = f"{path}: rules #{i + 1} ({doc.name})"

        def fail(problem: str, fix: str) -> CatalogError:
            return CatalogError(f"{where}: {problem}. Fix: {fix}")

        if doc.name in {rule.name for rule in rules}:
            raise fail("repeats a rule name", "give every rule a name of its own")
        rules.append(_checked(doc, fail, known if counters is not None else None))
    return tuple(rules)


def _checked(doc: RuleDoc, fail: Any, known: set[str] | None) -> Rule:
    """``doc`` with the names it reads, each expression parsed; ``known``: the names it may read (None: any)."""
    evidence = _names(doc.when, fail) | _format_names(doc.finding, fail)
    names = set(evidence)
    for n, suggestion in enumerate(doc.suggest):
        if suggestion.direction == "to" and suggestion.value is None:
            raise fail(f"suggest #{n + 1} moves {suggestion.knob} 'to' no value", "give value = ...")
        for bound in [v for v in (suggestion.low, suggestion.high) if isinstance(v, str)]:
            names |= _names(bound, fail)  # a bound is a number: a bare word is a name ("data_bytes")
        if isinstance(suggestion.value, str):
            names |= _names(suggestion.value, fail, enum_ok=True)
    for n, start in enumerate(doc.starts):
        if not start.config and not start.sized:
            raise fail(f"starts #{n + 1} ({start.label}) has no config",
                       "give config = {knob = value} and/or sized = {knob = \"expr\"}")
        for expression in start.sized.values():
            names |= _names(expression, fail, enum_ok=True)
    if known is not None and (unknown := names - known):
        raise fail(f"reads {', '.join(sorted(unknown))}, neither a counter of the system nor a shape name",
                   f"use the names of the system's counters.toml or of the shape ({', '.join(SHAPE)})")
    fields = {f.name: getattr(doc, f.name) for f in dataclasses.fields(RuleDoc)}
    return Rule(**fields, names=tuple(sorted(names - {"config"})), evidence=tuple(sorted(evidence - {"config"})))


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
            starts = tuple(Start(s.label, {**s.config, **{k: _value(evaluator, v) for k, v in s.sized.items()}})
                           for s in rule.starts)  # sized values resolved into the config
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
