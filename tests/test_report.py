"""The HTML report of a real study renders in a real browser (headless Chromium)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from knobtune.report import write_report
from knobtune.tuning import Tuner, Experiment, attrs, build_space

from conftest import tiny

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ERROR_CATCHER = ("<script>window.__errors=[];window.onerror=function(m){window.__errors.push(String(m))};"
                 "var e=console.error;console.error=function(){window.__errors.push([].join.call(arguments,' '));"
                 "e.apply(console,arguments)};window.addEventListener('load',function(){setTimeout(function(){"
                 "var d=document.createElement('pre');d.id='errors';d.textContent=window.__errors.join('\\n');"
                 "document.body.appendChild(d)},1500)});</script>")


@pytest.fixture(scope="module")
def report(tmp_path_factory, rocksdb) -> tuple[Path, dict]:
    from knobtune.storage import open_store

    home = tmp_path_factory.mktemp("report")
    workload = tiny("put-get-delete", 4000)
    settings = Experiment.of(study="rep", catalog=rocksdb, workload=workload, space=build_space(rocksdb),
                             search__sampler="random", search__seed=3, budget__trials=8, proof__verify_top=1,
                             proof__repeats=2, measurement__control_every=2,
                             research__rules=False, research__try_known_configs=False)
    study = Tuner(settings, open_store(home / "studies")).run()
    html_path, json_path = write_report(study, home / "report.html")
    return html_path, json.loads(json_path.read_text())


@pytest.mark.slow
def test_report_json_has_every_section(report) -> None:
    _, data = report
    assert set(data) >= {"summary", "trials", "defaults_by_rung", "best_over_time", "verification", "latency",
                         "importance", "parallel", "diff"}
    assert data["summary"]["study"] == "rep" and len(data["trials"]) >= 9
    assert sorted(data["defaults_by_rung"]) == ["0", "1", "2"]
    readrandom = data["latency"]["default"]["readrandom"]
    assert readrandom["p99"] > 0 and readrandom["mean"] > 0 and readrandom["max"] >= readrandom["p99"]
    assert readrandom["seconds"] > 0  # the phase's own time, beside the settle: where the time went
    default_costs = data["summary"]["costs"]["default"]
    assert default_costs["settle_s"] > 0 and default_costs["recovery_s"] > 0 and default_costs["peak_rss_bytes"] > 0


class _Sources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        for name, value in attributes:
            if (tag, name) in (("script", "src"), ("link", "href"), ("img", "src")) and value:
                self.external.append(value)


@pytest.mark.slow
def test_report_is_self_contained(report) -> None:
    text = report[0].read_text()
    sources = _Sources()
    sources.feed(text)
    assert sources.external == []  # opens offline: plotly.js is inline, nothing is fetched
    assert "Optimization history" in text and "Kept out of the search" in text
    assert "What it costs" in text and "recovery" in text and "peak memory" in text  # settle, recovery, memory
    assert "Where the time went" in text and "settle after (s)" in text


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup installs it)")
def test_report_renders_in_chromium(report, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(report[0].read_text().replace("<head>", "<head>" + ERROR_CATCHER, 1))
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    errors = re.search(r'<pre id="errors">(.*?)</pre>', dom, re.S)
    assert errors is not None, "the page never finished loading"
    assert errors.group(1).strip() == "", f"script errors: {errors.group(1)[:500]}"
    charts = re.findall(r'<div id="(chart-\d+)"', report[0].read_text())
    assert len(charts) >= 3  # history, verification and speedup at least
    for chart in charts:  # each plotly chart drew its SVG with something in it
        drawn = re.search(rf'<div id="{chart}".*?class="main-svg"', dom, re.S)
        assert drawn is not None, f"{chart} did not render"
    assert re.search(r'class="(scatterlayer|barlayer|boxlayer)[^"]*"', dom)


def test_write_buffers_hold_a_rung_only_as_that_rung_ran_them(rocksdb) -> None:
    import optuna

    from knobtune.report.summary import _fits_in_memory

    study = optuna.create_study()
    study.set_user_attr(attrs.WORKLOAD, {"records": 100_000, "ladder": [0.05, 0.2, 1.0], "key_size": 16,
                                         "value_size": 10240})
    config = {"write_buffer_size": 110 * 2**20}  # 220 MiB of buffers: the whole 5% rung (~49 MiB), not the full size
    study.set_user_attr(attrs.RUNGS_RUN_SCALED, False)
    assert "rung(s) 0.05, 0.2 of the ladder" in _fits_in_memory(study, rocksdb, config, True)[0]
    study.set_user_attr(attrs.RUNGS_RUN_SCALED, True)  # each rung ran 5% or 20% of the buffers: never the whole data
    assert _fits_in_memory(study, rocksdb, config, True) == []


@pytest.mark.slow
def test_the_report_reads_as_its_verdict_in_chromium(report, tmp_path: Path) -> None:
    """What a database engineer reads, in the page and in a screenshot of it: the verdict before any chart, the kept
    out values named with their value, only changes that change something, importance named as the catalog spells
    knobs with the trials it rests on."""
    html_path, data = report
    text = html_path.read_text()
    assert text.index("class='verdict'") < text.index('<div id="chart-0"')
    assert "compaction_style=fifo (data-loss)" in text and "compaction_style (data-loss)" not in text
    for row in data["diff"]:
        assert row["default_text"] != row["result_text"], row
    if data["importance"]:
        assert not any(name.endswith(".special") for name in data["importance"])
        assert f"over {data['importance_trials']} complete trials; only" in text  # 8 trials: the caveat
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/setup installs it)")
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000",
                    "--window-size=1300,5000", f"--screenshot={shot}", html_path.as_uri()], capture_output=True,
                   timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000  # drawn, not blank


def test_history_draws_failed_and_cut_trials_apart_from_measured_ones() -> None:
    """Timed-out, failed and interrupted trials sit beyond the worst measured value (never in the best zone of a
    lower-is-better chart), one legend entry per kind with its reason; a log axis labels whole decades only."""
    from knobtune.report.html import _history

    trials = ([{"number": n, "role": "", "outcome": "complete", "value": v, "reached_rung": 2, "reason": ""}
               for n, v in ((1, 0.5), (2, 2.0), (3, 30.0))]
              + [{"number": 4, "role": "", "outcome": "timeout", "value": 0.2, "reached_rung": 0,
                  "reason": "ran over 3x the default's time; stopped"},
                 {"number": 5, "role": "", "outcome": "crash", "value": None, "reached_rung": None,
                  "reason": "db_bench exited with signal 6"}])
    data = {"trials": trials, "defaults_by_rung": {"0": 1.0}, "summary": {"objective": "elapsed_s"}}
    figure = _history(data)
    by_name = {trace.name: trace for trace in figure.data}
    apart = [trace for name, trace in by_name.items() if "not measured" in name]
    assert {trace.name.split(":")[0] for trace in apart} == {"timeout", "crash"}
    assert all(y > 30.0 for trace in apart for y in trace.y)  # lower is better: on the worse side
    assert "ran over 3x the default's time" in next(t.name for t in apart if t.name.startswith("timeout"))
    assert list(by_name["complete"].y) == [0.5, 2.0, 30.0]
    assert figure.layout.yaxis.type == "log" and figure.layout.yaxis.dtick == 1
