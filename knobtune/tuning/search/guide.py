"""The diagnosis in the search: what the system's rules say about a run decides where the search looks first.

When this machine's default has run at full size, the system's rules
(``systems/SYSTEM/rules.toml``, read by ``analysis.diagnosis``) are read over
its counters and the workload's shape. What fires becomes:

- **starts**, tried right after the known configs (never pruned): each rule's
  own whole configs (``[[rules.starts]]``), and one config composed of every
  fired suggestion (each knob moved in its direction, to the middle of its
  narrowed range: the geometric middle for a log-scale knob);
- **a focus**: the knobs the fired rules name, each narrowed to its direction
  (``up``: from the default to the rule's ``high`` or the knob's top), while
  every other knob is searched over its whole range, for the first third of
  the search (of ``--time`` left when the default finished, or of
  ``--trials``); then the whole space is searched. This is GPTuner's coarse
  stage (ranges narrowed from knowledge, the rest searched) rather than a
  search of the named knobs alone: searched alone, with the rest at the
  default's values, they ran behind the whole space in every stored study
  (docs/findings.md; in one, 518 of 583 trials searched
  one integer knob of 4 values). Only numeric ranges narrow: a bool or enum
  knob keeps its choices (Optuna refuses a categorical whose choices change).

After every full-size run of a sampled config the rules are read again on its
counters: a rule that fires there and had not fired before (a second
bottleneck, once the first is gone) queues that config with the new rule's
suggestions applied, and, while the first third lasts, the new rule's knobs
join the focus, narrowed from that config's values.

Everything is stored on the study (``attrs.DIAGNOSIS``) and on each trial
(``attrs.FINDINGS``, ``attrs.FOCUSED``), so a resumed study and the report
read the same story.
"""

from __future__ import annotations

import math
import time
from functools import cache
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from knobtune.analysis.diagnosis import Diagnosis, Finding, Rule, Suggestion, diagnose, load_rules
from knobtune.errors import CatalogError, ConfigError
from knobtune.knobs import Knob, KnobType, Value
from knobtune.knobs.catalog import load_catalog
from knobtune.knobs.display import knob_value
from knobtune.units import human_bytes
from knobtune.targets import CounterDoc, Target, described_counters
from knobtune.systems import SYSTEMS
from knobtune.tuning.records import RungRun, attrs
from knobtune.tuning.search.space import SearchSpace

FOCUS_SHARE = 1 / 3  # the share of the search the focus lasts
MIN_FOCUSED_TRIALS = 3  # with --trials, the focus lasts at least this many sampled trials
COMPOSED = "rules: "  # the label of the start composed from the default's run, then the rules that fired
COMPOSED_AFTER = "rules after trial {number}: "  # ... from a later trial's run, then the rules new there
Ranges = dict[str, tuple[float, float]]


def counter_meanings(system: str) -> Mapping[str, CounterDoc]:
    """What each counter of ``system`` means, its unit and how it is read (the system's ``counters.toml``).

    Raises:
        CatalogError: the file is malformed.
    """
    path = SYSTEMS[system].counters
    return described_counters(path) if path is not None else {}


@cache
def rules_of(system: str) -> tuple[Rule, ...]:
    """``system``'s diagnosis rules (package data: read and checked once per process), checked against its counters.

    None when it has no rules file.

    Raises:
        CatalogError: the rules file is malformed or names an unknown counter or knob.
    """
    path = SYSTEMS[system].rules
    if path is None or not path.exists():
        return ()
    rules = load_rules(path, counter_meanings(system) or None)
    catalog = load_catalog(system)
    for rule in rules:
        for knob in [s.knob for s in rule.suggest] + [k for s in rule.starts for k in (*s.config, *s.sized)]:
            if knob not in catalog.knobs:
                raise CatalogError(f"{path}: rule {rule.name} names knob {knob!r}, which the {system} catalog lacks. "
                                   "Fix: use a knob of `knobtune knobs " + system + "`")
    return rules


def diagnose_run(rules: tuple[Rule, ...], shape: Mapping[str, Any], run: RungRun,
                 config: Mapping[str, Value]) -> Diagnosis:
    """The rules read over one stored run (its counters, the workload's seconds) and the config it ran."""
    workload_s = run.summary.get("workload_s")
    return diagnose(rules, run.counters, {**shape, **({"workload_s": workload_s} if workload_s else {})}, config)


