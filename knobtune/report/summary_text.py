"""A study's summary as text a person reads: one renderer per section of ``StudySummary``, in the order ``show``
and the end of ``tune`` print them (``summary_lines``); the report's HTML reuses the lines of a few.

A renderer returns rich renderables: a ``Text`` per line (styled where the console colours it, never parsed as
markup) or a ``Table``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from knobtune.knobs import Catalog
from knobtune.knobs.display import knob_value, same_behaviour
from knobtune.units import human_bytes
from knobtune.report.sections import (
    Bottleneck, Costs, Default, Heading, Proof, Ranked, Replay, Result, Safety, StudySummary, Trials,
)
from knobtune.tuning.search import left_out_line
from knobtune.workloads import Objective
from knobtune.workloads.capture import CaptureSummary


def summary_lines(summary: StudySummary, catalog: Catalog) -> list[RenderableType]:
    """The whole summary: each section's renderer in turn."""
    s, objective = summary, summary.objective
    return [*heading_lines(s.heading), *proof_lines(s.proof), *replay_lines(s.replay, s.default, s.cost, s.trials),
            *trials_lines(s.trials), *default_lines(s.default, objective), *result_lines(s.result, objective, catalog),
            *map(Text, cost_lines(s.cost, s.default)), *bottleneck_lines(s.bottleneck), *ranked_lines(s.ranked),
            *safety_lines(s.safety, catalog)]


def heading_lines(heading: Heading) -> list[RenderableType]:
    """``study pgd: rocksdb / put-get-delete, objective elapsed_s (lower is better)``."""
    line = Text(f"study {heading.study}", style="bold")
    line.append(f": {heading.system} / {heading.workload}, objective {heading.objective.value} "
                f"({'higher' if heading.objective.maximize else 'lower'} is better)")
    return [line]


def proof_lines(proof: Proof) -> list[RenderableType]:
    """The verdict, first: the verified figure (single runs come below it, said as single runs)."""
    return [Text(f"verdict: {proof.verdict}", style="bold green" if proof.verified else "bold yellow")]


def replay_lines(replay: Replay, default: Default, cost: Costs | None = None,
                 trials: Trials | None = None) -> list[RenderableType]:
    lines = capture_lines(replay.capture, default.default_counters)
    measured = (cost.costs.get("default") if cost else None) or {}
    spent = trials.time_spent if trials else None
    if lines and measured.get("workload_s") is not None:
        run_s = measured["workload_s"] + (measured.get("settle_s") or 0.0)
        held = (f"; the budget of {spent.budget_s:,.0f} s holds at most {int(spent.budget_s // run_s):,} such runs "
                "(every config climbs the ladder, the verification repeats the best)"
                if spent and spent.budget_s and run_s > 0 else "")
        lines.append(f"  a full-size replay of the default costs {run_s:,.1f} s (replay {measured['workload_s']:,.1f} s"
                     f" + settle {measured.get('settle_s') or 0.0:,.1f} s, besides restoring and starting the server)"
                     f"{held}")
    return [Text(line) for line in lines]


def _here(gains: list[float | None]) -> str:
    """How the earlier studies' configs ran here: ", here 1.39x, 1.45x and not complete the default"."""
    if not gains:
        return ""
    said = [f"{g:.2f}x" if g is not None else "not complete" for g in gains]
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
    return f", here {listed} the default"


