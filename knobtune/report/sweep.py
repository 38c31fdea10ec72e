"""A sweep, drawn: one self-contained HTML file (plotly.js inline) and its JSON, plus the verdict in words.

``tuning.sweep`` measures and ``analysis.sweep`` computes; this module only
words and draws the plain data of ``SweepResult.to_dict()``. One knob: the
median of each point as a line with its 95% interval as a band (a log x-axis
when the knob is log-scaled), every run as a dot, special values as
horizontal lines of their own, failed points in red at the floor with their
reason. Two knobs: a heatmap of the medians. The default and the study's
value are marked in both.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from knobtune.analysis.sweep import runs_to_tell
from knobtune.outputs import html_mark
from knobtune.report.html import page_files, write_page
from knobtune.workloads import Objective

_BAND = "rgba(31,119,180,0.18)"
_LINE = "#1f77b4"
_DEFAULT = "#2ca02c"
_STUDY = "#ff7f0e"
_FAILED = "#d62728"


def write_sweep(data: dict[str, Any], path: Path) -> tuple[Path | None, Path]:
    """Write the drawing to ``path`` and the data (with its verdict) as JSON beside it, or the JSON alone (a
    ``.json`` path); return the paths written.

    Raises:
        UsageError: the files cannot be written.
    """
    data.setdefault("verdict", sweep_verdict(data))
    html_path, json_path = page_files(path)
    data["files"] = {"html": str(html_path) if html_path else None, "json": str(json_path)}
    return write_page(path, lambda: render_sweep(data), data, "the sweep", "-o")


# ------------------------------------------------------------------ words


def sweep_verdict(data: dict[str, Any]) -> str:
    """The best point with its interval and against the default; with a study, whether its value is within the noise."""
    points = data["points"]
    show = Objective(data["objective"]).show
    if data["best_point"] is None:
        return "no point finished its runs: every one failed (see the reasons); nothing to compare"
    best = points[data["best_point"]]
    text = f"best point: {_name(best)} at {show(best['median'])}{_interval(best, show)}"
    versus = best["versus_default"]
    if versus:
        text += (f", {versus['ratio']:.2f}x {_default_word(data)} (95% CI "
                 f"{versus['ci_low']:.2f}-{versus['ci_high']:.2f}"
                 + ("" if versus["significant"] else ", within the noise") + ")" + _across(data, best))
    others = sum(1 for p in points if p["median"] is not None) - 1
    tied = len(data["within_noise_of_best"])
    if others > 0:
        text += ("; every other point lies within its noise" if tied == others
                 else "; no other point lies within its noise" if tied == 0
                 else f"; {tied} of the {others} other points {'lies' if tied == 1 else 'lie'} within its noise")
    if data["repeats"] < 3:
        runs = "runs" if data["repeats"] > 1 else "run"
        text += f" ({data['repeats']} {runs} per point: rough intervals; --repeats 5 for a firmer verdict)"
    return text + "." + _study_sentence(data, show)


def _across(data: dict[str, Any], best: dict[str, Any]) -> str:
    """Whether the best point is ahead of the default across all the points compared (``analysis.sweep.ahead_across``)
    when its own interval says it is; "" for a sweep from before that judgement, or of one point."""
    compared = data.get("compared") or 0
    if "ahead" not in best or compared < 2 or not best["versus_default"]["significant"]:
        return ""
    if best["ahead"]:
        return f", ahead beyond the noise across the {compared} points compared"
    text = (f", but not beyond the noise across the {compared} points compared "
            "(among several points, one can look ahead by chance)")
    needed = runs_to_tell(compared)
    if data["repeats"] < needed:
        text += f": at {data['repeats']} runs a point none can be; --repeats {needed} can tell"
    return text


def _default_word(data: dict[str, Any]) -> str:
    """What "the default" point is: the default config, or (--around) the knob's default among the study's values."""
    return "the knob's default" if data["around"] else "the default"


def _study_sentence(data: dict[str, Any], show: Any) -> str:
    if data["around"] is None:
        return ""
    study = data["around"]["study"]
    if data["study_point"] is None:
        return f" Study {study}'s value is not on the grid."
    point = data["points"][data["study_point"]]
    said = f" Study {study}'s value, {point['label']},"
    if point["median"] is None:
        return f"{said} failed here ({point['failure']}): the sweep cannot judge it."
    others = sum(1 for p in data["points"] if p["median"] is not None) - 1
    undecided = len(data["within_noise_of_best"]) == others  # nothing is told apart from the best
    cannot_tell = ("at this noise the sweep can neither confirm nor refute the study's optimum "
                   "(more --repeats or a quieter machine might).")
    if point["index"] == data["best_point"]:
        if undecided:
            return f"{said} is the sweep's best point, but every other point lies within its noise: {cannot_tell}"
        return f"{said} is the sweep's best point: the sweep confirms the study's optimum."
    versus = data["study_versus_best"]
    ratio = f"the best is {versus['ratio']:.2f}x it, 95% CI {versus['ci_low']:.2f}-{versus['ci_high']:.2f}"
    compared = data.get("study_compared")
    if not compared:  # a sweep from before the study's value was judged against all the points at once
        if data["study_within_noise"]:
            return (f"{said} at {show(point['median'])} lies within the noise of the best point ({ratio}), "
                    + (f"as does every other point: {cannot_tell}" if undecided
                       else "and some points do not: the sweep confirms the study's optimum."))
        return (f"{said} at {show(point['median'])} is beaten beyond the noise ({ratio}): the study's optimum is "
                "not this knob's best with the other knobs at the study's values.")
    across = f"across the {compared} points compared with it ({ratio})"
    if not data["study_within_noise"]:
        return (f"{said} at {show(point['median'])} is beaten beyond the noise {across}: the study's optimum is not "
                "this knob's best with the other knobs at the study's values.")
    needed = runs_to_tell(compared)
    if data["repeats"] < needed:
        return (f"{said} at {show(point['median'])} is not beaten beyond the noise {across}, but at "
                f"{data['repeats']} runs a point none could be (--repeats {needed} can tell): the sweep can neither "
                "confirm nor refute the study's optimum.")
    return (f"{said} at {show(point['median'])} is not beaten beyond the noise {across}, "
            + (f"and every point lies within the best's noise: {cannot_tell}" if undecided
               else "and some points lie beyond the best's noise: the sweep confirms the study's optimum."))


def point_lines(data: dict[str, Any]) -> list[str]:
    """One line per point for the terminal: value, median with interval, against the default, or why it failed."""
    show = Objective(data["objective"]).show
    lines = []
    for point in data["points"]:
        marks = _point_marks(point, data)
        head = point["label"] + (f" [{', '.join(marks)}]" if marks else "")
        if point["median"] is None:
            lines.append(f"{head}: failed: {point['failure']}")
            continue
        versus = point["versus_default"]
        against = (f"; {versus['ratio']:.2f}x {_default_word(data)} ({versus['ci_low']:.2f}-{versus['ci_high']:.2f})"
                   if versus else "")
        lines.append(f"{head}: {show(point['median'])}{_interval(point, show)} over {len(point['runs'])} runs{against}")
        if point["repairs"]:
            lines.append("    mended: " + "; ".join(point["repairs"]))
    return lines


def _point_marks(point: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """What a point is besides its value (the terminal's lines and the page's table both show them)."""
    return [m for m, on in (("default", point["default"]), ("study", point["study"]),
                            ("best", point["index"] == data["best_point"]), ("ahead", point.get("ahead"))) if on]


def _name(point: dict[str, Any]) -> str:
    marks = [m for m, on in (("the default", point["default"]), ("the study's value", point["study"])) if on]
    return point["label"] + (f", {' and '.join(marks)}," if marks else "")


def _interval(point: dict[str, Any], show: Any) -> str:
    if point["ci_low"] is None:
        return " (one run: no interval)"
    return f" (95% CI {show(point['ci_low'])} to {show(point['ci_high'])})"


# ------------------------------------------------------------------ drawing


def render_sweep(data: dict[str, Any]) -> str:
    """The whole HTML page: verdict, set-up, the chart, the table of points."""
    if len(data["axes"]) == 2:
        figure = _heatmap(data)
    else:
        figure = _curve(data) if data["axes"][0]["numeric"] else _choices(data)
    chart = figure.to_html(include_plotlyjs=True, full_html=False, config={"displaylogo": False}, div_id="sweep")
    knobs = " x ".join(a["knob"] for a in data["axes"])
    title = html.escape(f"knobtune sweep: {knobs} ({data['system']}, {data['workload']})")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'>{html_mark()}<title>{title}</title><style>{_CSS}"
            "</style></head>"
            f"<body><h1>{title}</h1><p class='verdict'>{html.escape(data['verdict'])}</p>{_setup(data)}{chart}"
            f"{_table(data)}{_reading(data)}</body></html>")


_CSS = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
        ".verdict{font-size:1.15em;font-weight:bold;padding:.5em;background:#eef6ee}.failed{color:#b00}")


def _axis_title(data: dict[str, Any]) -> str:
    better = "higher" if data["maximize"] else "lower"
    return f"{data['objective']} ({data['unit']}, {better} is better)"


def _setup(data: dict[str, Any]) -> str:
    base = ", ".join(f"{k}={v}" for k, v in data["base"].items()) or "none: every other knob at its default"
    around = data["around"]
    if around:
        base = (f"study {around['study']}'s result (trial {around['trial']}, "
                f"{'verified' if around['verified'] else 'NOT verified: its best single run'}): {base}")
    timeout = (f"{data['timeout_s']:.1f} s ({data['timeout_factor']:g}x the default point's time)"
               if data["timeout_s"] else "none")
    rows = [("system", f"{data['system']} {data['system_version']} via {data['driver']}"),
            ("workload", f"{data['workload']}, {data['rung']['records']:,} records"),
            ("objective", _axis_title(data)),
            ("runs",
             f"{data['repeats']} per point, interleaved (round-robin, order shuffled per round, seed {data['seed']})"),
            ("other knobs at (the base config)", base), ("time limit per run", timeout),
            ("noise of the default point", f"{data['noise_cv'] * 100:.1f}% (standard deviation / mean)"),
            ("measured time", "settled: each run includes the flush and compaction it leaves behind"
             if data["settled"] else "UNSETTLED: the raw window only")]
    for axis in data["axes"]:
        if axis["left_out"]:
            left_out = "; ".join(f"{v}: {why}" for v, why in axis["left_out"].items())
            rows.append((f"{axis['knob']}: left out", left_out))
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return "<table>" + cells + "</table>"


def _table(data: dict[str, Any]) -> str:
    show = Objective(data["objective"]).show
    head = "".join(f"<th>{html.escape(a['knob'])}</th>" for a in data["axes"])
    rows = []
    for point in data["points"]:
        marks = _point_marks(point, data)
        values = "".join(f"<td>{html.escape(point['shown'][a['knob']])}</td>" for a in data["axes"])
        if point["median"] is None:
            cells = f"<td colspan='4' class='failed'>failed: {html.escape(str(point['failure']))}</td>"
        else:
            versus = point["versus_default"]
            ci = "-" if point["ci_low"] is None else f"{show(point['ci_low'])} to {show(point['ci_high'])}"
            against = f"{versus['ratio']:.2f}x ({versus['ci_low']:.2f}-{versus['ci_high']:.2f})" if versus else "-"
            runs = ", ".join(show(v) for v in point["runs"])
            cells = (f"<td>{show(point['median'])}</td><td>{ci}</td><td>{against}</td>"
                     f"<td>{html.escape(runs)}</td>")
        mended = html.escape("; ".join(point["repairs"]))
        rows.append(f"<tr>{values}<td>{', '.join(marks)}</td>{cells}<td>{mended}</td></tr>")
    return (f"<h2>Points</h2><table><tr>{head}<th></th><th>median</th><th>95% CI</th><th>vs default (95% CI)</th>"
            f"<th>runs</th><th>base config's knobs mended</th></tr>{''.join(rows)}</table>")


def _reading(data: dict[str, Any]) -> str:
    return ("<h2>How to read it</h2><p>Each point is the median of its interleaved runs; the band (or the bars) is "
            "its 95% bootstrap interval, about the range of the runs when there are only two or three. A point "
            "lies within the noise of the best when the best is not better beyond the 95% interval of their ratio. "
            "Failed points have no value: they are drawn at the floor in red with their reason. Raw output of "
            f"every run: {html.escape(str(data.get('logs', '')))}</p>")


def _hover(point: dict[str, Any], show: Any) -> str:
    if point["median"] is None:
        return f"{html.escape(point['label'])}<br>failed: {html.escape(str(point['failure']))}"
    ci = "" if point["ci_low"] is None else f"<br>95% CI {show(point['ci_low'])} to {show(point['ci_high'])}"
    versus = point["versus_default"]
    against = f"<br>{versus['ratio']:.2f}x the default" if versus and not point["default"] else ""
    return f"{html.escape(point['label'])}<br>median {show(point['median'])}{ci}{against}<br>{len(point['runs'])} runs"


def _floor(data: dict[str, Any]) -> float:
    measured = [v for p in data["points"] for v in p["runs"]]
    return min(measured) / 1.15 if measured else 1.0


def _layout(figure: Any, data: dict[str, Any], x_title: str) -> Any:
    figure.update_layout(template="plotly_white", height=580, xaxis_title=x_title, yaxis_title=_axis_title(data),
                         legend={"orientation": "h", "y": -0.32, "yanchor": "top"}, hovermode="closest",
                         margin={"b": 160})
    return figure


def _marks(figure: Any, data: dict[str, Any], x_of: Any, show: Any, drop_lines: bool) -> None:
    """The default (green diamond), the study's value (orange star) and the best point (red ring) on their
    points; with ``drop_lines``, the default and the study's value also dotted down to the floor."""
    import plotly.graph_objects as go

    floor = _floor(data)
    best = data["best_point"]
    marks = [(next((p for p in data["points"] if p["default"]), None), "default", _DEFAULT, "diamond", 16),
             (next((p for p in data["points"] if p["study"]), None), "the study's value", _STUDY, "star", 18),
             (data["points"][best] if best is not None else None, "best", _FAILED, "circle-open", 22)]
    for point, name, colour, symbol, size in marks:
        if point is None:
            continue
        x = x_of(point)
        top = point["median"] if point["median"] is not None else floor
        if drop_lines and name != "best":
            figure.add_trace(go.Scatter(x=[x, x], y=[floor, top], mode="lines", line={"color": colour, "dash": "dot"},
                                        showlegend=False, hoverinfo="skip"))
        figure.add_trace(go.Scatter(x=[x], y=[top], mode="markers", name=f"{name}: {point['label']}",
                                    marker={"symbol": symbol, "size": size, "color": colour, "line": {"width": 2}},
                                    hovertext=[_hover(point, show)], hoverinfo="text"))