def compare_findings(rules: tuple[Rule, ...], shape: Mapping[str, Any], default: tuple[RungRun, Mapping[str, Value]],
                     result: tuple[RungRun, Mapping[str, Value]] | None) -> dict[str, Any]:
    """The default's findings over its full-size run and what the result changed about them: each default finding
    gone or still there (with its evidence under both, and the knobs it suggests that the result moved), and
    findings only the result has."""
    before = diagnose_run(rules, shape, *default)
    story: dict[str, Any] = {"default": [f.to_dict() for f in before.findings]}
    if result is None or not result[0].ok:
        return story
    after = diagnose_run(rules, shape, *result)
    names = {**shape, **result[0].counters}
    story["result"] = {
        "still": sorted(before.fired() & after.fired()), "gone": sorted(before.fired() - after.fired()),
        "new": [f.to_dict() for f in after.findings if f.rule not in before.fired()],
        "evidence": {f.rule: {n: [v, names.get(n)] for n, v in f.evidence.items()} for f in before.findings},
        "moved": {f.rule: moved for f in before.findings
                  if (moved := {s.knob: [default[1].get(s.knob), result[1].get(s.knob)] for s in f.suggest
                                if default[1].get(s.knob) != result[1].get(s.knob)})}}
    return story


def composed_here(label: str) -> bool:
    """Whether the start called ``label`` is one the rules composed from a run of the study that queued it (not a
    known config a rule names)."""
    return label.startswith((COMPOSED, COMPOSED_AFTER.split("{", 1)[0]))


class Advice:
    """What fired findings ask of a search space: narrowed ranges, a composed config, whole starts, as knob values
    of the space's catalog (the search's ``Guide`` and the bench's peers use the same)."""

    def __init__(self, space: SearchSpace, memory_limit_bytes: int | None, note: Callable[[str], None]) -> None:
        self.space, self.catalog, self.memory_limit_bytes, self.note = space, space.catalog, memory_limit_bytes, note
        self._no_room: set[str] = set()  # knobs a rule would move up that the memory limit leaves no room (said once)

    def starts(self, findings: tuple[Finding, ...], config: Mapping[str, Value]) -> list[tuple[str, dict]]:
        """The fired rules' own starts, then every suggestion composed into one (label, changed knobs), each within
        the memory limit."""
        starts = [(start.label, changed) for finding in findings for start in finding.starts
                  if (changed := self.fitted({**start.config, **start.sized}))]
        if composed := self.composed(findings, config):
            starts.append((COMPOSED + "+".join(f.rule for f in findings if f.suggest), composed))
        return [(label, changed) for label, changed in starts if self.within_memory(label, changed)]

    def ranges(self, findings: tuple[Finding, ...] | list[Finding], config: Mapping[str, Value]) -> Ranges:
        """Each suggested numeric knob's narrowed range (the first rule that names a knob decides it)."""
        ranges: Ranges = {}
        for suggestion in (s for f in findings for s in f.suggest):
            if suggestion.knob in ranges or suggestion.knob not in self.space.knobs:
                continue  # decided by an earlier rule, or not searched (not settable through this driver, say)
            bounds = narrowed(self.catalog[suggestion.knob], suggestion, config.get(suggestion.knob))
            if bounds is not None and (bounds := self._within_memory(suggestion.knob, bounds, config)) is not None:
                ranges[suggestion.knob] = bounds
        return ranges

    def _within_memory(self, name: str, bounds: tuple[float, float],
                       config: Mapping[str, Value]) -> tuple[float, float] | None:
        """``bounds`` up to what the planned-memory limit leaves the knob beside the other knobs' values in
        ``config`` (the run the rules read); None (said once) when it leaves none above the range's low end:
        searching it there would only scale every proposal back to where it is."""
        if self.memory_limit_bytes is None:
            return bounds
        top = self.catalog.memory.ceiling(name, {**self.catalog.defaults(), **config}, self.memory_limit_bytes)
        low, high = bounds
        if top is None or top >= high:
            return bounds
        if top > low:
            return low, top
        if name not in self._no_room:
            self._no_room.add(name)
            self.note(f"{name} is not searched first: the planned-memory limit "
                      f"({human_bytes(self.memory_limit_bytes)}) leaves it no room above "
                      f"{self.shown(name, low)} while the other knobs keep their values")
        return None

    def composed(self, findings: tuple[Finding, ...] | list[Finding], config: Mapping[str, Value]) -> dict:
        """``config`` with every suggestion applied: a knob to its value, or to the middle of its narrowed range."""
        moved: dict[str, Any] = {}
        for suggestion in (s for f in findings for s in f.suggest):
            if suggestion.knob in moved:
                continue
            knob = self.catalog[suggestion.knob]
            if suggestion.direction == "to":
                moved[knob.name] = suggestion.value
            elif (bounds := narrowed(knob, suggestion, config.get(knob.name))) is not None:
                moved[knob.name] = middle(knob, *bounds)
        return self.fitted({**self.catalog.changed({**self.catalog.defaults(), **config}), **moved}) if moved else {}

    def fitted(self, values: Mapping[str, Any]) -> dict:
        """The changed knobs of a config built from ``values`` (clamped into each knob's range); {} if refused."""
        fitted = {}
        for name, value in values.items():
            knob = self.catalog[name]
            if knob.type in (KnobType.INT, KnobType.BYTES) and isinstance(value, (int, float)) \
                    and not isinstance(value, bool) and value not in knob.special:
                low, high = knob.bounds
                value = int(round(min(max(value, low), high)))
            elif knob.type in (KnobType.FLOAT, KnobType.DURATION) and isinstance(value, (int, float)):
                low, high = knob.bounds
                value = float(min(max(value, low), high))
            fitted[name] = value
        try:
            return self.catalog.changed(self.catalog.config(fitted))
        except (ValueError, TypeError, KeyError, ConfigError) as exc:  # a start must never stop the study
            self.note(f"a rule's start was left out: {exc}")
            return {}

    def within_memory(self, label: str, changed: Mapping[str, Value]) -> bool:
        over = self.catalog.memory.over_limit({**self.catalog.defaults(), **changed}, self.memory_limit_bytes)
        if over:
            self.note(f"{label} is not tried: {over}")
        return not over

    def shown_ranges(self, ranges: Ranges) -> str:
        """``cache_size 8 MiB..1.1 GiB, max_background_jobs 2..4``: narrowed ranges as a person reads them."""
        return ", ".join(f"{k} {self.shown(k, lo)}..{self.shown(k, hi)}" for k, (lo, hi) in ranges.items())

    def shown(self, name: str, value: float) -> str:
        knob = self.catalog[name]
        return knob_value(knob, int(value) if knob.type in (KnobType.INT, KnobType.BYTES) else value)