def trials_lines(trials: Trials) -> list[RenderableType]:
    """Trials by outcome, the time failed trials took, where the latest `tune`'s time went, how rungs ranked."""
    counts = ", ".join(f"{n} {k}" for k, n in trials.counts.items() if n)
    lines = [f"trials: {counts or 'none yet'}"]
    if earlier := trials.earlier_studies:
        lines.append(f"started from {len(earlier)} earlier stud{'ies' if len(earlier) > 1 else 'y'} of a workload "
                     f"alike: {', '.join(earlier)} (their best configs tried first{_here(trials.earlier_gains)}"
                     + (f"; the sampler shown their {trials.earlier_trials} trials)" if trials.earlier_trials else ")"))
    failed = {k: v for k, v in trials.time_s.items() if k not in ("all", "complete", "pruned", "budget")}
    if sum(failed.values()) >= 1:
        lines.append(f"time in failed trials: {sum(failed.values()):.0f} s of {trials.time_s['all']:.0f} s in trials ("
                     + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(failed.items(), key=lambda kv: -kv[1])) + ")")
    if spent := trials.time_spent:
        given = ", then given to the search: no config had reached full size" if spent.reserve_searched else ""
        budget = (f" of a {spent.budget_s:.0f} s budget ({spent.reserved_s or 0:.0f} s was kept back for it{given})"
                  if spent.budget_s else "")
        pace = f" ({spent.trials} trials, {spent.trials_a_minute:.1f} a minute)" if spent.trials_a_minute else ""
        lines.append(f"time: search {spent.search_s:.0f} s{pace}, then verification {spent.verification_s:.0f} s"
                     f"{budget}")
    if trials.rung_agreement:
        scaled = "scaled" if trials.rungs_run_scaled else "unscaled"
        lines.append(f"rungs ({scaled}) rank configs like the next (Spearman's rho, configs at both): " + ", ".join(
            f"{a['from']}->{a['to']} {a['rho']:+.2f} (n={a['n']})" for a in trials.rung_agreement))
    return [Text(line) for line in lines]


def default_lines(default: Default, objective: Objective) -> list[RenderableType]:
    """The default's single full-size run, its drift over the study, the machines and whose units values are in."""
    lines = []
    if default.default_value is not None:
        warm = (f"; its warm-up before, not counted: {objective.show(default.default_warm_up)}"
                if default.default_warm_up is not None else "")
        lines.append(f"default: {objective.show(default.default_value)} (one run at full size{warm})")
    if default.drift is not None:
        runs = ", ".join(objective.show(v) for v in default.default_runs)
        lines.append(f"default over the study (its first run, then controls): {runs}; drift "
                     f"{default.drift * 100:+.1f}%")
    if len(default.machines) > 1:
        lines.append("machines: " + "; ".join(
            f"{name} ({m.trials} trials, default {objective.show(m.default_value)})"
            if m.default_value is not None else f"{name} ({m.trials} trials)"
            for name, m in default.machines.items())
            + f"; values are in {default.units_machine or 'the first machine'}'s units "
            "(a trial's ratio to its own machine's default times that machine's default)")
    return [Text(line) for line in lines]


def result_lines(result: Result, objective: Objective, catalog: Catalog) -> list[RenderableType]:
    """The result's trial and single run (not the verified figure), and the knobs it changes."""
    if result.result_trial is None or result.result_value is None:
        return []
    gain = f", {result.single_run_speedup:.2f}x the default's single run" if result.single_run_speedup else ""
    known = f" ({result.result_tried_first}, tried first)" if result.result_tried_first else ""
    table = Table("knob", "default", "result", title="changed knobs")
    for name, value in sorted(result.result_config.items()):
        knob = catalog.knobs[name]
        if not same_behaviour(knob, knob.default, value):  # 1 MiB -> 1.0 MiB is no change
            table.add_row(name, knob_value(knob, knob.default), knob_value(knob, value))
    return [Text(f"result: trial {result.result_trial}{known}; its single run (not the verified figure above): "
                 f"{objective.show(result.result_value)}{gain}"), table]