def _runs_and_failures(figure: Any, data: dict[str, Any], points: list[dict[str, Any]], x_of: Any, show: Any) -> None:
    import plotly.graph_objects as go

    finished = [p for p in points if p["median"] is not None]  # a failed point shows no number, not even its early runs
    xs = [x_of(p) for p in finished for _ in p["runs"]]
    ys = [v for p in finished for v in p["runs"]]
    if xs:
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="each run",
                                    marker={"size": 5, "color": "#888888"}, hoverinfo="y"))
    failed = [p for p in points if p["median"] is None]
    if failed:
        figure.add_trace(go.Scatter(
            x=[x_of(p) for p in failed], y=[_floor(data)] * len(failed), mode="markers",
            name="failed (no value; drawn at the floor)", marker={"symbol": "x", "size": 12, "color": _FAILED},
            hovertext=[_hover(p, show) for p in failed], hoverinfo="text"))


def _curve(data: dict[str, Any]) -> Any:
    """One numeric knob: median line, 95% band, runs, special values as lines of their own, marks."""
    import plotly.graph_objects as go

    axis, show = data["axes"][0], Objective(data["objective"]).show
    knob = axis["knob"]
    special = axis["special"]
    regular = [p for p in data["points"] if p["values"][knob] not in special]
    measured = [p for p in regular if p["median"] is not None]
    figure = go.Figure()

    def x_of(point: dict[str, Any]) -> Any:
        return point["values"][knob]

    banded = [p for p in measured if p["ci_low"] is not None]
    if banded:
        xs = [x_of(p) for p in banded]
        figure.add_trace(go.Scatter(x=xs + xs[::-1],
                                    y=[p["ci_high"] for p in banded] + [p["ci_low"] for p in banded][::-1],
                                    fill="toself", fillcolor=_BAND, line={"width": 0}, name="95% CI of the median",
                                    hoverinfo="skip"))
    figure.add_trace(go.Scatter(x=[x_of(p) for p in measured], y=[p["median"] for p in measured], mode="lines+markers",
                                name="median", line={"color": _LINE}, marker={"size": 8},
                                hovertext=[_hover(p, show) for p in measured], hoverinfo="text"))
    _runs_and_failures(figure, data, regular, x_of, show)
    xs = [x_of(p) for p in regular] or [axis["min"], axis["max"]]
    for point in (p for p in data["points"] if p["values"][knob] in special):
        if point["median"] is None:
            continue  # listed in the table with its reason
        figure.add_trace(go.Scatter(x=[min(xs), max(xs)], y=[point["median"]] * 2, mode="lines",
                                    line={"dash": "dash", "width": 2}, name=f"{point['label']} (special value)",
                                    hovertext=[_hover(point, show)] * 2, hoverinfo="text"))

    def mark_x(point: dict[str, Any]) -> Any:  # a special value's mark sits at the left edge, on its own line
        return x_of(point) if x_of(point) not in special else min(xs)

    _marks(figure, data, mark_x, show, drop_lines=True)
    if axis["log"]:
        figure.update_xaxes(type="log")
    figure.update_xaxes(tickvals=[x_of(p) for p in regular], ticktext=[p["shown"][knob] for p in regular],
                        tickangle=-30)
    log = ", log scale" if axis["log"] else ""
    unit = f" ({axis['unit']}{log})" if axis["unit"] else (" (log scale)" if axis["log"] else "")
    figure.update_layout(title=f"{data['objective']} against {knob}: median of {data['repeats']} runs per point")
    return _layout(figure, data, knob + unit)


