"""SMAC3 as a peer of bench/peers.py: its multi-fidelity facade over knobtune's own search space, asked and told.

knobtune's space becomes a ConfigSpace (``configspace_of``, checked against knobtune's ``suggest`` by
``check_configspace``); SMAC's budgets 1, 3, 9 are the ladder's rungs; every run goes through the harness
(``peer_harness.Harness``). As ``smac-starts``, SMAC's initial design also holds the starts knobtune's rules would
queue (``rules_starts``).
"""

from __future__ import annotations

import time
import warnings
from types import SimpleNamespace
from typing import Any

import optuna

from knobtune.analysis.diagnosis import diagnose
from knobtune.knobs import Knob, KnobType, Value
from knobtune.targets import RunFailure
from knobtune.tuning.search import SPECIAL_SUFFIX, VALUE_CHOICE, Advice, SearchSpace, rules_of
from peer_harness import DEFAULTS, Bench, Harness, OutOfTime, harness

SMAC_INITIAL_CONFIGS = 10  # random configs before SMAC's forest proposes any: as many as knobtune's TPE starts from


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
