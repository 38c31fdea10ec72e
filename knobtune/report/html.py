"""The HTML report: one self-contained file (plotly.js inline) that opens offline, plus its JSON.

``report_data`` computes; this module only draws. Every chart has a title,
axis labels with units, and a log scale where values span decades.
"""

from __future__ import annotations

import html
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from knobtune.analysis.importance import evaluator_name
from knobtune.errors import UsageError
from knobtune.outputs import html_mark, json_mark
from knobtune.report.report_data import report_data
from knobtune.report.summary_text import capture_lines, describe_costs, diagnosis_lines

OUTCOME_STYLE = {  # outcome -> (marker symbol, colour)
    "complete": ("circle", "#1f77b4"), "pruned": ("triangle-down", "#999999"), "timeout": ("x", "#d62728"),
    "budget": ("square-open", "#bcbd22"), "interrupted": ("diamond-open", "#8c564b"),
}
FAILED = ("refused", "crash", "data-loss", "tool")
MEASURED = ("complete", "pruned", "budget")  # outcomes whose value is a measurement of the config at its rung
FEW_TRIALS = 30  # importance from fewer complete trials than this is shown with a caveat


def write_report(study: optuna.Study, path: Path, reach: str = "") -> tuple[Path | None, Path]:
    """Write what ``path``'s suffix says (``page_files``): the HTML page and the same data as JSON beside it, or the
    JSON alone; return the paths written (the page's None when none). ``reach`` ends every command the report
    prints (`` --dir D``, `` --storage URL``: how to reach the study when it is not the default).

    Raises:
        UsageError: plotly is missing or the file cannot be written.
    """
    if importlib.util.find_spec("plotly") is None:
        raise UsageError("the HTML report needs plotly. Fix: pip install plotly")
    data = report_data(study) | {"reach": reach}
    return write_page(path, lambda: render(data), data, "the report", "-o")


def page_files(path: Path, option: str = "-o") -> tuple[Path | None, Path]:
    """The files an ``option`` path asks for, by its suffix: ``.html`` (or ``.htm``), the page and its JSON beside it
    (same name, ``.json``); ``.json``, the JSON alone.

    Raises:
        UsageError: any other suffix (one line naming both).
    """
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        return path, path.with_suffix(".json")
    if suffix == ".json":
        return None, path
    raise UsageError(f"{option} {path}: knobtune writes .html (the page, its JSON beside it) or .json (the data "
                     f"alone), not '{path.suffix or 'no suffix'}'. Fix: e.g. {option} {path.with_suffix('.html')}")


def write_page(path: Path, page: Callable[[], str], data: dict[str, Any], what: str, option: str) \
        -> tuple[Path | None, Path]:
    """Write the HTML ``page`` (drawn only when asked for) and ``data`` as JSON, as ``path``'s suffix says
    (``page_files``); return the paths written.

    Raises:
        UsageError: the suffix is neither, or the files cannot be written (naming ``what`` and the ``option`` that
            chooses the path).
    """
    html_path, json_path = page_files(path, option)
    try:
        (html_path or json_path).parent.mkdir(parents=True, exist_ok=True)
        if html_path is not None:
            html_path.write_text(page())
        json_path.write_text(json.dumps(json_mark() | data, indent=2, default=str))
    except OSError as exc:
        raise UsageError(f"cannot write {what} to {path} ({exc.strerror}). "
                         f"Fix: choose a writable {option} path") from None
    return html_path, json_path


def render(data: dict[str, Any]) -> str:
    figures = [f for f in (_history(data), _best_over_time(data), _verification(data), _speedups(data),
                           _ablation(data), _latency(data), _importance(data), _parallel(data)) if f is not None]
    parts = [_header(data)]
    for index, figure in enumerate(figures):
        parts.append(figure.to_html(include_plotlyjs=index == 0, full_html=False, config={"displaylogo": False},
                                    div_id=f"chart-{index}"))
    parts.append(_time_table(data))
    parts.append(_diff(data))
    title = html.escape(f"knobtune report: {data['summary']['study']}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'>{html_mark()}<title>{title}</title><style>{_CSS}"
            f"</style></head><body>{''.join(parts)}</body></html>")