def cost_lines(cost: Costs, default: Default) -> list[str]:
    """What the default and the result cost besides the objective: settle, recovery, peak memory; and the limits."""
    lines = [("settled runs: each run's time includes the work it leaves behind (the store restarted as after a "
              "crash, then flushed or checkpointed, its compaction waited for)" if cost.settled else
              "UNSETTLED runs (research.settle = false): times are the raw window; the flush and compaction a run "
              "leaves behind are not counted")]
    for role in ("default", "result"):
        if measured := cost.costs.get(role):
            lines.append(f"{role}: " + describe_costs(measured) + f" ({measured.get('source')})")
    if line := checkpoint_line(default.default_counters):
        lines.append(line)
    limits = cost.limits
    if limits.memory_limit_bytes or limits.max_recovery_s:
        parts = (f"memory {human_bytes(limits.memory_limit_bytes)}" if limits.memory_limit_bytes else "",
                 f"recovery {limits.max_recovery_s:g} s" if limits.max_recovery_s else "")
        lines.append("limits: " + ", ".join(part for part in parts if part))
    if production := limits.production:
        lines.append(f"memory-to-data ratio assumed: production's {human_bytes(production.memory_bytes)} for "
                     f"{human_bytes(production.data_bytes)} of data "
                     f"(1:{production.data_bytes / production.memory_bytes:.3g}); "
                     f"configs planned at most {human_bytes(production.planned_limit_bytes or 0)} of caches and "
                     "buffers for the benchmark's data")
    return lines


def checkpoint_line(counters: Mapping[str, float]) -> str | None:
    """How often the default checkpointed inside its full-size run (a server that counts checkpoints), or None."""
    if "checkpoints_timed" not in counters:
        return None
    timed, requested = int(counters["checkpoints_timed"]), int(counters.get("checkpoints_requested", 0))
    if timed + requested == 0:
        return "the default did not checkpoint during its full-size run, besides the settle's own checkpoint"
    times = "once" if timed + requested == 1 else f"{timed + requested} times"
    return (f"the default checkpointed {times} during its full-size run ({timed} timed, {requested} requested by WAL "
            "volume), besides the settle's own")


def bottleneck_lines(bottleneck: Bottleneck) -> list[RenderableType]:
    return [Text(line) for line in diagnosis_lines(bottleneck.diagnosis)]


def ranked_lines(ranked: Ranked) -> list[RenderableType]:
    """The ranking a top-k study searched from; a ranking study's own top knobs."""
    lines = []
    if by := ranked.ranked_by:
        lines.append(f"searched only the top {by.top_k} knobs of ranking study {by.study}: {', '.join(by.knobs)}")
    if ranking := ranked.ranking:
        lines.append(f"knob ranking from {ranking['samples']} configs at rung {ranking['rung']}: "
                     + ", ".join(ranking["order"][:10]) + " (`knobtune rank --from-study` prints it whole)")
    return [Text(line) for line in lines]


def safety_lines(safety: Safety, catalog: Catalog) -> list[RenderableType]:
    """What the result risks (warnings), what the search was allowed, what it kept out."""
    lines: list[RenderableType] = []
    for warning in safety.warnings:
        line = Text("warning:", style="bold red")
        line.append(f" {warning}")
        lines.append(line)
    if safety.allow_unsafe:
        lines.append(Text("unsafe knobs were allowed in this study (--allow-unsafe)", style="bold red"))
    elif safety.allow_operational:
        lines.append(Text("operational values (never settle by themselves) were allowed in this study "
                          "(--allow-operational)", style="bold red"))
    if safety.left_out and not safety.allow_unsafe:
        lines.append(Text(left_out_line(safety.left_out, catalog)))
    return lines


def diagnosis_lines(diagnosis: dict[str, Any]) -> list[str]:
    """The default's bottleneck with its evidence, and what the result changed about it, as lines a person reads."""
    if not diagnosis:
        return []
    if diagnosis.get("unread"):
        return ["the default's bottleneck: not read (the system's rules were off in this study: research.rules = "
                "false; `knobtune diagnose` reads them over one config's run)"]
    found = diagnosis.get("default", [])
    if not found:
        lines = ["the default's bottleneck: no rule of the system's rules fired on its full-size run"]
    else:
        lines = ["what the system's rules found in the default's full-size run:"]
        lines += [f"  {f['finding']} [{f['rule']}]" for f in found]
    result = diagnosis.get("result")
    if result and found:
        for rule in result.get("gone", []):
            lines.append(f"  the result: {rule} no longer fires ({_changes(result, rule)})")
        for rule in result.get("still", []):  # one that neither moved nor was followed (a shape's rule): not said
            if (moved := _changes(result, rule)) != UNMOVED:
                lines.append(f"  the result: {rule} still fires ({moved})")
    for finding in (result or {}).get("new", []):
        lines.append(f"  the result's own: {finding['finding']} [{finding['rule']}]")
    for search in diagnosis.get("narrowed", []):
        lines.append(f"  narrowed first: {search['trials']} trial(s) searched {', '.join(search['knobs'])} within "
                     "the rules' ranges, every other knob over its whole range")
    if diagnosis.get("guided"):
        lines.append("the search started from these findings (docs/diagnosis.md); research.rules = false searches "
                     "without them")
    return lines


