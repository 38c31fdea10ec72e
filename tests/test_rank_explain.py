"""Which knobs matter: the Latin-hypercube samples, the ranking of a study, top-k tuning, and the ablation path."""

from __future__ import annotations

import json

import optuna
import pytest
from typer.testing import CliRunner

from knobtune.analysis.stats import gain_shares
from knobtune.cli import app
from knobtune.knobs import load_catalog
from knobtune.tuning.proof import change_groups
from knobtune.tuning.records.attrs import is_default
from knobtune.tuning.search import LHS_ROW, LatinHypercubeSampler

runner = CliRunner()


def _ask(study: optuna.Study, n: int) -> list[dict]:
    drawn = []
    for _ in range(n):
        trial = study.ask()
        drawn.append({"x": trial.suggest_float("x", 0.0, 1.0), "n": trial.suggest_int("n", 1, 1000, log=True),
                      "c": trial.suggest_categorical("c", ["a", "b", "c", "d"])})
        study.tell(trial, 0.0)
    return drawn


def test_the_latin_hypercube_uses_every_stratum_of_every_param_once() -> None:
    study = optuna.create_study(sampler=LatinHypercubeSampler(20, ["x", "n", "c"], seed=3))
    drawn = _ask(study, 20)
    assert sorted(int(d["x"] * 20) for d in drawn) == list(range(20)), "one x in each twentieth of its range"
    assert {c: sum(d["c"] == c for d in drawn) for c in "abcd"} == {"a": 5, "b": 5, "c": 5, "d": 5}
    assert all(1 <= d["n"] <= 1000 for d in drawn)
    assert sum(d["n"] < 32 for d in drawn) == pytest.approx(10, abs=1), "log scale: half the draws below sqrt(1000)"


def test_a_resumed_design_goes_on_down_its_rows_and_the_default_takes_none(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'lhs.db'}"
    first = optuna.create_study(study_name="lhs", storage=storage,
                                sampler=LatinHypercubeSampler(10, ["x", "n", "c"], 1))
    first.enqueue_trial({"x": 0.5, "n": 10, "c": "a"})  # the default: fixed params
    _ask(first, 6)
    resumed = optuna.load_study(study_name="lhs", storage=storage,
                                sampler=LatinHypercubeSampler(10, ["x", "n", "c"], 1))
    _ask(resumed, 4)
    rows = [t.system_attrs.get(LHS_ROW) for t in resumed.get_trials()]
    assert rows == [None, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    xs = [t.params["x"] for t in resumed.get_trials()[1:]]
    assert len({int(x * 10) for x in xs}) == 9, "the resumed rows come from the same design"


def test_knobs_a_relation_or_implication_ties_move_together() -> None:
    catalog = load_catalog("rocksdb")
    groups = change_groups(catalog, {"level0_stop_writes_trigger": 40, "level0_slowdown_writes_trigger": 30,
                                     "memtablerep": "vector", "allow_concurrent_memtable_write": False,
                                     "max_background_jobs": 4})
    assert groups == [("allow_concurrent_memtable_write", "memtablerep"),
                      ("level0_slowdown_writes_trigger", "level0_stop_writes_trigger"), ("max_background_jobs",)]


def test_gain_shares_split_the_whole_gain_between_the_steps() -> None:
    default, half, winner = [100.0, 101.0, 99.0], [150.0, 149.0, 151.0], [200.0, 202.0, 198.0]
    shares = gain_shares([default, half, winner], maximize=True)
    assert [round(s.share, 2) for s in shares] == [0.5, 0.5]
    assert all(s.ci_low <= s.share <= s.ci_high for s in shares)
    times = gain_shares([[10.0, 10.0], [10.0, 10.0], [5.0, 5.0]], maximize=False)
    assert [s.share for s in times] == [0.0, 1.0], "for a time, the step that halves it earns all the gain"


@pytest.mark.slow
def test_rank_then_tune_the_top_k_then_explain_on_rocksdb(tmp_path) -> None:
    folder = str(tmp_path / "studies")
    common = ["--workload", "put-get-delete", "--records", "2000", "--dir", folder]
    out = runner.invoke(app, ["rank", "rocksdb", *common, "--samples", "10", "--study", "rank-pgd",
                              "--knobs", "write_buffer_size,max_write_buffer_number,bloom_bits,compression_type,"
                              "max_background_jobs,level0_file_num_compaction_trigger", "--json"],
                        catch_exceptions=False)
    assert out.exit_code == 0, out.output
    ranking = json.loads(out.stdout)
    assert ranking["samples"] >= 8 and len(ranking["order"]) == 6
    assert {"impurity", "permutation"} <= set(ranking["methods"])
    for shares in ranking["methods"].values():
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-6) or sum(shares.values()) == 0

    top = runner.invoke(app, ["tune", "rocksdb", *common, "--ranking", "rank-pgd", "--top-k", "2", "--trials", "3",
                              "--study", "top2", "--verify-top", "0", "--json"], catch_exceptions=False)
    assert top.exit_code == 0, top.output
    summary = json.loads(top.stdout)
    assert summary["ranked_by"] == {"study": "rank-pgd", "top_k": 2, "knobs": ranking["order"][:2]}

    shown = runner.invoke(app, ["show", "rank-pgd", "--dir", folder], catch_exceptions=False)
    assert "knob ranking from" in shown.stdout

    # the first sampled config: trial 0 is the default, and a control can take trial 1 on a slow machine
    trials = optuna.load_study(study_name="top2", storage=f"sqlite:///{folder}/studies.db").get_trials(deepcopy=False)
    first = str(next(t.number for t in trials if not is_default(t.user_attrs)))
    explained = runner.invoke(app, ["explain", "top2", "--trial", first, "--repeats", "2", "--dir", folder, "--json"],
                              catch_exceptions=False)
    assert explained.exit_code == 0, explained.output
    path = json.loads(explained.stdout)
    assert 1 <= len(path["steps"]) <= 2 and path["repeats"] == 2
    changed = json.loads(runner.invoke(app, ["export", "top2", "--trial", first, "--dir", folder]).stdout)
    assert {knob for step in path["steps"] for knob in step["knobs"]} == set(changed["config"]), \
        "the path adds exactly the trial's changes (a relation may have mended a knob beyond the top 2)"
    report = runner.invoke(app, ["report", "top2", "-o", str(tmp_path / "top2.html"), "--dir", folder],
                           catch_exceptions=False)
    assert report.exit_code == 0, report.output
    assert "Which changes earned the gain" in (tmp_path / "top2.html").read_text()
    minimal = runner.invoke(app, ["export", "top2", "--minimal", "--dir", folder])
    if path["minimal"] is None:  # a noisy winner may not measure faster than the default: then there is none
        assert "has no minimal config (the winner did not measure faster" in str(minimal.exception)
    else:
        assert minimal.exit_code == 0, minimal.output
        assert set(json.loads(minimal.stdout)["config"]) == set(path["minimal"])