_CSS = ("body{font-family:sans-serif;max-width:1300px;margin:auto;padding:1em;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
        ".verdict{font-size:1.2em;font-weight:bold;padding:.5em;background:#eef6ee}.warn{color:#b00}"
        "code{background:#f4f4f4;padding:1px 4px}")


def _unit(data: dict[str, Any]) -> str:
    return {"elapsed_s": "s", "ops_per_s": "ops/s", "p99_us": "µs"}[data["summary"]["objective"]]


def _axis_title(data: dict[str, Any]) -> str:
    objective = data["summary"]["objective"]
    better = "higher" if objective == "ops_per_s" else "lower"
    return f"{objective} ({_unit(data)}, {better} is better)"


def _header(data: dict[str, Any]) -> str:
    s = data["summary"]
    workload = s["experiment"].get("workload") or {}
    machine = s["experiment"].get("machine") or {}
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items() if n)
    safety = ("<p class='warn'>Unsafe knobs were allowed (--allow-unsafe).</p>" if s["allow_unsafe"] else
              ("<p class='warn'>Operational values were allowed (--allow-operational).</p>"
               if s.get("allow_operational") else "")
              + "<p>Kept out of the search (would trade durability or data, or never settle): "
              + html.escape(", ".join(f"{k} ({v})" for k, v in s["kept_out"].items()) or "none") + "</p>")
    warnings = "".join(f"<p class='warn'>warning: {html.escape(w)}</p>" for w in s["warnings"])
    rows = [("system", f"{s['system']} {s['experiment'].get('system_version', '')} via "
                       f"{s['experiment'].get('driver', '')}"),
            ("workload", f"{s['workload']}: {workload.get('records', '?'):,} records, ladder {workload.get('ladder')}"),
            ("objective", _axis_title(data)),
            ("machine", f"{machine.get('cpus')} CPUs, {machine.get('memory_gib')} GiB, {machine.get('os')}"),
            ("knobtune", str(s["experiment"].get("knobtune_version"))), ("trials", counts or "none")]
    if s.get("ranked_by"):
        ranked = s["ranked_by"]
        rows.append(("knobs searched", f"the top {ranked['top_k']} of ranking study {ranked['study']}: "
                                       + ", ".join(ranked["knobs"])))
    table = "".join(f"<tr><th>{k}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return (f"<h1>Study {html.escape(s['study'])}</h1><p class='verdict'>{html.escape(s['verdict'])}</p>"
            f"<table>{table}</table>{_captured(data)}{_costs(s)}{_diagnosis(s)}{safety}{warnings}"
            f"{_ranking(s.get('ranking'))}")


def _captured(data: dict[str, Any]) -> str:
    """What a capture study replayed and how well the default kept its pace (fingerprints, never statements)."""
    s = data["summary"]
    lines = capture_lines(s.get("capture") or {}, s.get("default_counters") or {})
    return ("<h2>What was replayed</h2><ul>" + "".join(f"<li>{html.escape(line.strip())}</li>" for line in lines)
            + "</ul>") if lines else ""


def _ranking(ranking: dict[str, Any] | None) -> str:
    """A ranking study's knob ranking: each method's share per knob, and the methods' agreement."""
    if not ranking:
        return ""
    methods = list(ranking["methods"])
    head = "".join(f"<th>{html.escape(m)}</th>" for m in methods)
    rows = "".join(f"<tr><td>{place}</td><td>{html.escape(knob)}</td>"
                   + "".join(f"<td>{ranking['methods'][m].get(knob, 0.0) * 100:.1f}%</td>" for m in methods) + "</tr>"
                   for place, knob in enumerate(ranking["order"], 1))
    agreement = ", ".join(f"{html.escape(pair)} {tau:.2f}" for pair, tau in ranking["agreement"].items()) or "n/a"
    stable = ", ".join(f"top {k}: {share * 100:.0f}%" for k, share in ranking["top_k_stability"].items()) or "n/a"
    return (f"<h2>Which knobs matter</h2><p>{ranking['samples']} Latin-hypercube configs at rung {ranking['rung']}, "
            f"ranked by {len(methods)} methods. Agreement (Kendall's tau): {agreement}. Top k unchanged under "
            f"bootstrap resampling: {stable}.</p><table><tr><th>rank</th><th>knob</th>{head}</tr>{rows}</table>")


