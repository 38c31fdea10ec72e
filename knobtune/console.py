"""Everything the command line prints: tables, progress lines, summaries (rich)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from knobtune.analysis.ranking import Ranking
from knobtune.knobs import Catalog
from knobtune.knobs.display import knob_range, knob_value
from knobtune.report import StudySummary
from knobtune.report.summary_text import describe_costs, summary_lines
from knobtune.tuning import Progress
from knobtune.tuning.proof import Comparison
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
    """The end of ``tune`` and ``show``: each section of the summary by its renderer (``report.summary_text``)."""
    for line in summary_lines(summary, catalog):
        out.print(line)