def _choices(data: dict[str, Any]) -> Any:
    """One bool or enum knob: each choice's median with its 95% interval as error bars, runs, marks."""
    import plotly.graph_objects as go

    axis, show = data["axes"][0], Objective(data["objective"]).show
    knob = axis["knob"]

    def x_of(point: dict[str, Any]) -> str:
        return point["shown"][knob]

    measured = [p for p in data["points"] if p["median"] is not None]
    figure = go.Figure(go.Scatter(
        x=[x_of(p) for p in measured], y=[p["median"] for p in measured], mode="markers", name="median (95% CI)",
        marker={"size": 12, "color": _LINE},
        error_y={"type": "data", "symmetric": False,
                 "array": [(p["ci_high"] or p["median"]) - p["median"] for p in measured],
                 "arrayminus": [p["median"] - (p["ci_low"] or p["median"]) for p in measured]},
        hovertext=[_hover(p, show) for p in measured], hoverinfo="text"))
    _runs_and_failures(figure, data, data["points"], x_of, show)
    _marks(figure, data, x_of, show, drop_lines=False)
    figure.update_xaxes(type="category", categoryorder="array", categoryarray=axis["shown"])
    figure.update_layout(title=f"{data['objective']} for each value of {knob}: median of {data['repeats']} runs")
    return _layout(figure, data, knob)