def _diagnosis(s: dict[str, Any]) -> str:
    """The default's bottleneck, its evidence, and what the result changed about it (docs/diagnosis.md)."""
    lines = diagnosis_lines(s.get("diagnosis") or {})
    return ("<h2>Where the default's time goes</h2><ul>" + "".join(f"<li>{html.escape(line.strip())}</li>"
                                                                  for line in lines) + "</ul>") if lines else ""


def _costs(s: dict[str, Any]) -> str:
    """Settle time, recovery time and peak memory of the default and the result: what the speedup costs."""
    how = ("Settled runs: each run's time includes the work it leaves behind (restarted as after a crash, "
           "flushed or checkpointed, compaction waited for)." if s.get("settled") else
           "UNSETTLED runs (research.settle = false): the work a run leaves behind is not counted.")
    rows = "".join(f"<tr><th>{role}</th><td>{html.escape(describe_costs(cost))}</td>"
                   f"<td>{html.escape(str(cost.get('source', '')))}</td></tr>"
                   for role, cost in s.get("costs", {}).items())
    return f"<h2>What it costs</h2><p>{how}</p>" + (f"<table>{rows}</table>" if rows else "")


def _layout(figure: Any, title: str, x: str, y: str, log_y: bool = False) -> Any:
    figure.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=460, template="plotly_white",
                         legend={"orientation": "h", "y": -0.2})
    if log_y:  # one labelled tick per decade (plotly's default labels 2..9 between decades as bare digits)
        figure.update_yaxes(type="log", dtick=1, tickformat="~g", minor={"ticks": "inside", "showgrid": True})
    return figure


def _why(trials: list[dict[str, Any]]) -> str:
    """The most common reason of ``trials``, short, for a legend."""
    reasons = [t["reason"].split(";")[0].split(". ")[0][:60] for t in trials if t.get("reason")]
    return max(set(reasons), key=reasons.count) if reasons else "no reason recorded"