UNMOVED = "its evidence unchanged"


def _changes(result: dict[str, Any], rule: str) -> str:
    """``stall_share 0.02 -> 0; moved max_write_buffer_number 2 -> 6``: how a default finding's evidence moved
    under the result, and the knobs it suggests that the result changed (a rule that reads the config, such as
    a bloom filter's absence, shows only the latter)."""
    evidence = {name: pair for name, pair in result["evidence"].get(rule, {}).items()
                if all(isinstance(v, (int, float)) for v in pair) and pair[0] != pair[1]}
    parts = [_arrows(evidence)] if evidence else []
    if moved := result.get("moved", {}).get(rule):
        parts.append("moved " + _arrows(moved))
    return "; ".join(parts) or UNMOVED


def _arrows(pairs: dict[str, list[Any]]) -> str:
    """``stall_share 0.02 -> 0, stalls_memtable 3 -> 0``: each name's value before and after."""
    return ", ".join(f"{name} {_shown(before)} -> {_shown(after)}" for name, (before, after) in pairs.items())


def _shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def describe_costs(cost: dict[str, Any]) -> str:
    """``workload 4.10 s + settle 1.20 s; recovery 0.30 s; peak memory 180.2 MiB``."""
    def seconds(key: str) -> str:
        return f"{cost[key]:.2f} s" if cost.get(key) is not None else "-"

    memory = human_bytes(cost["peak_rss_bytes"]) if cost.get("peak_rss_bytes") else "-"
    counters = "".join(f"; {c['name']} {counter_value(c['median'], c['unit'])}"
                       for c in (cost.get("counters") or {}).values())
    return (f"workload {seconds('workload_s')} + settle {seconds('settle_s')}; recovery {seconds('recovery_s')}; "
            f"peak memory {memory}{counters}")


def counter_value(value: float, unit: str) -> str:
    """A counter's value in its unit (``counters.toml``): ``1.20 s``, ``3.4 MiB``, ``12``, ``4.1%``."""
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "bytes":
        return human_bytes(value)
    if unit == "ratio":
        return f"{value:.1%}"
    return f"{value:,.0f}"


def capture_lines(capture: CaptureSummary | Mapping[str, Any] | None, counters: Mapping[str, float]) -> list[str]:
    """What a capture study replayed (``capture``: span, sessions, the mix, the costliest fingerprints; never data)
    and how well the default's replay kept the captured pace (its ``counters`` over its full-size run)."""
    if not capture:
        return []
    lines = (capture if isinstance(capture, CaptureSummary) else CaptureSummary.from_record(capture)).lines()
    if "replay_lag_p99_s" in counters:
        lines.append(f"  the default's replay at full size ran behind the captured schedule by "
                     f"{counters['replay_lag_p99_s']:.3f} s at p99 ({counters.get('replay_lag_max_s', 0.0):.3f} s at "
                     "most; 0 when replayed as fast as it can)")
    if counters.get("replay_failed_statements"):
        lines.append(f"  {counters['replay_failed_statements']:,.0f} statements failed under the default's replay "
                     "too (not held against a config)")
    if counters.get("replay_remapped_values"):
        lines.append(f"  {counters['replay_remapped_values']:,.0f} values were sent as the replay's own server "
                     "generated them (ids read back and used again; docs/replay.md)")
    return lines