class Guide:
    """Reads the rules over full-size runs and turns what fires into starts and a focus (see the module doc)."""

    def __init__(self, study: optuna.Study, space: SearchSpace, target: Target, note: Callable[[str], None], *,
                 memory_limit_bytes: int | None, trials: int | None, enabled: bool) -> None:
        self.study, self.catalog, self.note, self.trials = study, space.catalog, note, trials
        self.advice = Advice(space, memory_limit_bytes, note)
        self.rules = rules_of(self.catalog.system) if enabled else ()
        self.shape = target.workload_facts().shape() if self.rules else {}

    @property
    def _state(self) -> dict[str, Any]:
        return dict(self.study.user_attrs.get(attrs.DIAGNOSIS) or {})

    def after_full_run(self, trial: optuna.Trial, run: RungRun, config: Mapping[str, Value], *, is_default: bool,
                       search_end: float | None) -> list[tuple[str, dict]]:
        """Read the rules over ``trial``'s full-size run; the starts to queue (label, changed knobs)."""
        if not self.rules or not run.ok:
            return []
        found = diagnose_run(self.rules, self.shape, run, config)
        trial.set_user_attr(attrs.FINDINGS, [f.rule for f in found.findings])
        state = self._state
        if is_default:
            if "default" in state:  # a control, or a resumed study: the default's story is told once
                return []
            return self._first(found, config, search_end, trial.number)
        new = [f for f in found.findings if f.rule not in state.get("fired", [])]
        if not new:
            return []
        state["fired"] = [*state.get("fired", []), *(f.rule for f in new)]
        ranges = self.advice.ranges(new, config) if self._first_third(state) else {}
        if ranges:  # the first third lasts: the new rule's knobs join the focus, narrowed from this config's values
            state["focus"] = {**state.get("focus", {}), **{k: list(v) for k, v in ranges.items()}}
        self.study.set_user_attr(attrs.DIAGNOSIS, state)
        names = "+".join(f.rule for f in new)
        self.note(f"trial {trial.number}'s run shows another bottleneck: "
                           + "; ".join(f.text for f in new))
        if ranges:
            self.note(f"narrowed from trial {trial.number}'s values for the rest of the first third: "
                               + self.advice.shown_ranges(ranges))
        composed = self.advice.composed(new, config)
        return [(COMPOSED_AFTER.format(number=trial.number) + names, composed)] if composed else []

    def focus(self) -> Ranges | None:
        """The narrowed ranges a sampled trial searches now, every other knob over its whole range (None: the
        first third is over, or nothing narrowed)."""
        state = self._state
        focus = state.get("focus")
        if not focus or not self._first_third(state):
            return None
        return {k: (float(lo), float(hi)) for k, (lo, hi) in focus.items()}

    def _first_third(self, state: Mapping[str, Any]) -> bool:
        until_s, until_trials = state.get("until_s"), state.get("until_trials")
        if until_s is not None and time.time() >= until_s:
            return False
        return until_trials is None or self._sampled_since_default(state) < until_trials

    def _sampled_since_default(self, state: Mapping[str, Any]) -> int:
        """Sampled trials (their config drawn, not fixed before) numbered after the default's diagnosed run: the
        first third of --trials counts them whether or not anything was narrowed, so a rule that first fires late
        in the study narrows nothing."""
        after = state.get("default_trial", -1)
        return sum(t.number > after and attrs.CONFIG in t.user_attrs and not attrs.is_fixed(t.user_attrs)
                   for t in self.study.get_trials(deepcopy=False))

    # ------------------------------------------------------------ the default's story

    def _first(self, found: Diagnosis, config: Mapping[str, Value], search_end: float | None,
               number: int) -> list[tuple[str, dict]]:
        ranges = self.advice.ranges(found.findings, config)
        now = time.time()
        state: dict[str, Any] = {"default": found.to_dict(), "shape": dict(self.shape), "fired": sorted(found.fired()),
                                 "focus": {k: list(v) for k, v in ranges.items()}, "default_trial": number}
        if search_end is not None:
            state["until_s"] = now + max(search_end - now, 0.0) * FOCUS_SHARE
        if self.trials is not None:
            state["until_trials"] = max(MIN_FOCUSED_TRIALS, math.ceil(self.trials * FOCUS_SHARE))
        self.study.set_user_attr(attrs.DIAGNOSIS, state)
        for finding in found.findings:
            self.note(f"the default's run: {finding.text} (rule {finding.rule})")
        if ranges:
            self.note("searched first, narrowed: " + self.advice.shown_ranges(ranges))
        return self.advice.starts(found.findings, config)


