"""A study's summary: typed sections, each with its renderer, printed by `show` in one order; its JSON flat.

The study is ``corpus/studies/release-e064aba.db`` (see test_stored_studies.py), as stored and with the keys a
later study stores written onto it (a budget's time, controls, limits, a ranking), so every section has lines.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from knobtune.cli import run
from knobtune.knobs import load_catalog
from knobtune.report import StudySummary, summarize
from knobtune.report.sections import Default, MachineRuns, TimeSpent, Trials
from knobtune.report.summary_text import default_lines, summary_lines, trials_lines
from knobtune.storage import StudyStore, open_store
from knobtune.tuning import attrs
from knobtune.workloads import Objective

from conftest import CORPUS

STUDY = "old-release"
FLAT_KEYS = {  # the keys of `show --json` before the summary had sections: the JSON keeps its shape
    "allow_operational", "allow_unsafe", "capture", "costs", "counts", "default_counters", "default_runs",
    "default_value", "default_warm_up", "diagnosis", "drift", "experiment", "export_formats", "kept_out", "left_out",
    "limits", "machines", "objective", "ranked_by", "ranking", "result_config", "result_trial", "result_tried_first",
    "result_value", "rung_agreement", "rungs_run_scaled", "settled", "single_run_speedup", "study", "system",
    "time_s", "time_spent", "units_machine", "unsafe_in_result", "verdict", "verification", "verified", "warnings",
    "workload"} | {"earlier_studies", "earlier_trials", "earlier_gains"}  # and the keys added since


@pytest.fixture()
def store(tmp_path: Path) -> StudyStore:
    shutil.copy(CORPUS / "studies" / "release-e064aba.db", tmp_path / "studies.db")
    return open_store(tmp_path)


def _text(summary: StudySummary) -> list[str]:
    console = Console(width=200, soft_wrap=True)
    with console.capture() as captured:
        for line in summary_lines(summary, load_catalog(summary.system)):
            console.print(line)
    return captured.get().splitlines()


def _with_everything(store: StudyStore) -> StudySummary:
    """The stored study with a winner, its budget's time, controls, limits, production's ratio and a ranking."""
    study = store.load(STUDY)
    user = study.user_attrs
    study.set_user_attr(attrs.VERIFICATION, dict(user[attrs.VERIFICATION], winner="trial 2"))
    study.set_user_attr(attrs.OLD_MEMORY_LIMIT, 1 << 30)
    study.set_user_attr(attrs.OLD_MAX_RECOVERY, 12.5)
    study.set_user_attr(attrs.OLD_PRODUCTION, {"data_bytes": 100 << 30, "memory_bytes": 8 << 30,
                                               "planned_limit_bytes": 5 << 20})
    study.set_user_attr(attrs.RANKED_BY, {"study": "rank-x", "top_k": 3, "knobs": ["a", "b", "c"]})
    study.set_user_attr(attrs.RANKING, {"samples": 20, "rung": 0, "order": [f"k{i}" for i in range(12)]})
    study.set_user_attr(attrs.TIME_SPENT, {"search_s": 100.2, "verification_s": 30.0, "reserved_s": 40.0,
                                           "budget_s": 140.0, "reserve_searched": True})
    study.set_user_attr(attrs.CONTROLS, [{"value": 0.92}, {"value": 0.99}])
    study.set_user_attr(attrs.OLD_ALLOW_UNSAFE, True)
    return summarize(study)


def test_show_prints_each_section_in_its_order(store: StudyStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["show", STUDY, "--dir", str(store.home)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown == _text(summarize(store.load(STUDY)))
    starts = ["study old-release: rocksdb / put-get-delete, objective elapsed_s (lower is better)",
              "verdict: no significant gain: the best candidate, trial 2 ", "trials: 3 complete, 1 pruned",
              "time: search 18 s, then verification 3 s", "default: 0.9245 s (one run at full size)",
              "settled runs: ", "default: workload 0.22 s + settle 0.17 s; ", "the default's bottleneck: not read",
              "kept out of the search (would trade durability or data, or never settle; "]
    assert len(shown) == len(starts) and all(line.startswith(start) for line, start in zip(shown, starts)), shown


def test_every_section_renders_what_it_holds(store: StudyStore) -> None:
    lines = _text(_with_everything(store))
    expected = [
        "time: search 100 s, then verification 30 s of a 140 s budget (40 s was kept back for it, then given to the "
        "search: no config had reached full size)",
        "default over the study (its first run, then controls): 0.92 s, 0.99 s; drift +7.6%",
        "result: trial 2 (rocksdb-point-lookups, tried first); its single run (not the verified figure above): "
        "0.6246 s, 1.48x the default's single run",
        "result: workload 0.32 s + settle 0.24 s; recovery 0.24 s; peak memory 53.1 MiB (median of the verification "
        "runs)",
        "limits: memory 1.0 GiB, recovery 12.5 s",
        "memory-to-data ratio assumed: production's 8.0 GiB for 100.0 GiB of data (1:12.5); configs planned at most "
        "5.0 MiB of caches and buffers for the benchmark's data",
        "searched only the top 3 knobs of ranking study rank-x: a, b, c",
        "knob ranking from 20 configs at rung 0: k0, k1, k2, k3, k4, k5, k6, k7, k8, k9 (`knobtune rank "
        "--from-study` prints it whole)",
        "unsafe knobs were allowed in this study (--allow-unsafe)",
    ]
    assert [line for line in lines if line in expected] == expected  # each once, in the sections' order
    assert "changed knobs" in lines and any("│ memtablerep " in line for line in lines)
    warning = next(i for i, line in enumerate(lines) if line.startswith("warning: the result's write buffers"))
    assert lines.index("knob ranking from 20 configs at rung 0: k0, k1, k2, k3, k4, k5, k6, k7, k8, k9 (`knobtune "
                       "rank --from-study` prints it whole)") < warning  # the risks come last, together
    assert not any(line.startswith("kept out of the search") for line in lines)  # unsafe knobs were allowed


def test_machines_and_failed_trials_are_said_with_their_units() -> None:
    """Sections built as `summarize` builds them for a study of two workers with failed trials."""
    default = Default(default_value=2.0, machines={"a": MachineRuns(trials=5, default_value=2.0),
                                                   "b": MachineRuns(trials=3)}, units_machine="a")
    lines = [str(line) for line in default_lines(default, Objective.ELAPSED_S)]
    assert lines[-1] == ("machines: a (5 trials, default 2 s); b (3 trials); values are in a's units (a trial's "
                         "ratio to its own machine's default times that machine's default)")
    trials = Trials(counts={"complete": 2, "timeout": 1, "crash": 1}, time_s={"complete": 9.0, "timeout": 6.0,
                                                                          "crash": 2.0, "all": 17.0},
                    rung_agreement=[{"from": 0, "to": 1, "rho": 0.5, "n": 6}], rungs_run_scaled=True)
    assert [str(line) for line in trials_lines(trials)] == [
        "trials: 2 complete, 1 timeout, 1 crash",
        "time in failed trials: 8 s of 17 s in trials (timeout 6 s, crash 2 s)",
        "rungs (scaled) rank configs like the next (Spearman's rho, configs at both): 0->1 +0.50 (n=6)"]


def test_its_json_keeps_the_flat_shape(store: StudyStore, capsys: pytest.CaptureFixture[str]) -> None:
    summary = _with_everything(store)
    data = summary.to_dict()
    assert set(data) == FLAT_KEYS
    assert data["limits"] == {"memory_limit_bytes": 1 << 30, "max_recovery_s": 12.5,
                              "production": {"data_bytes": 100 << 30, "memory_bytes": 8 << 30,
                                             "planned_limit_bytes": 5 << 20}}
    assert data["ranked_by"] == {"study": "rank-x", "top_k": 3, "knobs": ["a", "b", "c"]}
    assert data["objective"] == "elapsed_s" and data["drift"] == pytest.approx(0.99 / 0.92 - 1)
    assert run(["show", STUDY, "--dir", str(store.home), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) == FLAT_KEYS and shown["result_trial"] == 2 and shown["time_spent"]["budget_s"] == 140.0


def test_the_searchs_pace_is_said_in_trials_a_minute() -> None:
    spent = TimeSpent(search_s=120.0, verification_s=30.0, reserved_s=40.0, budget_s=180.0, trials=6)
    line = str(trials_lines(Trials(counts={"complete": 4, "pruned": 2}, time_spent=spent))[1])
    assert line.startswith("time: search 120 s (6 trials, 3.0 a minute), then verification 30 s of a 180 s"), line
    earlier = TimeSpent.from_record({"search_s": 120.0})  # a study stored before the count
    assert earlier is not None and earlier.trials_a_minute is None


def test_a_systems_cost_counters_are_medians_over_the_verification_runs_shown_beside_peak_memory(
        tmp_path: Path) -> None:
    """Cassandra's counters.toml names GC pauses and the heap used at most as costs: a verification's costs hold
    their medians with their names and units, and the verdict's cost line shows them."""
    from knobtune.targets import Measurement, Phase
    from knobtune.tuning.proof import Candidate, CandidateRuns
    from knobtune.tuning.search import counter_meanings
    from knobtune.report.summary_text import describe_costs

    costs = {name: doc for name, doc in counter_meanings("cassandra").items() if doc.cost}
    assert set(costs) == {"gc_pause_s", "heap_used_peak_bytes_end"}
    runs = [Measurement(elapsed_s=10.0, phases=(Phase("run", 1000, 10.0, 100.0),), measured=("run",),
                        log_path=tmp_path / "run.log", verified=True, peak_rss_bytes=1500 * 2**20,
                        counters={"gc_pause_s": pause, "heap_used_peak_bytes_end": heap, "memtable_flushes": 3.0})
            for pause, heap in ((0.4, 300 * 2**20), (0.2, 500 * 2**20), (0.3, 400 * 2**20))]
    measured = CandidateRuns(Candidate("default", {}), values=[100.0] * 3, measurements=runs, cost_counters=costs)
    cost = measured.costs()
    assert cost["counters"] == {"gc_pause_s": {"name": "GC pauses", "unit": "s", "median": 0.3},
                                "heap_used_peak_bytes_end": {"name": "heap used at most", "unit": "bytes",
                                                             "median": 400 * 2**20}}
    assert describe_costs(cost).endswith("peak memory 1.5 GiB; GC pauses 0.30 s; heap used at most 400.0 MiB")
