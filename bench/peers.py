"""Benchmark: knobtune, SMAC3 and a hand-written Optuna script, same budget, same knobs, same runs (issues 17, 32).

For each seed the chosen tools (``--tools``; the arms) search one workload, each for the same wall-clock budget B,
one after the other (their order rotated from seed to seed, so the machine's drift favours none):

- knobtune: ``knobtune tune --time B --seed S`` as shipped (the diagnosis rules' starts and narrowed first
  search, then TPE); its own verification (top 3 x 5 interleaved runs) is inside B.
- knobtune-alone: the same with ``--no-rules``: the search alone (no starts from the rules, no narrowing).
- rules-random: the same with ``--sampler random``: the rules' starts and narrowing, then random search.
- SMAC3 (smac): its multi-fidelity facade (random-forest BO, Hyperband with knobtune's reduction factor 3) over
  knobtune's own search space written as a ConfigSpace; SMAC's budgets 1, 3, 9 are the ladder's rungs 0, 1, 2.
- smac-starts: the same SMAC3 given the rules' starts as its initial design's ``additional_configs``: the starts
  ``tune`` would queue, read from the default's full-size run in this harness (``rules_starts``). SMAC runs them
  after its own random initial configs, inside its Hyperband brackets (it may stop them at a small rung, where
  knobtune never prunes a start). The record lists the starts given and those its ConfigSpace cannot hold.
- The hand-written Optuna script (optuna: ``handwritten_optuna.search``: random sampling, successive halving) over
  the same space.

SMAC3 and the script run every config through knobtune's own target (the same settled measurement), after the
default has run at every rung, and under knobtune's time rules: a run may take 3x the default's time at its rung,
and none starts that cannot end inside B. A failed run (refused, crash, timeout, data loss) is a crashed trial
for SMAC, at the cost knobtune gives it (no better than a run that used its whole time limit); the script
prunes it, as such scripts do. Only the search differs. knobtune runs its small rungs scaled (the config's
data-sized knobs at the rung's share of the data); the peers run them as the config is, as their users would,
unless ``--peers-scaled-rungs``.

Then the arms' winners and the default are measured side by side by one ``knobtune compare`` per seed (5
interleaved full-size runs each). Recorded per tool and seed: the verified speedup with its 95% CI, the tool's
own claim, its trials and runs, when it reached 95% of its final best, and the unsafe values its winner holds.

    .venv/bin/python -m pip install -e ".[bench]"      # SMAC3 and matplotlib
    .venv/bin/python bench/peers.py --budget 10m --seeds 1 2 3 --out peers.json   # the suite's: bench/run.py peers
    .venv/bin/python bench/peers.py --budget 10m --seeds 1 2 3 \
        --tools knobtune knobtune-alone rules-random smac smac-starts optuna --out arms.json
    .venv/bin/python bench/peers.py --table bench/results/peers/DAY-COMMIT.json
    .venv/bin/python bench/peers.py --plot bench/results/peers/DAY-COMMIT.json peers.png
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import shlex
import statistics
import tempfile
import time
import tomllib
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
from optuna.trial import TrialState

import handwritten_optuna
from _cli import (
    as_speedups, best_so_far, emit, first_reached_s, interval, knobtune_json, result_path, study_timeline,
    verified_speedup,
)
from knobtune.analysis import speedup
from knobtune.analysis.diagnosis import diagnose
from knobtune.errors import KnobtuneError
from knobtune.knobs import Catalog, Knob, KnobType, Value, load_catalog
from knobtune.units import parse_duration_s
from knobtune.storage import open_store
from knobtune.targets import FailureKind, Machine, Measurement, RunFailure, Target
from knobtune.systems import heuristic_config, make_target, resolve_driver
from knobtune.tuning import ExperimentDoc, attrs, build_space
from knobtune.tuning.document import OPTIONS
from knobtune.tuning.search import SPECIAL_SUFFIX, VALUE_CHOICE, Advice, SearchSpace, rules_of
from knobtune.workloads import Rung, Workload, load_workload

TOOLS = ("knobtune", "knobtune-alone", "rules-random", "smac", "smac-starts", "optuna")  # every arm, the table's order
DEFAULT_TOOLS = ("knobtune", "smac", "optuna")  # issue 17's three arms
NAMES = {"knobtune": "knobtune", "knobtune-alone": "knobtune, search alone (--no-rules)",
         "rules-random": "knobtune's rules, then random search", "smac": "SMAC3",
         "smac-starts": "SMAC3 with the rules' starts", "optuna": "hand-written Optuna"}
# an arm of knobtune is a partial experiment document beside the bench's own options (docs/experiment.md)
ARMS = Path(__file__).resolve().parent / "arms"
KNOBTUNE_ARMS: dict[str, Path | None] = {"knobtune": None, "knobtune-alone": ARMS / "knobtune-alone.toml",
                                         "rules-random": ARMS / "rules-random.toml"}
# knobtune's own time rules and halving, as `tune` uses them by default
DEFAULTS = ExperimentDoc()
SMAC_INITIAL_CONFIGS = 10  # random configs before SMAC's forest proposes any: as many as knobtune's TPE starts from
REACHED = 0.95  # "reached its final best": came within 5% of it


@dataclasses.dataclass(frozen=True)
class Bench:
    """What every tool is given: the system, the workload at its size, the search space, the budget."""

    catalog: Catalog
    workload: Workload
    workload_arg: str  # as given on the command line: a shipped workload's name or a workload file
    driver: str
    space: SearchSpace
    budget_s: float
    repeats: int
    home: Path  # the studies folder: knobtune's studies, every run's log, the winners' files
    knobtune_args: tuple[str, ...] = ()  # more options for knobtune's `tune` (--knobtune-args)
    # SMAC3 and the script also run small rungs scaled, as knobtune does (--peers-scaled-rungs)
    peers_scaled: bool = False

    @property
    def maximize(self) -> bool:
        return self.workload.objective.maximize

    def workload_args(self) -> list[str]:
        """The options that give knobtune's commands this bench's workload, size and driver."""
        return ["--workload", self.workload_arg, "--records", str(self.workload.records), "--driver", self.driver]


# ---------------------------------------------------------------- the harness SMAC3 and the script search through


class OutOfTime(Exception):
    """The budget has no room left for the next run: it was not started."""


class Harness:
    """A peer's way to the system: knobtune's own target and time rules, and a record of every run.

    The budget's clock starts with the default's first run. The default runs first at every rung, inside the
    budget (as knobtune's does); then a run may take ``timeout_factor`` times the default's time at its rung, and
    none starts that could not end inside the budget.
    """

    def __init__(self, bench: Bench, tool: str, seed: int, target: Target) -> None:
        self.bench, self.tool, self.seed, self.target = bench, tool, seed, target
        self.started = time.monotonic()
        self.rungs = bench.workload.rungs
        self.space = bench.space.excluding({k: v for k, v in target.impossible_values().items()
                                            if k in bench.space.knobs})
        self.log_dir = bench.home / "artifacts" / f"{tool}-s{seed}"
        self.default: dict[int, Measurement] = {}  # rung index -> the default's run there
        self.runs: list[dict[str, Any]] = []  # each searched config's run: when it ended, its rung, value or failure

    def measure_default(self) -> None:
        """Start the budget's clock and run the default at every rung (the time limits and costs are relative to it).

        Raises:
            RunFailure: the default itself failed (the machine or the workload is at fault).
        """
        self.started = time.monotonic()
        for rung in self.rungs:
            self.default[rung.index] = self.target.run(self.bench.catalog.defaults(), rung,
                                                       timeout_s=self.time_left_s(),
                                                       log_path=self.log_dir / f"default-rung-{rung.index}.log",
                                                       seed=self.seed)

    @contextlib.contextmanager
    def clock_stopped(self) -> Iterator[None]:
        """The time spent inside is not the budget's: a peer's own setup (SMAC's facade, built once the default's
        runs are known), kept out of the budget as it was when it was built before the default ran."""
        stopped = time.monotonic()
        try:
            yield
        finally:
            self.started += time.monotonic() - stopped

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def time_left_s(self) -> float:
        return self.bench.budget_s - self.elapsed_s()

    def limit_s(self, rung: Rung) -> float:
        """How long a run at ``rung`` may take: knobtune's rule, a multiple of the default's time there."""
        measurement = DEFAULTS.measurement
        return max(measurement.timeout_factor * self.default[rung.index].elapsed_s, measurement.min_timeout_s)

    def fits(self, rung: Rung) -> bool:
        return self.time_left_s() >= self.limit_s(rung)

    def config_of(self, params: dict[str, object]) -> dict[str, Value]:
        """The full config knobtune's own ``suggest`` makes of these params (relations mended as knobtune does)."""
        config, _ = self.space.suggest(optuna.trial.FixedTrial(params))
        return config

    def run(self, config: dict[str, Value], rung: Rung) -> float:
        """The objective's value of ``config`` at ``rung``.

        Raises:
            RunFailure: the run failed for the config's sake (refused, crash, timeout, data loss, memory).
            OutOfTime: the run could not end inside the budget; it was not started.
            KnobtuneError: the machine or knobtune failed, never the config's fault.
        """
        if not self.fits(rung):
            raise OutOfTime()
        log = self.log_dir / f"run-{len(self.runs):04d}-rung-{rung.index}.log"
        try:
            as_run = self.bench.catalog.at_fraction(config, rung.fraction) if self.bench.peers_scaled else config
            value = self.target.run(as_run, rung, timeout_s=self.limit_s(rung), log_path=log, seed=self.seed).value(
                self.bench.workload.objective)
        except RunFailure as failure:
            self.runs.append({"at_s": self.elapsed_s(), "rung": rung.index, "failure": failure.kind.value})
            if failure.kind is FailureKind.TOOL:
                raise KnobtuneError(f"{self.tool}: a run failed for a reason that is not the config's: "
                                    f"{failure.reason} (log: {failure.log_path or log})") from None
            raise
        self.runs.append({"at_s": self.elapsed_s(), "rung": rung.index, "value": value})
        return value

    def cost(self, value: float, rung: Rung) -> float:
        """A value as a cost relative to the default at the same rung (1: as good; lower is better)."""
        return 1.0 / self.bench.workload.objective.speedup(value, self.default[rung.index].value(
            self.bench.workload.objective))

    def failed_cost(self, rung: Rung) -> float:
        """The cost of a failed run: knobtune's, no better than a run that used its whole time limit."""
        return max(self.limit_s(rung) / self.default[rung.index].elapsed_s, 1.0)

    def record(self, trials: int, winner: dict[str, Value] | None, claim_value: float | None,
               no_winner: str | None = None) -> dict[str, Any]:
        """What the bench keeps of a peer's search (the same fields as knobtune's record)."""
        objective, full = self.bench.workload.objective, self.rungs[-1]
        default = self.default[full.index].value(objective)
        full_runs = [(r["at_s"], r["value"]) for r in self.runs if r["rung"] == full.index and "value" in r]
        claim = None
        if claim_value is not None:
            ratio = objective.speedup(claim_value, default)
            claim = {"ratio": ratio, "text": f"best single run {objective.show(claim_value)} vs the default's "
                                             f"{objective.show(default)}: {ratio:.2f}x"}
        return tool_record(self.bench, self.tool, self.seed, wall_s=self.elapsed_s(), default_value=default,
                           trials=trials, runs=len(self.runs),
                           outcomes={"runs": dict(Counter(r.get("failure", "ran") for r in self.runs))},
                           timeline=best_so_far(full_runs, self.bench.maximize), winner=winner, claim=claim,
                           no_winner=no_winner)


@contextlib.contextmanager
def harness(bench: Bench, tool: str, seed: int) -> Iterator[Harness]:
    """A Harness around knobtune's target for the bench's system, in the studies folder's scratch; closed after."""
    store = open_store(bench.home)
    with make_target(bench.catalog, bench.workload, store.worker_scratch(), bench.driver) as target:
        yield Harness(bench, tool, seed, target)


def tool_record(bench: Bench, tool: str, seed: int, *, wall_s: float, default_value: float, trials: int, runs: int,
                outcomes: dict[str, int], timeline: list[tuple[float, float]], winner: dict[str, Value] | None,
                claim: dict[str, Any] | None, no_winner: str | None) -> dict[str, Any]:
    """One tool's result for one seed, as plain data; ``outcomes`` counts knobtune's trials or a peer's runs."""
    catalog = bench.catalog
    return {"tool": tool, "seed": seed, "wall_s": round(wall_s, 1), "default_value": default_value,
            "maximize": bench.maximize, "trials": trials, "runs": runs, "outcomes": outcomes,
            "timeline": timeline, "reached_s": first_reached_s(timeline, REACHED, bench.maximize),
            "claim": claim, "winner": catalog.changed(winner) if winner is not None else None,
            "no_winner": no_winner,
            "unsafe": {k: v.value for k, v in catalog.unsafe_in(winner).items()} if winner is not None else {}}


# ---------------------------------------------------------------- knobtune


def run_knobtune(bench: Bench, seed: int, tool: str = "knobtune") -> dict[str, Any]:
    """One ``knobtune tune`` as a user runs it, with the arm's document (``KNOBTUNE_ARMS``); its winner is its
    verified result (the default when it keeps it)."""
    study = f"{tool}-s{seed}"
    arm = KNOBTUNE_ARMS[tool]
    arm_args = ("--experiment", str(arm)) if arm else ()
    started = time.monotonic()
    summary = knobtune_json("tune", bench.catalog.system, *bench.workload_args(), "--time", f"{bench.budget_s:g}s",
                            "--seed", str(seed), "--study", study, *bench.knobtune_args, *arm_args,
                            *(["--allow-unsafe"] if bench.space.allow_unsafe else []), home=bench.home)
    wall_s = time.monotonic() - started
    stored = optuna.load_study(study_name=study, storage=f"sqlite:///{bench.home / 'studies.db'}")
    sampled = [t for t in stored.get_trials(deepcopy=False) if not attrs.is_default(t.user_attrs)]
    runs = sum(key.startswith(attrs.RUNG_PREFIX) for t in sampled for key in t.user_attrs)  # reused rungs counted too
    verified = verified_speedup(summary)
    won = bool(verified and verified["won"])
    claim = {"ratio": verified["ratio"] if won else None, "text": summary["verdict"]}
    record = tool_record(bench, tool, seed, wall_s=wall_s, default_value=summary["default_value"],
                         trials=len(sampled), runs=runs, outcomes={"trials": summary["counts"]},
                         timeline=study_timeline(bench.home, study, bench.maximize),
                         winner=bench.catalog.config(summary["result_config"]), claim=claim,
                         no_winner=None if won else "it keeps the default (measured again as an A/A check)")
    started_from = [t.user_attrs[attrs.STARTED_FROM] for t in sampled if attrs.STARTED_FROM in t.user_attrs]
    return record | {"study": study, "tune_args": [*bench.knobtune_args, *arm_args], "started_from": started_from,
                     "time_spent": summary.get("time_spent")}


# ---------------------------------------------------------------- SMAC3


def import_smac() -> SimpleNamespace:
    """The SMAC3 and ConfigSpace modules the bench needs.

    Raises:
        SystemExit: SMAC3 is not installed; says how to install it.
    """
    try:
        import ConfigSpace
        import smac
        from smac.runhistory.dataclasses import TrialValue
        from smac.runhistory.enumerations import StatusType
    except ImportError:
        raise SystemExit('SMAC3 is not installed. Fix: .venv/bin/python -m pip install -e ".[bench]"') from None
    return SimpleNamespace(cs=ConfigSpace, smac=smac, TrialValue=TrialValue, StatusType=StatusType)


def offered(space: SearchSpace, knob: Knob) -> list[Value]:
    """The values knobtune's search offers a bool or enum knob: unsafe ones only if allowed, none refused here."""
    values: list[Value] = [False, True] if knob.type is KnobType.BOOL else list(knob.choices)
    return [v for v in values if (space.allow_unsafe or not knob.is_unsafe(v))
            and v not in space.impossible.get(knob.name, ())]


def configspace_of(space: SearchSpace, seed: int) -> tuple[Any, dict[str, dict[str, Value]]]:
    """knobtune's search space as a ConfigSpace, and for each categorical hyperparameter its items' knob values.

    Each Optuna param knobtune's ``suggest`` may ask for becomes a hyperparameter of the same name, range and scale
    (a special value is a choice ``<knob>.special`` with the number conditional on ``value``). A knob's conditions
    become conditions on the searched knobs they name; a condition on a knob that is not searched (or has one value
    left) holds or fails once, as it does in knobtune. Relations and implications are not expressed: knobtune's own
    ``suggest`` mends them after sampling, for SMAC as for knobtune's own sampler.

    Raises:
        SystemExit: a condition names a numeric knob (none of the shipped catalogs has one).
    """
    cs = import_smac().cs
    catalog, defaults = space.catalog, space.catalog.defaults()
    hyperparameters: dict[str, Any] = {}  # param name -> hyperparameter
    items: dict[str, dict[str, Value]] = {}  # categorical param -> item label -> the knob's value
    conditions: list[Any] = []
    fixed: dict[str, Value] = {}  # knobs searched with a single value left: what knobtune's suggest returns for them

    def categorical(name: str, values: list[Value], default: Value) -> Any:
        items[name] = {str(v): v for v in values}
        hyperparameters[name] = cs.Categorical(name, list(items[name]), default=str(default if default in values
                                                                                      else values[0]))
        return hyperparameters[name]

    for name in space.knobs:
        knob = catalog.knobs[name]
        values = offered(space, knob) if knob.type in (KnobType.BOOL, KnobType.ENUM) else None
        if values is not None and len(values) < 2:
            fixed[name] = values[0]
            continue
        parents = []
        for condition in knob.conditions:
            if condition.knob in hyperparameters:
                if catalog.knobs[condition.knob].is_numeric:
                    raise SystemExit(f"knob '{name}' is conditional on numeric knob '{condition.knob}', which this "
                                     "bench cannot express in ConfigSpace. Fix: leave one of them out")
                labels = [label for label, value in items[condition.knob].items() if value in condition.values]
                parents.append((condition.knob, labels))
            elif fixed.get(condition.knob, defaults[condition.knob]) in condition.values:
                continue  # holds whatever is sampled
            else:
                parents.append((condition.knob, []))  # never holds: knobtune never asks for the knob
        if any(not labels for _, labels in parents):
            continue
        if values is not None:
            first = last = categorical(name, values, knob.default)
        else:
            last = _numeric(cs, knob)
            hyperparameters[name] = first = last
            if knob.special and knob.search_special:
                first = categorical(name + SPECIAL_SUFFIX, [VALUE_CHOICE, *map(str, knob.special)],
                                    str(knob.default) if knob.default in knob.special else VALUE_CHOICE)
                conditions.append(cs.EqualsCondition(last, first, VALUE_CHOICE))
        checks = [cs.InCondition(first, hyperparameters[parent], labels) for parent, labels in parents]
        if checks:
            conditions.append(checks[0] if len(checks) == 1 else cs.AndConjunction(*checks))
    space_cs = cs.ConfigurationSpace(seed=seed)
    space_cs.add(list(hyperparameters.values()))
    space_cs.add(conditions)
    return space_cs, items


def _numeric(cs: Any, knob: Knob) -> Any:
    low, high = knob.min, knob.max
    if knob.type in (KnobType.FLOAT, KnobType.DURATION):
        default = float(knob.default) if low <= knob.default <= high else None
        return cs.Float(knob.name, (float(low), float(high)), log=knob.log, default=default)
    default = int(knob.default) if low <= knob.default <= high else None
    return cs.Integer(knob.name, (int(low), int(high)), log=knob.log, default=default)


def params_of(configuration: Any, items: dict[str, dict[str, Value]]) -> dict[str, object]:
    """A SMAC configuration as the Optuna params knobtune's ``suggest`` reads (categorical labels back to values)."""
    params: dict[str, object] = {}
    for name, value in dict(configuration).items():
        if name in items:
            params[name] = items[name][str(value)]
        else:
            params[name] = float(value) if isinstance(value, float) else int(value)
    return params


def check_configspace(space: SearchSpace, space_cs: Any, items: dict[str, dict[str, Value]],
                      samples: int = 200) -> None:
    """Sampled SMAC configs must be exactly what knobtune's ``suggest`` asks for: the same params, all in range.

    Raises:
        SystemExit: the translation differs from knobtune's space (a bug of this bench); names the param.
    """
    for configuration in space_cs.sample_configuration(samples):
        params = params_of(configuration, items)
        trial = optuna.trial.FixedTrial(params)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # FixedTrial warns of a value outside knobtune's distribution
            try:
                space.suggest(trial)
            except (ValueError, UserWarning) as exc:
                raise SystemExit(f"the ConfigSpace differs from knobtune's space: {exc}") from None
        if set(trial.params) != set(params):
            raise SystemExit(f"the ConfigSpace differs from knobtune's space: it sets "
                             f"{sorted(set(params) - set(trial.params))} where knobtune asks for "
                             f"{sorted(set(trial.params) - set(params))}")


def rules_starts(h: Harness) -> tuple[list[str], list[tuple[str, dict[str, Value]]]]:
    """The rules fired on the default's full-size run in ``h`` and the starts ``tune`` would queue from them
    (``tuning.search.guide.Advice``), each as a full config within the harness's space; as ``tune`` queues them,
    none that the space makes the default or an earlier start (values it keeps out go back to their defaults)."""
    catalog, full = h.bench.catalog, h.default[h.rungs[-1].index]
    rules = rules_of(catalog.system)
    if not rules:
        return [], []
    shape = {**h.target.workload_facts().shape(), "workload_s": full.workload_s}
    found = diagnose(rules, full.counters, shape, catalog.defaults())
    seen = [h.space.params_of(catalog.defaults())]
    starts = []
    for label, changed in Advice(h.space, None, print).starts(found.findings, catalog.defaults()):
        config = h.space.within(catalog.config(changed))
        if h.space.params_of(config) not in seen:
            seen.append(h.space.params_of(config))
            starts.append((label, config))
    return [f.rule for f in found.findings], starts


def configuration_of(space_cs: Any, items: dict[str, dict[str, Value]], params: dict[str, object]) -> Any:
    """Optuna params knobtune's ``suggest`` reads (``SearchSpace.params_of``) as a ConfigSpace configuration: the
    inverse of ``params_of`` above.

    Raises:
        ValueError: the ConfigSpace cannot hold a value (names the param and the value).
    """
    cs = import_smac().cs
    values: dict[str, object] = {}
    for name, value in params.items():
        if name not in space_cs:
            raise ValueError(f"{name} = {value!r}: SMAC's space has no {name}")
        if name in items:
            if str(value) not in items[name]:
                raise ValueError(f"{name} = {value!r}: not one of SMAC's choices {list(items[name])}")
            values[name] = str(value)
        elif isinstance(space_cs[name], cs.hyperparameters.FloatHyperparameter):
            values[name] = float(value)
        else:
            values[name] = int(value)
    return cs.Configuration(space_cs, values=values)


def smac_starts(h: Harness, space_cs: Any, items: dict[str, dict[str, Value]]) -> tuple[list[Any], dict[str, Any]]:
    """The rules' starts (``rules_starts``) as configurations of SMAC's space, and what the record keeps of them:
    the rules fired, each start given (its changed knobs as SMAC's space makes it) and each left out, with why."""
    fired, starts = rules_starts(h)
    given, record = [], {"fired": fired, "given": [], "left_out": [], "rungs_asked": {}}
    for label, config in starts:
        try:
            configuration = configuration_of(space_cs, items, h.space.params_of(config))
        except ValueError as exc:
            print(f"smac-starts: start {label} is left out: {exc}", flush=True)
            record["left_out"].append({"label": label, "changed": h.bench.catalog.changed(config), "why": str(exc)})
            continue
        configuration.origin = f"rules: {label}"
        given.append(configuration)
        record["given"].append({"label": label,
                                "changed": h.bench.catalog.changed(h.config_of(params_of(configuration, items)))})
    return given, record


def _asked_and_told(config: Any, seed: int = 0, budget: float | None = None) -> float:
    """SMAC's facade wants a target function; this bench runs SMAC by ask and tell instead."""
    raise RuntimeError("SMAC runs through ask and tell here")


def run_smac(bench: Bench, seed: int, tool: str = "smac") -> dict[str, Any]:
    """SMAC3's multi-fidelity facade (random forest, Hyperband), asked and told, every run through the harness;
    as ``smac-starts``, its initial design also holds the rules' starts (``smac_starts``).

    The facade is built once the default has run at every rung (the starts are read from its full-size run), with
    the budget's clock stopped: SMAC's setup stays outside the budget, as it was when built before the default.
    SMAC's own clock is not used (no walltime limit; the harness decides what fits).

    Its winner is its best full-size run, as for the script (and as knobtune's candidates are): SMAC's own
    incumbent may be a config it has seen only at a smaller budget, or one whose later full-size run was worse
    (its "highest observed budget" rule); the record says whether the two agree.
    """
    sm = import_smac()
    eta = DEFAULTS.search.reduction_factor
    with harness(bench, tool, seed) as h:
        space_cs, items = configspace_of(h.space, seed)
        check_configspace(h.space, space_cs, items)
        rung_of = {float(eta ** rung.index): rung for rung in h.rungs}  # Hyperband's budgets 1, eta, eta^2, ...
        scenario = sm.smac.Scenario(space_cs, name=f"{tool}-s{seed}", output_directory=bench.home / "smac",
                                    deterministic=True, n_trials=1_000_000, seed=seed,
                                    min_budget=min(rung_of), max_budget=max(rung_of))
        h.measure_default()
        additional, starts = smac_starts(h, space_cs, items) if tool == "smac-starts" else ([], None)
        with h.clock_stopped():
            facade = sm.smac.MultiFidelityFacade
            optimizer = facade(scenario, _asked_and_told, overwrite=True, logging_level=40,
                               initial_design=facade.get_initial_design(scenario, n_configs=SMAC_INITIAL_CONFIGS,
                                                                        additional_configs=additional),
                               intensifier=facade.get_intensifier(scenario, eta=eta))
        extra = {} if starts is None else {"smac_starts": starts}
        asked, full_values = set(), {}
        while h.fits(h.rungs[0]):
            with warnings.catch_warnings():  # SMAC's local search logs the mean time of an empty list of its steps
                warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
                warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
                info = optimizer.ask()
            rung = rung_of.get(float(info.budget))
            if rung is None:
                raise SystemExit(f"SMAC asked for budget {info.budget}, not a rung of the ladder ({sorted(rung_of)})")
            asked.add(info.config)
            if starts is not None and str(info.config.origin).startswith("rules: "):  # which rungs each start ran
                starts["rungs_asked"].setdefault(str(info.config.origin)[len("rules: "):], []).append(rung.index)
            started = time.monotonic()
            try:
                value = h.run(h.config_of(params_of(info.config, items)), rung)
            except RunFailure:
                told = sm.TrialValue(cost=h.failed_cost(rung), time=time.monotonic() - started,
                                     status=sm.StatusType.CRASHED)
            except OutOfTime:
                break
            else:
                told = sm.TrialValue(cost=h.cost(value, rung), time=time.monotonic() - started)
                if rung is h.rungs[-1]:
                    full_values[info.config] = value
            optimizer.tell(info, told)
        incumbent = optimizer.intensifier.get_incumbent()
        if not full_values:
            return h.record(len(asked), None, None, "no config reached full size") | extra
        best = (max if bench.maximize else min)(full_values, key=full_values.get)
        return h.record(len(asked), h.config_of(params_of(best, items)), full_values[best]) | extra | {
            "smac_incumbent": "its best full-size run" if incumbent == best else
            "another config" + (f" (full size: {bench.workload.objective.show(full_values[incumbent])})"
                                if incumbent in full_values else ", never run at full size")}


# ---------------------------------------------------------------- the hand-written Optuna script


def run_optuna(bench: Bench, seed: int) -> dict[str, Any]:
    """The hand-written script's search (random sampling, successive halving) over knobtune's space and runs."""
    with harness(bench, "optuna", seed) as h:
        h.measure_default()

        def run(config: dict[str, Value], step: int) -> float:
            try:
                return h.run(config, h.rungs[step])
            except RunFailure:
                raise handwritten_optuna.RunFailed() from None
            except OutOfTime:
                raise handwritten_optuna.OutOfTime() from None

        study = handwritten_optuna.search(lambda trial: h.space.suggest(trial)[0], run, len(h.rungs),
                                          h.time_left_s(), seed, "maximize" if bench.maximize else "minimize")
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not complete:
            return h.record(len(study.trials), None, None, "no trial reached full size")
        best = study.best_trial
        return h.record(len(study.trials), h.config_of(best.params), best.value)


# ---------------------------------------------------------------- verification of the winners, side by side


def verify(bench: Bench, seed: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``knobtune compare`` of the default and every tool's winner, interleaved; each record gets its figures."""
    folder = bench.home / f"winners-s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for record in records:
        if record.get("winner") is not None:
            files[record["tool"]] = folder / f"{record['tool'].replace('@', '-')}.json"
            files[record["tool"]].write_text(json.dumps(record["winner"], indent=1) + "\n")
    if not files:
        return {"seed": seed, "note": "no tool has a winner to verify"}
    configs = [arg for path in files.values() for arg in ("--config", str(path))]
    try:
        comparison = knobtune_json("compare", bench.catalog.system, *bench.workload_args(), "--repeats",
                                   str(bench.repeats), "--seed", str(seed), "--config", "default", *configs,
                                   home=bench.home)
    except SystemExit as exc:
        return {"seed": seed, "error": str(exc)}
    measured = {c["label"]: c for c in comparison["candidates"]}
    values = {tool: measured[str(path)] for tool, path in files.items()}
    for record in records:
        candidate = values.get(record["tool"])
        if candidate is None:
            continue
        record["verified"] = ({"failure": candidate["failure"] or "no speedup measured"}
                              if candidate["failure"] or not candidate.get("speedup")
                              else {k: candidate["speedup"][k] for k in ("ratio", "ci_low", "ci_high", "p_value")}
                              | {"significant": candidate["significant"]})
    pairs = {}
    order = sorted(values, key=_rank)  # the arms in TOOLS' order, then earlier winners and known configs
    for better, other in [(a, b) for i, a in enumerate(order) for b in order[i + 1:]]:
        a, b = values.get(better), values.get(other)
        if a and b and a["values"] and b["values"] and not a["failure"] and not b["failure"]:
            pairs[f"{better} over {other}"] = vars(speedup(b["values"], a["values"], bench.maximize, seed=seed))
    default = measured["default"]
    return {"seed": seed, "repeats": bench.repeats, "noise_cv": comparison["noise_cv"],
            "default_median": default["median"], "files": {k: str(v) for k, v in files.items()}, "pairwise": pairs,
            "verified": {r["tool"]: r["verified"] for r in records if "verified" in r}}  # earlier winners' too


# ---------------------------------------------------------------- the table and the plot


def _rank(tool: str) -> int:
    return TOOLS.index(tool) if tool in TOOLS else len(TOOLS)


def _shown(tool: str) -> str:
    """An arm's name as the table writes it; an earlier result's winner as ``NAME (earlier)``."""
    name, at, source = tool.partition("@")
    return NAMES.get(name, name) + (f" ({source})" if at else "")


def table(data: dict[str, Any]) -> str:
    """A result as a Markdown table: per tool the median over seeds, then each seed's figures."""
    rows = ["| tool | verified speedup vs the default: median (per seed, 95% CI; n.s.: within the noise) | "
            "its own claim per seed | "
            "trials / runs per seed | time to 95% of its final best: median (per seed) | unsafe values in its winner |",
            "|---|---|---|---|---|---|"]
    known = [r["tool"] for r in data["results"] if r["tool"] not in TOOLS]
    for tool in [*TOOLS, *dict.fromkeys(known)]:  # the tools, then known configs verified beside them
        records = [r for r in data["results"] if r["tool"] == tool]
        if not records:
            continue
        verified = [v for r in records if "ratio" in (v := r.get("verified") or {})]
        median = f"**{statistics.median(v['ratio'] for v in verified):.2f}x**" if verified else "none"
        if verified and len(verified) < len(records):
            median += f" of {len(verified)} seeds"
        per_seed = "; ".join(_verified(r) for r in records)
        claims = "; ".join(_claim(r) for r in records)
        counts = "; ".join(f"{r['trials']} / {r['runs']}" if "trials" in r else "-" for r in records)
        reached = [r["reached_s"] for r in records if r.get("reached_s") is not None]
        times = "; ".join(f"{r['reached_s']:.0f} s" if r.get("reached_s") is not None else "-" for r in records)
        unsafe = "; ".join((", ".join(f"{k} ({v})" for k, v in r["unsafe"].items()) or "none") if "unsafe" in r
                           else "-" for r in records)
        rows.append(f"| {NAMES.get(tool, tool)} | {median} ({per_seed}) | {claims} | {counts} | "
                    f"{f'{statistics.median(reached):.0f} s' if reached else '-'} ({times}) | {unsafe} |")
    again: dict[str, list[dict]] = {}  # winners of an earlier result, measured again beside this run's (--beside)
    for seed in data["verification"]:
        for tool, v in (seed.get("verified") or {}).items():
            if "@" in tool:
                again.setdefault(tool, []).append(v | {"seed": seed["seed"]})
    for tool, measured in again.items():
        ratios = [v["ratio"] for v in measured if "ratio" in v]
        name, _, source = tool.partition("@")
        rows.append(f"| {NAMES.get(name, name)}, {source} winners measured again here | "
                    f"{f'**{statistics.median(ratios):.2f}x**' if ratios else 'none'} ("
                    + "; ".join(f"seed {v['seed']}: " + _verified({"verified": v}) for v in measured) + ") | - | - | - "
                                                                                                        "| - |")
    pairs: dict[str, list[str]] = {}
    for seed in data["verification"]:
        for name, s in (seed.get("pairwise") or {}).items():
            pairs.setdefault(name, []).append(
                f"seed {seed['seed']}: {interval(s)}")
    lines = [f"- {' over '.join(map(_shown, name.split(' over ')))}: {'; '.join(v)}" for name, v in pairs.items()]
    starts = [line for r in data["results"] if (line := _starts(r))]
    return "\n".join(rows + ([""] + ["Side by side, same interleaved runs:"] + lines if lines else [])
                     + ([""] + ["Starts from the rules:"] + starts if starts else []))


def _starts(record: dict[str, Any]) -> str | None:
    """One line saying which starts an arm was given (knobtune's arms: what its study tried first)."""
    where = f"- {_shown(record['tool'])}, seed {record['seed']}: "
    if "started_from" in record:
        return where + f"tried first: {', '.join(record['started_from']) or 'none'}"
    if "smac_starts" in record:
        given = record["smac_starts"]
        asked = given.get("rungs_asked", {})
        return (where + f"rules fired: {', '.join(given['fired']) or 'none'}; given: "
                + (", ".join(f"{s['label']} (asked at rungs {asked.get(s['label'], [])})" for s in given["given"])
                   or "none")
                + "".join(f"; left out {s['label']}: {s['why']}" for s in given["left_out"]))
    return None


def _claim(record: dict[str, Any]) -> str:
    claim = record.get("claim")
    if not claim:
        return "none"
    if claim["ratio"] is None:
        return "keeps the default"
    return f"{claim['ratio']:.2f}x" + (" verified" if record["tool"] in KNOBTUNE_ARMS else " single run")


def _verified(record: dict[str, Any]) -> str:
    verified = record.get("verified")
    if record.get("error"):
        return f"seed {record['seed']}: error"
    if not verified:
        return f"seed {record['seed']}: {record.get('no_winner') or 'not verified'}"
    if "failure" in verified:
        return f"seed {record['seed']}: failed ({verified['failure'][:60]})"
    mark = "" if verified["significant"] else (" worse" if verified["ci_high"] < 1 else " n.s.")
    kept = ", the default again (A/A)" if record.get("winner") == {} else ""
    return f"{interval(verified)}{mark}{kept}"


def plot(path: Path, out: Path) -> None:
    """Each tool's best full-size single run over its own default's, over time; its verified speedup (95% CI)
    at its end."""
    from _plot import plot_best_over_time

    data = json.loads(path.read_text())
    lines = []
    for record in data["results"]:
        if "timeline" not in record:
            continue
        verified = record.get("verified") or {}
        end = ((record["wall_s"], verified["ratio"], verified["ci_low"], verified["ci_high"]) if "ratio" in verified
               else None)
        lines.append({"arm": NAMES[record["tool"]], "end": end,
                      "points": as_speedups(record["timeline"], record["default_value"], record["maximize"])})
    plot_best_over_time(lines, out, ylabel="best full-size speedup so far (dot: verified, 95% CI)",
                        title=f"{data['system']} {data['workload']}, {data['records']:,} records, {data['budget']} "
                              f"per tool, {len(data['seeds'])} seed(s)")
    print(f"wrote {out}")


# ---------------------------------------------------------------- main


RUNNERS: dict[str, Callable[[Bench, int], dict[str, Any]]] = {
    "knobtune": run_knobtune, "knobtune-alone": functools.partial(run_knobtune, tool="knobtune-alone"),
    "rules-random": functools.partial(run_knobtune, tool="rules-random"), "smac": run_smac,
    "smac-starts": functools.partial(run_smac, tool="smac-starts"), "optuna": run_optuna}


def earlier_winners(path: Path, seed: int) -> list[dict[str, Any]]:
    """The winners an earlier result found at ``seed``, as records named ``TOOL@earlier`` (verified again beside
    this run's, never searched again)."""
    data = json.loads(path.read_text())
    return [{"tool": f"{r['tool']}@earlier", "seed": seed, "winner": r["winner"], "from": str(path)}
            for r in data["results"] if r.get("seed") == seed and r.get("winner") is not None]


def known_config(system: str, name: str, seed: int) -> dict[str, Any]:
    """A known config of the system (``knobtune baseline SYSTEM --name NAME``) as a record named ``NAME``: verified
    beside the winners, never searched."""
    known = heuristic_config(system, Machine.from_host(), None, name)
    return {"tool": name, "seed": seed, "winner": dict(known.config), "from": "knobtune baseline"}


def make_bench(args: argparse.Namespace, home: Path) -> Bench:
    catalog = load_catalog(args.system)
    workload = load_workload(args.workload)
    workload = workload.scaled(args.records) if args.records else workload
    driver = resolve_driver(catalog.system, args.driver)
    space = build_space(catalog, allow_unsafe=args.allow_unsafe, driver=driver)
    return Bench(catalog, workload, args.workload, driver, space, parse_duration_s(args.budget), args.repeats, home,
                 tuple(shlex.split(args.knobtune_args)), args.peers_scaled_rungs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--driver", help="benchmark driver (default: the system's)")
    parser.add_argument("--records", type=int, help="the workload's full size (default: its own)")
    parser.add_argument("--budget", default="10m", help="wall-clock budget of each tool, e.g. 90s, 10m")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(DEFAULT_TOOLS),
                        help="the arms to run, each its own search (default: knobtune smac optuna; see above)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per winner when verifying")
    parser.add_argument("--allow-unsafe", action="store_true", help="every tool also searches unsafe values")
    parser.add_argument("--knobtune-args", default="",
                        help="more options for knobtune's `tune`, e.g. '--sampler random'; one starting with -- "
                             "needs '=': --knobtune-args=--allow-operational")
    parser.add_argument("--peers-scaled-rungs", action="store_true",
                        help="SMAC3 and the script run small rungs with data-sized knobs scaled, as knobtune does")
    parser.add_argument("--beside", type=Path, action="append", default=[], metavar="RESULT",
                        help="an earlier result: its winners at each seed are verified again beside this run's")
    parser.add_argument("--known", nargs="+", default=[], metavar="NAME",
                        help="known configs verified beside the winners, e.g. rocksdb-guide db-bench-universal")
    parser.add_argument("--dir", type=Path, help="studies folder (default: a new temporary one)")
    parser.add_argument("--out", type=Path, help="write the result as JSON here (after every step)")
    parser.add_argument("--table", type=Path, metavar="RESULT", help="print a result file's Markdown table")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RESULT",
                        help="join result files of the same bench run at other seeds into --out")
    parser.add_argument("--plot", nargs=2, type=Path, metavar=("RESULT", "PNG"),
                        help="draw a result file's best speedup over time into a PNG")
    args = parser.parse_args()
    if args.merge:
        emit(merge([json.loads(p.read_text()) for p in args.merge]), args.out)
        return
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if args.plot:
        plot(*args.plot)
        return
    refuse_conflicts(args.tools, shlex.split(args.knobtune_args))
    if {"smac", "smac-starts"} & set(args.tools):
        import_smac()  # before anything runs: a missing SMAC3 is said at once
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-bench-peers-"))
    bench = make_bench(args, home)
    result: dict[str, Any] = {
        "system": bench.catalog.system, "workload": bench.workload.name, "records": bench.workload.records,
        "driver": bench.driver, "budget": args.budget, "seeds": args.seeds, "repeats": args.repeats,
        "allow_unsafe": args.allow_unsafe, "knobtune_args": args.knobtune_args,
        "peers_scaled_rungs": args.peers_scaled_rungs,
        "beside": [str(p) for p in args.beside], "known": args.known, "searched_knobs": list(bench.space.knobs),
        "home": str(home),
        "smac_budgets": {DEFAULTS.search.reduction_factor ** r.index: r.records for r in bench.workload.rungs},
        "results": [], "verification": []}
    chosen = [t for t in TOOLS if t in args.tools]
    for turn, seed in enumerate(args.seeds):
        tools = chosen[turn % len(chosen):] + chosen[:turn % len(chosen)]
        seed_records = []
        for tool in tools:
            print(f"== {NAMES[tool]}, seed {seed}, {args.budget}", flush=True)
            try:
                record = RUNNERS[tool](bench, seed)
            except (Exception, SystemExit) as exc:  # one tool's failure leaves the others to run; it is recorded
                record = {"tool": tool, "seed": seed, "error": f"{type(exc).__name__}: {exc}"}
            seed_records.append(record)
            result["results"].append(record)
            _save(result, args.out)
        earlier = [r for path in args.beside for r in earlier_winners(path, seed)]
        known = [known_config(bench.catalog.system, name, seed) for name in args.known]
        result["verification"].append(verify(bench, seed, seed_records + earlier + known))
        result["results"] += known  # with their verified figures: rows of the table
        _save(result, args.out)
    emit(result, args.out)


def refuse_conflicts(tools: list[str], knobtune_args: list[str]) -> None:
    """Refuse ``--knobtune-args`` that undo a knobtune arm's own options (the arm would not be what it is named).

    Raises:
        SystemExit: names the arm and the option.
    """
    for tool in tools:
        arm = KNOBTUNE_ARMS.get(tool)
        if arm is None:
            continue
        fields = {f"{section}.{name}" for section, values in tomllib.loads(arm.read_text()).items()
                  for name in values}
        setting = {option for option, (field, _rule) in OPTIONS.items() if field in fields} | {"--experiment"}
        for option in setting:
            if any(arg == option or arg.startswith(option + "=") for arg in knobtune_args):
                raise SystemExit(f"--knobtune-args gives {option}, which arm {tool} sets itself "
                                 f"({arm.relative_to(ARMS.parent.parent)}: {', '.join(sorted(fields))}). "
                                 f"Fix: drop it from --knobtune-args, or leave {tool} out of --tools")


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Results of one bench at different seeds as one (their settings must agree).

    Raises:
        SystemExit: the parts differ in system, workload, size, budget, repeats or knobtune's options, or a seed
            appears twice.
    """
    same = ("system", "workload", "records", "driver", "budget", "repeats", "allow_unsafe", "knobtune_args")
    first = parts[0]
    for part in parts[1:]:
        differing = [k for k in same if part.get(k, "") != first.get(k, "")]
        if differing:
            raise SystemExit(f"cannot merge: the results differ in {', '.join(differing)}")
    seeds = [s for part in parts for s in part["seeds"]]
    if len(seeds) != len(set(seeds)):
        raise SystemExit(f"cannot merge: a seed appears twice ({seeds})")
    return {**first, "seeds": seeds, "home": [p["home"] for p in parts],
            "results": [r for p in parts for r in p["results"]],
            "verification": [v for p in parts for v in p["verification"]]}


def _save(result: dict[str, Any], out: Path | None) -> None:
    """The result so far (no provenance yet: ``emit`` adds it at the end)."""
    path = result_path(out)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
