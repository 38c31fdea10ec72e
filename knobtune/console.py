"""Everything the command line prints: tables, progress lines, summaries (rich)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from knobtune.analysis.ranking import Ranking
from knobtune.knobs import Catalog, load_catalog
from knobtune.knobs.display import knob_range, knob_value, same_behaviour
from knobtune.knobs.units import human_bytes
from knobtune.report import StudySummary
from knobtune.report.summary import capture_lines, describe_costs, diagnosis_lines
from knobtune.tuning import Progress
from knobtune.tuning.space import left_out_line
from knobtune.tuning.verify import Comparison
from knobtune.workloads import Objective

_WIDTH = None if sys.stdout.isatty() else 160  # rich assumes 80 columns when output is not a terminal
out = Console(highlight=False, soft_wrap=True, width=_WIDTH)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def progress_line(event: Progress) -> None:
    """One line per event: elapsed, time left, best so far, then what happened."""
    if event.best is None:
        best = "-"
    else:
        best = f"{event.best:,.0f}" if abs(event.best) >= 1000 else f"{event.best:.4g}"
    left = f" | left {duration(event.time_left_s)}" if event.time_left_s is not None else ""
    style = {"trial": "bold", "note": "cyan"}.get(event.kind, "")
    out.print(f"[dim][{duration(event.elapsed_s):>7}{left} | best {best}][/dim] [{style}]{event.message}[/{style}]"
              if style else f"[dim][{duration(event.elapsed_s):>7}{left} | best {best}][/dim] {event.message}")


def checkpoint_line(counters: dict[str, float]) -> str | None:
    """How often the default checkpointed inside its full-size run (a server that counts checkpoints), or None."""
    if "checkpoints_timed" not in counters:
        return None
    timed, requested = int(counters["checkpoints_timed"]), int(counters.get("checkpoints_requested", 0))
    if timed + requested == 0:
        return "the default did not checkpoint during its full-size run, besides the settle's own checkpoint"
    times = "once" if timed + requested == 1 else f"{timed + requested} times"
    return (f"the default checkpointed {times} during its full-size run ({timed} timed, {requested} requested by WAL "
            "volume), besides the settle's own")


def cost_lines(summary: StudySummary) -> list[str]:
    """What the default and the result cost besides the objective: settle, recovery, peak memory; and the limits."""
    lines = [("settled runs: each run's time includes the work it leaves behind (the store restarted as after a "
              "crash, then flushed or checkpointed, its compaction waited for)" if summary.settled else
              "UNSETTLED runs (research.settle = false): times are the raw window; the flush and compaction a run "
              "leaves behind are not counted")]
    for role in ("default", "result"):
        cost = summary.costs.get(role)
        if cost:
            lines.append(f"{role}: " + describe_costs(cost) + f" ({cost.get('source')})")
    if line := checkpoint_line(summary.default_counters):
        lines.append(line)
    limits = summary.limits
    if limits.get("memory_limit_bytes") or limits.get("max_recovery_s"):
        parts = (f"memory {human_bytes(limits['memory_limit_bytes'])}" if limits.get("memory_limit_bytes") else "",
                 f"recovery {limits['max_recovery_s']:g} s" if limits.get("max_recovery_s") else "")
        lines.append("limits: " + ", ".join(part for part in parts if part))
    if production := limits.get("production"):
        lines.append(f"memory-to-data ratio assumed: production's {human_bytes(production['memory_bytes'])} for "
                     f"{human_bytes(production['data_bytes'])} of data "
                     f"(1:{production['data_bytes'] / production['memory_bytes']:.3g}); "
                     f"configs planned at most {human_bytes(production.get('planned_limit_bytes') or 0)} of caches and "
                     "buffers for the benchmark's data")
    return lines


def catalog_table(catalog: Catalog) -> Table:
    table = Table(title=f"{catalog.system} {catalog.version}: {len(catalog.knobs)} knobs", show_lines=False)
    for column in ("knob", "group", "type", "default", "range", "safety", "only when"):
        table.add_column(column, overflow="fold")
    for knob in catalog.knobs.values():
        when = "; ".join([f"{c.knob} in {', '.join(map(str, c.values))}" for c in knob.conditions]
                         + ([f"driver {' or '.join(knob.drivers)}"] if knob.drivers else []))
        safety = knob.safety.value if knob.safety.value == "safe" else f"[bold red]{knob.safety.value}[/bold red]"
        table.add_row(knob.name, knob.group, knob.type.value, knob_value(knob, knob.default), knob_range(knob),
                      safety, when)
    return table


def ranking_text(ranking: Ranking, study: str, system: str, workload: str, shown: int = 15) -> None:
    """The end of ``rank``: the knobs by consensus, each method's share, and how far the methods agree."""
    methods = list(ranking.methods)
    table = Table("rank", "knob", *methods, title=f"which knobs matter ({ranking.samples} configs of study {study})")
    for place, knob in enumerate(ranking.order[:shown], 1):
        table.add_row(str(place), knob, *(f"{ranking.methods[m].get(knob, 0.0) * 100:.1f}%" for m in methods))
    out.print(table)
    if len(ranking.order) > shown:
        out.print(f"... and {len(ranking.order) - shown} more (--json lists all)")
    if ranking.agreement:
        out.print("agreement (Kendall's tau): "
                  + ", ".join(f"{pair} {tau:.2f}" for pair, tau in ranking.agreement.items()))
    if ranking.top_k_stability:
        out.print("top-k stable under bootstrap: " + ", ".join(f"top {k}: {share * 100:.0f}%"
                                                              for k, share in ranking.top_k_stability.items()))
    for method, why in ranking.skipped.items():
        out.print(f"{method} left out: {why}", markup=False)
    out.print(f"tune only the top knobs: knobtune tune {system} --workload {workload} --ranking {study} --top-k 5",
              markup=False)