def narrowed(knob: Knob, suggestion: Suggestion, current: Value | None) -> tuple[float, float] | None:
    """The range a suggestion narrows a numeric knob to, from its value in the run (``current``) in the rule's
    direction, within the rule's bounds and the knob's range; None for a bool or enum knob or an empty range."""
    if knob.type in (KnobType.BOOL, KnobType.ENUM) or knob.min is None or knob.max is None:
        return None
    lowest, highest = float(knob.min), float(knob.max)
    base = current if isinstance(current, (int, float)) and current not in knob.special else None
    if suggestion.direction == "up":
        low = max(float(base) if base is not None else lowest, _number(suggestion.low, lowest))
        high = min(_number(suggestion.high, highest), highest)
    elif suggestion.direction == "down":
        low = max(_number(suggestion.low, lowest), lowest)
        high = min(float(base) if base is not None else highest, _number(suggestion.high, highest))
    else:
        return None
    low, high = max(low, lowest), min(high, highest)
    if knob.type in (KnobType.INT, KnobType.BYTES):
        low, high = math.ceil(low), math.floor(high)
    return (low, high) if low < high else None


def middle(knob: Knob, low: float, high: float) -> Value:
    """The middle of a range in the knob's scale (geometric for a log-scale knob), in its type."""
    value = math.sqrt(low * high) if knob.log and low > 0 else (low + high) / 2
    return int(round(value)) if knob.type in (KnobType.INT, KnobType.BYTES) else value


def _number(value: Any, otherwise: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else otherwise