def _heatmap(data: dict[str, Any]) -> Any:
    """Two knobs: the medians as a heatmap (failed cells empty, marked x), the default and the study's cell marked."""
    import plotly.graph_objects as go

    (first, second), show = data["axes"], Objective(data["objective"]).show
    cells = {(p["shown"][first["knob"]], p["shown"][second["knob"]]): p for p in data["points"]}
    z, text, hover = [], [], []
    for y in second["shown"]:
        row = [cells.get((x, y)) for x in first["shown"]]
        z.append([p["median"] if p and p["median"] is not None else None for p in row])
        text.append([show(p["median"]) if p and p["median"] is not None else ("failed" if p else "") for p in row])
        hover.append([_hover(p, show) if p else "" for p in row])
    figure = go.Figure(go.Heatmap(
        x=first["shown"], y=second["shown"], z=z, text=text, texttemplate="%{text}", hovertext=hover,
        hoverinfo="text", colorscale="Viridis", reversescale=not data["maximize"],
        colorbar={"title": {"text": _axis_title(data), "side": "right"}}))
    marks = [("default", "default", _DEFAULT, "diamond-open"), ("study", "the study's value", _STUDY, "star-open")]
    best = data["best_point"]
    for key, name, colour, symbol in marks:
        point = next((p for p in data["points"] if p[key]), None)
        if point is not None:
            figure.add_trace(go.Scatter(
                x=[point["shown"][first["knob"]]], y=[point["shown"][second["knob"]]], mode="markers",
                name=f"{name}: {point['label']}", marker={"symbol": symbol, "size": 26, "color": colour,
                                                           "line": {"width": 3, "color": colour}},
                hovertext=[_hover(point, show)], hoverinfo="text"))
    if best is not None:
        point = data["points"][best]
        figure.add_trace(go.Scatter(
            x=[point["shown"][first["knob"]]], y=[point["shown"][second["knob"]]], mode="markers",
            name=f"best: {point['label']}", marker={"symbol": "square-open", "size": 34, "color": "#d62728",
                                                     "line": {"width": 3}},
            hovertext=[_hover(point, show)], hoverinfo="text"))
    failed = [p for p in data["points"] if p["median"] is None]
    if failed:
        figure.add_trace(go.Scatter(
            x=[p["shown"][first["knob"]] for p in failed], y=[p["shown"][second["knob"]] for p in failed],
            mode="markers", name="failed (no value)", marker={"symbol": "x", "size": 14, "color": _FAILED},
            hovertext=[_hover(p, show) for p in failed], hoverinfo="text"))
    figure.update_xaxes(type="category", categoryorder="array", categoryarray=first["shown"])
    figure.update_yaxes(type="category", categoryorder="array", categoryarray=second["shown"])
    figure.update_layout(template="plotly_white", height=620, hovermode="closest",
                         title=f"median {data['objective']} over {first['knob']} x {second['knob']} "
                               f"({data['repeats']} runs per cell)",
                         xaxis_title=first["knob"] + (" (log-spaced)" if first["log"] else ""),
                         yaxis_title=second["knob"] + (" (log-spaced)" if second["log"] else ""),
                         legend={"orientation": "h", "y": -0.2})
    return figure