def explanation_text(result: dict, objective: Any, study: str) -> None:
    """The end of ``explain``: each step of the path with its speedup and its share of the gain."""
    table = Table("step", "adds", "vs default (95% CI)", "share of the gain (95% CI)",
                  title=f"from the default ({objective.show(result['default_median'])}) to the winner, "
                        f"{result['repeats']} interleaved runs a step")
    for number, step in enumerate(result["steps"], 1):
        adds = ", ".join(f"{k}={v}" for k, v in step["changes"].items())
        ratio = (f"{step['ratio']:.2f}x ({step['ci_low']:.2f}-{step['ci_high']:.2f})" if "ratio" in step
                 else f"failed: {step['failure']}")
        share = (f"{step['share'] * 100:+.0f}% ({step['share_low'] * 100:+.0f}% to {step['share_high'] * 100:+.0f}%)"
                 if "share" in step else "")
        table.add_row(str(number), adds, ratio, share)
    out.print(table)
    out.print(f"minimal config: {result['minimal_note']}", markup=False)
    if result.get("minimal") is not None:
        out.print(f"export it: knobtune export {study} --minimal --format FORMAT", markup=False)


def comparison_text(comparison: Comparison, goal: Objective, unsafe: dict[str, dict[str, str]], settled: bool) -> None:
    """The end of ``compare``: each config's median against the first, its costs and latencies, the noise."""
    for runs in comparison.runs:
        label = runs.candidate.label
        if unsafe[label]:
            out.print(f"[bold red]{label} holds unsafe values:[/bold red] "
                      + ", ".join(f"{k} ({v})" for k, v in unsafe[label].items()))
        if runs.failure:
            out.print(f"{label}: [red]failed[/red]: {runs.failure}")
            continue
        versus = comparison.speedups.get(label)
        median = goal.show(runs.median) if runs.median is not None else "-"
        out.print(f"{label}: median {median} over {len(runs.values)} runs"
                  + (f"; {versus.describe()} vs {comparison.first.candidate.label}" if versus else ""))
        out.print("    " + describe_costs(runs.costs()) + " (medians)", markup=False)
        for phase, percentiles in runs.latency_us().items():
            out.print(f"    {phase} latency (µs, median of runs): "
                      + ", ".join(f"{k} {v:,.1f}" for k, v in percentiles.items()))
    out.print(f"noise of {comparison.first.candidate.label}: {comparison.noise * 100:.1f}%; "
              + ("settled runs (each includes the work it leaves behind: restart as after a crash, flush or "
                 "checkpoint, compaction)" if settled
                 else "UNSETTLED runs: raw window, the work a run leaves behind is not counted"))