def _history(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure()
    rows = [t for t in data["trials"] if not t["role"]]
    for outcome, (symbol, colour) in OUTCOME_STYLE.items():
        if outcome not in MEASURED:  # a cut or interrupted run's value is not the config's: drawn apart below
            continue
        chosen = [t for t in rows if t["outcome"] == outcome and t["value"] is not None]
        if chosen:
            figure.add_trace(go.Scatter(
                x=[t["number"] for t in chosen], y=[t["value"] for t in chosen], mode="markers", name=outcome,
                marker={"symbol": symbol, "color": colour, "size": 9},
                text=[f"trial {t['number']}: {outcome} at rung {t['reached_rung']}<br>{html.escape(t['reason'])}"
                      for t in chosen], hoverinfo="text+y"))
    measured = [t["value"] for t in rows if t["value"] and t["outcome"] in MEASURED]
    apart = [t for t in rows if t["outcome"] not in MEASURED or t["value"] is None]
    if apart and measured:  # on the worse side of every measured value, one row per kind, its reason in the legend
        maximize = data["summary"]["objective"] == "ops_per_s"
        edge = min(measured) / 1.5 if maximize else max(measured) * 1.5
        for outcome in sorted({t["outcome"] for t in apart}):
            chosen = [t for t in apart if t["outcome"] == outcome]
            symbol, colour = OUTCOME_STYLE.get(outcome, ("x-thin-open", "#e377c2"))
            figure.add_trace(go.Scatter(
                x=[t["number"] for t in chosen], y=[edge] * len(chosen), mode="markers",
                name=f"{outcome}: not measured, drawn at the worse edge ({_why(chosen)})",
                marker={"symbol": symbol, "color": colour, "size": 10, "line": {"width": 2}},
                text=[f"trial {t['number']}: {t['outcome']}<br>{html.escape(t['reason'][:200])}" for t in chosen],
                hoverinfo="text"))
    last = max((t["number"] for t in rows), default=1)
    for rung, value in sorted(data["defaults_by_rung"].items()):
        if value:  # a line trace, not add_hline: its annotation lands wrong on log axes
            figure.add_trace(go.Scatter(x=[0, last], y=[value, value], mode="lines+text", name=f"default, rung {rung}",
                                        line={"dash": "dot", "color": "#2ca02c"}, text=[f"default, rung {rung}", ""],
                                        textposition="top right", hoverinfo="name+y"))
    spans_decades = measured and max(measured) / max(min(measured), 1e-12) > 10
    return _layout(figure, "Optimization history: each trial's last measured rung (markers by outcome)",
                   "trial number", _axis_title(data), log_y=bool(spans_decades))


def _best_over_time(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    points = data["best_over_time"]
    if not points:
        return None
    figure = go.Figure(go.Scatter(x=[p["minutes"] for p in points], y=[p["best"] for p in points],
                                  mode="lines+markers", line_shape="hv", name="best so far",
                                  text=[f"trial {p['trial']}" for p in points]))
    return _layout(figure, "Best full-size value so far, over wall-clock time (single runs, not verified)",
                   "minutes since the study began", _axis_title(data))


def _verification(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    verification = data["verification"] or {}
    candidates = [c for c in verification.get("candidates", []) if c["values"]]
    if not candidates:
        return None
    figure = go.Figure([go.Box(y=c["values"], name=c["label"], boxpoints="all", jitter=0.3) for c in candidates])
    rounds = (f"{verification['rounds']} interleaved rounds ({verification.get('repeats')} planned, at most "
              f"{verification.get('max_rounds')})" if verification.get("rounds") is not None
              else f"{verification.get('repeats')} interleaved runs each")
    return _layout(figure, f"Verification: {rounds} at full size "
                           f"(noise of the default {verification.get('noise_cv', 0) * 100:.1f}%)",
                   "config", _axis_title(data))


def _speedups(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    candidates = [c for c in (data["verification"] or {}).get("candidates", []) if "speedup" in c]
    if not candidates:
        return None
    ratios = [c["speedup"]["ratio"] for c in candidates]
    figure = go.Figure(go.Bar(
        x=[c["label"] for c in candidates], y=ratios, marker_color=["#2ca02c" if c["significant"] else "#aaaaaa"
                                                                     for c in candidates],
        error_y={"type": "data", "symmetric": False,
                 "array": [c["speedup"]["ci_high"] - r for c, r in zip(candidates, ratios)],
                 "arrayminus": [r - c["speedup"]["ci_low"] for c, r in zip(candidates, ratios)]}))
    figure.add_hline(y=1.0, line_dash="dash", annotation_text="the default")
    sequential = (data["verification"] or {}).get("rounds") is not None
    method = ("geometric mean of paired ratios with 95% sequential CI" if sequential
              else "ratio of medians with 95% bootstrap CI")
    return _layout(figure, f"Default vs tuned: {method} (green: better beyond the noise)",
                   "config", "speedup over the default (x, >1 is better)")


def _ablation(data: dict[str, Any]) -> Any:
    """`knobtune explain`'s path as a waterfall: each step's part of the speedup, from the default to the winner."""
    import plotly.graph_objects as go

    steps = [s for s in ((data.get("explanation") or {}).get("steps") or []) if "ratio" in s]
    if not steps:
        return None
    gains = [steps[0]["ratio"] - 1.0] + [b["ratio"] - a["ratio"] for a, b in zip(steps, steps[1:])]
    labels = [", ".join(s["knobs"]) for s in steps]
    figure = go.Figure(go.Waterfall(x=["default", *labels, "winner"], measure=["absolute", *["relative"] * len(steps),
                                                                            "total"],
                                    y=[1.0, *gains, 0.0], base=0.0, text=[f"{s['ratio']:.2f}x" for s in steps],
                                    textposition="outside"))
    minimal = (data.get("explanation") or {}).get("minimal_note", "")
    return _layout(figure, f"Which changes earned the gain (knobtune explain; each step measured with interleaved "
                           f"repeats). Minimal config: {minimal}", "change added, in greedy order",
                   "speedup over the default (x)")


def _latency(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure()
    for label, phases in data["latency"].items():
        for percentile in ("p50", "p99", "p99.9"):
            points = [(phase, values.get(percentile)) for phase, values in phases.items() if values.get(percentile)]
            if points:
                figure.add_trace(go.Bar(name=f"{label} {percentile}", x=[p for p, _ in points],
                                        y=[v for _, v in points]))
    if not figure.data:
        return None
    figure.update_layout(barmode="group")
    return _layout(figure, "Latency percentiles per phase: the default and the result", "phase",
                   "latency (µs, log scale)", log_y=True)


def _importance(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    importance = data["importance"]
    if not importance:
        return None
    names = list(importance)[:15][::-1]
    figure = go.Figure(go.Bar(x=[importance[n] for n in names], y=names, orientation="h"))
    figure.update_layout(height=120 + 28 * len(names))
    count = data.get("importance_trials") or 0
    caveat = (f"; only {count} trials: a rough guide, it changes with more (about {FEW_TRIALS} or more hold)"
              if count < FEW_TRIALS else "")
    return _layout(figure, f"Knob importance (Optuna's {evaluator_name()} over {count} complete trials{caveat})",
                   "share of the objective's variance explained", "knob")


def _parallel(data: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    parallel = data["parallel"]
    if not parallel or len(parallel["values"]) < 2:
        return None
    dimensions = []
    for knob in parallel["knobs"]:
        column = parallel["columns"][knob]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in column):
            dimensions.append({"label": knob, "values": column})
        else:  # categorical: numbered, with the choices as tick labels
            choices = sorted({str(v) for v in column})
            dimensions.append({"label": knob, "values": [choices.index(str(v)) for v in column],
                               "tickvals": list(range(len(choices))), "ticktext": choices})
    figure = go.Figure(go.Parcoords(line={"color": parallel["values"], "colorscale": "Viridis", "showscale": True,
                                          "colorbar": {"title": _unit(data)}}, dimensions=dimensions))
    figure.update_layout(title="The most important knobs across complete trials (colour: full-size value)",
                         height=480, template="plotly_white")
    return figure


def _time_table(data: dict[str, Any]) -> str:
    """Where each run's time went, beside its latencies: what reconciles a faster result with a slower p50."""
    costs = data["summary"].get("costs") or {}
    rows = []
    for label, phases in data["latency"].items():
        settle = (costs.get("default" if label == "default" else "result") or {}).get("settle_s")
        for phase, values in phases.items():
            rows.append([label, phase] + [_number(values.get(k)) for k in ("seconds", "mean", "p50", "p99.9", "max")]
                        + [_number(settle)])
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in ("run", "phase", "phase time (s)", "mean (µs)", "p50 (µs)",
                                             "p99.9 (µs)", "max (µs)", "settle after (s)"))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return ("<h2>Where the time went</h2><p>Latency percentiles are of single operations inside each phase, over "
            "every kind of operation the phase runs. The objective also counts what they leave out: the time "
            "between operations and the settle after the workload (the flush, compaction or checkpoint the run "
            "left behind, and the reopen after a crash), and the phase time is every operation's latency "
            "together (the mean times the operations). A config can be faster overall with a slower p50 when it "
            "leaves less to settle or stalls less (a lower mean and max).</p>"
            f"<table><tr>{head}</tr>{body}</table>")


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _diff(data: dict[str, Any]) -> str:
    study = html.escape(data["summary"]["study"])
    rows = "".join(f"<tr><td><code>{html.escape(d['knob'])}</code></td><td>{html.escape(d['default_text'])}</td>"
                   f"<td>{html.escape(d['result_text'])}</td></tr>" for d in data["diff"])
    table = (f"<table><tr><th>knob</th><th>default</th><th>result</th></tr>{rows}</table>" if rows
             else "<p>No config is recommended over the default.</p>")
    reach = html.escape(data.get("reach", ""))
    exports = "".join(f"<li><code>knobtune export {study} --format {name}{reach}</code></li>"
                      for name in data["summary"]["export_formats"])
    return f"<h2>The result against the default</h2>{table}<h2>Export</h2><ul>{exports}</ul>"
