"""`knobtune sweep`: the grid from the catalog, the statistics of each point, and real sweeps of LevelDB."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from knobtune.analysis import speedup
from knobtune.analysis.stats import p_better
from knobtune.analysis.sweep import ahead_across, judge, median_interval, runs_to_tell
from knobtune.cli import app
from knobtune.errors import UsageError
from knobtune.knobs import load_catalog
from knobtune.report.sweep import sweep_verdict
from knobtune.tuning.sweep import grid_values, make_axis, plan_sweep

runner = CliRunner()
LEVELDB = load_catalog("leveldb")
ROCKSDB = load_catalog("rocksdb")
ONE_RUNG = """name = "fill-one"
description = "fillrandom at one size, for a study without a ladder"
systems = ["leveldb"]
objective = "ops_per_s"
ladder = [1.0]
records = 3000
key_size = 20
value_size = 100

[drivers.kvbench]
phases = [{ name = "fillrandom", kind = "fill", order = "random" }]
"""


# ------------------------------------------------------------------ the grid (pure)


def test_a_log_scaled_bytes_knob_gets_a_geometric_grid_with_the_default_on_it() -> None:
    knob = LEVELDB["block_size"]  # 1 KiB .. 256 KiB, log, default 4096
    values = grid_values(knob, 7, [knob.default])
    assert knob.default in values and values[0] == 1024 and values[-1] == 256 * 1024
    steps = [v for v in values if v != knob.default]
    ratios = [b / a for a, b in zip(steps, steps[1:])]
    assert len(steps) == 7 and all(r == pytest.approx(256 ** (1 / 6), rel=0.04) for r in ratios), ratios
    assert all(isinstance(v, int) for v in values)
    assert grid_values(LEVELDB["write_buffer_size"], 5) == tuple(m * 2**20 for m in (1, 4, 16, 64, 256))


def test_a_linear_int_knob_is_rounded_and_special_values_are_points_of_their_own() -> None:
    assert grid_values(ROCKSDB["level0_stop_writes_trigger"], 3) == (1, 128, 256)
    assert grid_values(LEVELDB["bloom_bits"], 3) == (0, 1, 10, 20), "0 = no filter is its own point"
    assert grid_values(ROCKSDB["open_files"], 2)[0] == -1, "-1 = unlimited"
    assert 0 not in grid_values(ROCKSDB["prefix_size"], 3), "a special value searches never use stays out"


def test_bool_and_enum_knobs_sweep_their_choices_without_unsafe_values() -> None:
    assert grid_values(LEVELDB["paranoid_checks"], 5) == (False, True)
    assert grid_values(LEVELDB["compression"], 5) == ("snappy", "none")
    axis = make_axis(ROCKSDB["compaction_style"], 5)
    assert axis.values == ("level", "universal") and "fifo" in axis.left_out
    assert make_axis(ROCKSDB["compaction_style"], 5, allow_unsafe=True).values == ("level", "universal", "fifo")
    refused = make_axis(ROCKSDB["compaction_style"], 5, allow_unsafe=True, impossible=["universal"])
    assert refused.values == ("level", "fifo") and refused.left_out == {"universal": "this machine refuses it"}


def test_the_plan_marks_the_default_and_the_study_value_and_keeps_the_others_at_its_result() -> None:
    base = {"write_buffer_size": 3 * 2**20, "block_size": 2048}
    plan = plan_sweep(LEVELDB, ["write_buffer_size"], points=3, base=base, around={"study": "s"})
    swept = [p.values["write_buffer_size"] for p in plan.points]
    assert swept == [2**20, 3 * 2**20, 4 * 2**20, 16 * 2**20, 256 * 2**20]
    assert plan.default_point.values["write_buffer_size"] == 4 * 2**20
    assert plan.study_point is not None and plan.study_point.values["write_buffer_size"] == 3 * 2**20
    assert all(p.config["block_size"] == 2048 for p in plan.points) and plan.base == {"block_size": 2048}


def test_a_two_knob_plan_is_the_grid_and_relations_move_the_base_configs_knob_never_the_swept_one() -> None:
    plan = plan_sweep(ROCKSDB, ["level0_stop_writes_trigger", "level0_slowdown_writes_trigger"], points=2)
    assert len(plan.points) == 3 * 3  # 2 steps + the default, each
    lowest = {"level0_stop_writes_trigger": 1, "level0_slowdown_writes_trigger": 1}
    low = next(p for p in plan.points if p.values == lowest)
    assert low.refused is None and low.config["level0_file_num_compaction_trigger"] == 1 and low.repairs
    broken = next(p for p in plan.points if p.values == {"level0_stop_writes_trigger": 36,
                                                         "level0_slowdown_writes_trigger": 128})
    assert broken.refused and "level0_stop_writes_trigger >= level0_slowdown_writes_trigger" in broken.refused


@pytest.mark.parametrize("knobs, options, message", [
    (["write_buffer_size", "block_size", "max_file_size"], {}, "sweep takes one or two --knob, not 3"),
    (["write_buffer_size", "write_buffer_size"], {}, "is given twice"),
    (["disable_wal"], {"driver": "db_bench"}, "safety class 'durability'"),
    (["hash_bucket_count"], {}, "matters only when memtablerep"),
])
def test_bad_plans_are_refused_with_the_fix(knobs: list[str], options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message) as raised:
        plan_sweep(ROCKSDB, knobs, points=3, **options)
    assert "Fix:" in str(raised.value)


# ------------------------------------------------------------------ statistics (pure)


def test_a_median_interval_brackets_the_median_and_a_single_run_has_none() -> None:
    interval = median_interval([100.0, 104.0, 98.0, 101.0, 99.0])
    assert interval.median == 100.0 and interval.low <= 100.0 <= interval.high and interval.runs == 5
    assert median_interval([7.0]).low is None


def test_judge_finds_the_best_and_what_lies_within_its_noise() -> None:
    points = {0: [100.0, 101.0, 99.0], 1: [150.0, 151.0, 149.0], 2: [149.0, 152.0, 148.0], 3: [60.0, 61.0, 59.0]}
    found = judge(points, maximize=True, reference=2)
    assert found.best == 1 and set(found.within_noise) == {2} and found.reference_within_noise is True
    assert judge(points, maximize=False, reference=0).best == 3
    few = judge(points, maximize=True, reference=0)  # 3 runs a point cannot tell one of 3 ahead of it
    assert few.compared == 3 and not few.beating and few.reference_within_noise is True
    five = {key: [*runs, runs[0] + 0.5, runs[1] - 0.5] for key, runs in points.items()}
    beaten = judge(five, maximize=True, reference=0)
    assert beaten.beating == {1, 2} and beaten.reference_within_noise is False
    assert judge({}, maximize=True) is None


def test_points_ahead_of_the_default_are_decided_across_the_sweep_at_the_stated_error_rate() -> None:
    """Simulated sweeps of 10 points at 5% noise. All equal to the default, 3 runs each: a point's own 95% interval
    calls some point ahead in a third of the sweeps; across the sweep none is (3 runs cannot tell one of 10). At 6
    runs: at most 5% of null sweeps (plus sampling slack) call one ahead, and a point truly 1.15x is found ahead
    in most sweeps."""
    rng = np.random.default_rng(7)
    points, sweeps = 10, 300

    def sweep(gain: float, runs: int) -> tuple[dict[int, np.ndarray], np.ndarray]:
        default = rng.normal(100.0, 5.0, runs)
        return {i: rng.normal(100.0 * (gain if i == 0 else 1.0), 5.0, runs) for i in range(points)}, default

    def ahead(values: dict[int, np.ndarray], default: np.ndarray) -> frozenset[int]:
        return ahead_across({i: p_better(default, v, maximize=True) for i, v in values.items()})

    few = [sweep(1.0, 3) for _ in range(sweeps // 3)]
    alone = sum(any(speedup(d, v, maximize=True).significant for v in values.values()) for values, d in few)
    assert alone / len(few) > 0.2 and not any(ahead(values, d) for values, d in few)
    assert sum(bool(ahead(*sweep(1.0, 6))) for _ in range(sweeps)) / sweeps <= 0.05 + 0.025
    real = [ahead(*sweep(1.15, 6)) for _ in range(sweeps)]
    assert sum(0 in found for found in real) / sweeps >= 0.8
    assert sum(bool(found - {0}) for found in real) / sweeps <= 0.05 + 0.025


def test_holm_holds_each_p_value_to_its_step_and_runs_to_tell_follow_the_rank_test() -> None:
    assert ahead_across({"a": 0.004, "b": 0.03, "c": 0.5}) == {"a"}  # 0.004 <= 0.05/3; 0.03 > 0.05/2
    assert ahead_across({"a": 0.004, "b": 0.02}) == {"a", "b"}  # 0.02 <= 0.05/1
    assert ahead_across({"a": 0.02, "b": 0.02, "c": 0.02}) == frozenset()
    assert p_better([100.0, 101.0, 99.0], [150.0, 151.0, 149.0], maximize=True) == pytest.approx(0.05)
    assert p_better([100.0, 101.0, 99.0], [150.0, 151.0, 149.0], maximize=False) > 0.9
    assert p_better([100.0], [150.0, 151.0], maximize=True) == 1.0
    assert [runs_to_tell(m) for m in (1, 3, 5, 15)] == [3, 4, 5, 6]  # 1/C(2n, n) <= 0.05/m


def test_the_verdict_says_when_the_best_point_is_ahead_alone_but_not_across_the_sweep() -> None:
    best = {"index": 1, "label": "k=1", "median": 110.0, "ci_low": 105.0, "ci_high": 115.0, "runs": [1, 2, 3],
            "default": False, "study": False, "failure": None, "ahead": False,
            "versus_default": {"ratio": 1.1, "ci_low": 1.05, "ci_high": 1.2, "significant": True}}
    data = {"objective": "ops_per_s", "points": [best], "best_point": 0, "within_noise_of_best": [], "around": None,
            "repeats": 3, "compared": 15, "runs_to_tell": 6}
    text = sweep_verdict(data)
    assert "1.10x the default (95% CI 1.05-1.20), but not beyond the noise across the 15 points compared" in text
    assert "at 3 runs a point none can be; --repeats 6 can tell" in text
    assert "ahead beyond the noise across the 15 points compared" in sweep_verdict(
        {**data, "points": [{**best, "ahead": True}]})


# ------------------------------------------------------------------ real sweeps of LevelDB


def _sweep(*args: str) -> dict:
    result = runner.invoke(app, ["sweep", "leveldb", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _error(*args: str) -> str:
    """The real entry point, as users run it: exit 2 and one error line."""
    result = subprocess.run([sys.executable, "-m", "knobtune.cli", "sweep", *args], capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix:" in lines[0], result.stderr
    return lines[0]


def test_a_one_knob_sweep_draws_the_curve_with_intervals_and_the_default(tmp_path: Path) -> None:
    out = tmp_path / "wbs.html"
    data = _sweep("--workload", "fillrandom", "--knob", "write_buffer_size", "--points", "3", "--repeats", "2",
                  "--records", "3000", "--memory-limit", "300MiB", "--dir", str(tmp_path / "s"), "--out", str(out))
    assert [p["shown"]["write_buffer_size"] for p in data["points"]] == ["1 MiB", "4 MiB", "16 MiB", "256 MiB"]
    default = data["points"][data["default_point"]]
    assert default["default"] and default["values"] == {"write_buffer_size": 4 * 2**20}
    measured = [p for p in data["points"] if p["median"] is not None]
    assert len(measured) == 3 and all(len(p["runs"]) == 2 and p["ci_low"] <= p["median"] <= p["ci_high"]
                                      for p in measured)
    too_big = data["points"][-1]  # 2 x 256 MiB of write buffers planned over the 300 MiB limit
    assert too_big["median"] is None and "memory limit" in too_big["failure"]
    assert data["best_point"] is not None and data["verdict"].startswith("best point: write_buffer_size=")
    assert data["timeout_s"] >= 2.0 and data["axes"][0]["log"]
    page = out.read_text()
    assert len(page) > 1_000_000 and "plotly" in page and "default: write_buffer_size=4 MiB" in page
    assert "95% CI of the median" in page and "memory limit" in page
    assert json.loads(out.with_suffix(".json").read_text())["verdict"] == data["verdict"]
    assert len(list((Path(data["logs"]) / "round-2").glob("*.log"))) >= 3, "every run keeps its raw output"


def test_a_two_knob_sweep_is_a_grid_drawn_as_a_heatmap(tmp_path: Path) -> None:
    data = _sweep("--workload", "fillrandom", "--knob", "write_buffer_size", "--knob", "block_size", "--points", "2",
                  "--repeats", "1", "--records", "2000", "--dir", str(tmp_path))
    grid = {(p["shown"]["write_buffer_size"], p["shown"]["block_size"]) for p in data["points"]}
    assert grid == {(w, b) for w in ("1 MiB", "4 MiB", "256 MiB") for b in ("1 KiB", "4 KiB", "256 KiB")}
    assert data["points"][data["default_point"]]["values"] == {"write_buffer_size": 4 * 2**20, "block_size": 4096}
    assert all(p["median"] is not None for p in data["points"])
    assert '"type":"heatmap"' in Path(data["files"]["html"]).read_text()


def test_an_enum_knob_sweeps_its_choices(tmp_path: Path) -> None:
    data = _sweep("--workload", "fillrandom", "--knob", "compression", "--repeats", "2", "--records", "2000",
                  "--dir", str(tmp_path))
    assert [p["values"]["compression"] for p in data["points"]] == ["snappy", "none"]
    assert data["points"][0]["default"] and all(len(p["runs"]) == 2 for p in data["points"])


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """A tiny real study of write_buffer_size and block_size on a one-rung fillrandom (every trial completes)."""
    folder = tmp_path_factory.mktemp("study")
    workload = folder / "fill-one.toml"
    workload.write_text(ONE_RUNG)
    result = runner.invoke(app, ["tune", "leveldb", "--workload", str(workload), "--trials", "3", "--records", "3000",
                                 "--knobs", "write_buffer_size,block_size", "--verify-top", "0", "--study", "wbs",
                                 "--dir", str(folder / "s"), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return folder / "s", workload, json.loads(result.stdout)


def test_around_a_study_keeps_the_others_at_its_values_and_judges_its_value(study) -> None:
    folder, workload, summary = study
    result = summary["result_config"]
    data = _sweep("--workload", str(workload), "--knob", "write_buffer_size", "--around", "wbs", "--points", "2",
                  "--repeats", "2", "--dir", str(folder))
    assert data["around"]["study"] == "wbs" and data["records"] == 3000
    for point in data["points"]:
        assert point["changed"].get("block_size") == result.get("block_size"), point
    point = data["points"][data["study_point"]]
    assert point["study"] and point["values"]["write_buffer_size"] == result.get("write_buffer_size", 4 * 2**20)
    assert data["study_within_noise"] in (True, False) and "Study wbs's value" in data["verdict"]
    assert (folder / "artifacts" / "wbs" / "sweep-write_buffer_size" / "sweep.html").exists()


@pytest.mark.slow
def test_bad_input_is_one_line_with_the_fix(study, tmp_path: Path) -> None:
    folder, _, _ = study
    base = ["leveldb", "--workload", "fillrandom", "--dir", str(tmp_path)]
    assert "unknown knob 'write_bufer_size'" in _error(*base, "--knob", "write_bufer_size")
    assert "not 3" in _error(*base, "--knob", "write_buffer_size", "--knob", "block_size", "--knob", "max_file_size")
    assert "--points 1 is below 2" in _error(*base, "--knob", "write_buffer_size", "--points", "1")
    assert "--repeats 0 is below 1" in _error(*base, "--knob", "write_buffer_size", "--repeats", "0")
    assert "safety class 'durability'" in _error("rocksdb", "--workload", "fillrandom", "--knob", "disable_wal",
                                                 "--dir", str(tmp_path))
    line = _error("rocksdb", "--workload", "fillrandom", "--knob", "write_buffer_size", "--around", "wbs",
                  "--dir", str(folder))
    assert "study 'wbs' tuned leveldb, not rocksdb" in line


def test_the_verdict_says_when_the_study_is_beaten_beyond_the_noise() -> None:
    def point(index: int, runs: list[float], **marks: bool) -> dict:
        interval = median_interval(runs)
        return {"index": index, "label": f"k={index}", "median": interval.median, "ci_low": interval.low,
                "ci_high": interval.high, "runs": runs, "default": marks.get("default", False),
                "study": marks.get("study", False), "versus_default": None, "failure": None}

    def verdict(runs: int) -> str:
        points = [point(0, [100.0, 101.0, 99.0, 100.5, 99.5][:runs], default=True),
                  point(1, [150.0, 151.0, 149.0, 150.5, 149.5][:runs]),
                  point(2, [120.0, 119.0, 121.0, 120.5, 119.5][:runs], study=True)]
        found = judge({p["index"]: p["runs"] for p in points}, maximize=True, reference=2)
        versus = found.versus[2]
        assert math.isclose(versus.ratio, 1.25)
        return sweep_verdict({
            "objective": "ops_per_s", "points": points, "best_point": found.best, "axes": [{}], "repeats": runs,
            "within_noise_of_best": list(found.within_noise), "around": {"study": "s"}, "study_point": 2,
            "study_within_noise": found.reference_within_noise, "study_compared": found.compared,
            "study_versus_best": {"ratio": versus.ratio, "ci_low": versus.ci_low, "ci_high": versus.ci_high}})

    text = verdict(5)
    assert text.startswith("best point: k=1 at 150 ops/s") and "no other point lies within its noise" in text
    assert ("Study s's value, k=2, at 120 ops/s is beaten beyond the noise across the 2 points compared with it "
            "(the best is 1.25x it") in text
    assert ("is not beaten beyond the noise across the 2 points compared with it (the best is 1.25x it, 95% CI "
            in verdict(3)) and "but at 3 runs a point none could be (--repeats 4 can tell)" in verdict(3)


def test_a_knob_only_another_driver_sets_is_refused_with_that_driver_as_the_fix() -> None:
    with pytest.raises(UsageError,
                       match="can be set only by driver kvbench-tunable.*Fix: add --driver kvbench-tunable"):
        plan_sweep(LEVELDB, ["level0_file_num_compaction_trigger"], points=3, driver="kvbench")
    assert len(plan_sweep(LEVELDB, ["level0_file_num_compaction_trigger"], points=3,
                          driver="kvbench-tunable").points) >= 3


def test_sweep_has_help_with_an_example() -> None:
    shown = runner.invoke(app, ["sweep", "--help"], catch_exceptions=False).stdout.replace("\n", " ")
    assert "Example: knobtune sweep" in shown and "--around" in shown