def summary_text(summary: StudySummary, catalog: Catalog) -> None:
    """The end of ``tune`` and ``show``: counts, the result against the default, the proof, the risks."""
    counts = ", ".join(f"{n} {k}" for k, n in summary.counts.items() if n)
    out.print(f"[bold]study {summary.study}[/bold]: {summary.system} / {summary.workload}, "
              f"objective {summary.objective.value} ({'higher' if summary.objective.maximize else 'lower'} is better)")
    style = "bold green" if summary.verified else "bold yellow"
    out.print(f"[{style}]verdict: {summary.verdict}[/{style}]")  # the verified figure first; single runs below
    for line in capture_lines(summary.capture, summary.default_counters):
        out.print(line, markup=False)
    out.print(f"trials: {counts or 'none yet'}")
    failed = {k: v for k, v in summary.time_s.items() if k not in ("all", "complete", "pruned", "budget")}
    if sum(failed.values()) >= 1:
        out.print(f"time in failed trials: {sum(failed.values()):.0f} s of {summary.time_s['all']:.0f} s in trials ("
                  + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(failed.items(), key=lambda kv: -kv[1])) + ")")
    if spent := summary.time_spent:
        given = ", then given to the search: no config had reached full size" if spent.get("reserve_searched") else ""
        budget = (f" of a {spent['budget_s']:.0f} s budget ({spent['reserved_s']:.0f} s was kept back for it{given})"
                  if spent.get("budget_s") else "")
        out.print(f"time: search {spent['search_s']:.0f} s, then verification {spent['verification_s']:.0f} s"
                  f"{budget}", markup=False)
    if summary.rung_agreement:
        scaled = "scaled" if summary.rungs_run_scaled else "unscaled"
        out.print(f"rungs ({scaled}) rank configs like the next (Spearman's rho, configs at both): " + ", ".join(
            f"{a['from']}->{a['to']} {a['rho']:+.2f} (n={a['n']})" for a in summary.rung_agreement), markup=False)
    if summary.default_value is not None:
        warm = (f"; its warm-up before, not counted: {summary.objective.show(summary.default_warm_up)}"
                if summary.default_warm_up is not None else "")
        out.print(f"default: {summary.objective.show(summary.default_value)} (one run at full size{warm})")
    if summary.drift is not None:
        runs = ", ".join(summary.objective.show(v) for v in summary.default_runs)
        out.print(f"default over the study (its first run, then controls): {runs}; drift {summary.drift * 100:+.1f}%")
    if len(summary.machines) > 1:
        out.print("machines: " + "; ".join(
            f"{name} ({m['trials']} trials, default {summary.objective.show(m['default_value'])})"
            if m["default_value"] is not None else f"{name} ({m['trials']} trials)"
            for name, m in summary.machines.items())
            + f"; values are in {summary.units_machine or 'the first machine'}'s units "
            "(a trial's ratio to its own machine's default times that machine's default)", markup=False)
    if summary.result_trial is not None and summary.result_value is not None:
        gain = f", {summary.single_run_speedup:.2f}x the default's single run" if summary.single_run_speedup else ""
        known = f" ({summary.result_tried_first}, tried first)" if summary.result_tried_first else ""
        out.print(f"result: trial {summary.result_trial}{known}; its single run (not the verified figure above): "
                  f"{summary.objective.show(summary.result_value)}{gain}", markup=False)
        table = Table("knob", "default", "result", title="changed knobs")
        for name, value in sorted(summary.result_config.items()):
            knob = catalog.knobs[name]
            if not same_behaviour(knob, knob.default, value):  # 1 MiB -> 1.0 MiB is no change
                table.add_row(name, knob_value(knob, knob.default), knob_value(knob, value))
        out.print(table)
    for line in cost_lines(summary) + diagnosis_lines(summary.diagnosis):
        out.print(line, markup=False)
    for warning in summary.warnings:
        out.print(f"[bold red]warning:[/bold red] {warning}")
    if summary.ranked_by:
        out.print(f"searched only the top {summary.ranked_by['top_k']} knobs of ranking study "
                  f"{summary.ranked_by['study']}: {', '.join(summary.ranked_by['knobs'])}", markup=False)
    if summary.ranking:
        out.print(f"knob ranking from {summary.ranking['samples']} configs at rung {summary.ranking['rung']}: "
                  + ", ".join(summary.ranking["order"][:10]) + " (`knobtune rank --from-study` prints it whole)",
                  markup=False)
    if summary.allow_unsafe:
        out.print("[bold red]unsafe knobs were allowed in this study (--allow-unsafe)[/bold red]")
    elif summary.allow_operational:
        out.print("[bold red]operational values (never settle by themselves) were allowed in this study "
                  "(--allow-operational)[/bold red]")
    if summary.left_out and not summary.allow_unsafe:
        out.print(left_out_line(summary.left_out, load_catalog(summary.system)), markup=False)
