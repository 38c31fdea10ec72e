"""A real small study (RocksDB's db_bench, a tiny put-get-delete) under --time: its verification adds interleaved
rounds while the interval straddles 1, only while they fit, and its verdict names the rounds it stands on in what
`tune` stores, `show` prints and `show --json` gives."""

from __future__ import annotations

import time

import pytest

from knobtune.report import summarize
from knobtune.tuning import Experiment, Tuner, attrs, build_space

from conftest import tiny

pytestmark = pytest.mark.slow

BUDGET_S = 45.0  # on 2 shared cores, enough for the known configs and a few others to reach full size


def test_a_timed_study_verdict_names_its_rounds_and_ends_in_its_budget(rocksdb, store) -> None:  # noqa: ANN001
    experiment = Experiment.of(
        rocksdb, tiny("put-get-delete", 6000), study="rounds", space=build_space(rocksdb), search__sampler="random",
        search__seed=5, search__reduction_factor=2, budget__time_s=BUDGET_S, proof__verify_top=3, proof__repeats=2,
        proof__max_rounds=8, measurement__control_every=0, research__rules=False)  # the known configs tried first
    started = time.monotonic()
    study = Tuner(experiment, store).run()
    took_s = time.monotonic() - started
    verification = study.user_attrs[attrs.VERIFICATION]
    assert "candidates" in verification, verification["verdict"]
    rounds = verification["rounds"]
    assert 2 <= rounds <= 8 and verification["max_rounds"] == 8 and verification["looks"] == [2, 3, 4, 5, 6, 7, 8]
    assert verification["stopped"] in ("settled", "futile", "most", "budget")
    default = verification["candidates"][0]
    assert default["label"] == "default" and len(default["values"]) == rounds
    for candidate in verification["candidates"][1:]:
        if candidate["reference"]:  # a known config beside the result runs the first look's rounds only
            assert len(candidate["values"]) <= 2
        elif "speedup" in candidate:  # a settled candidate ran no more rounds than the default
            assert 2 <= candidate["speedup"]["rounds"] == len(candidate["values"]) <= rounds
    assert f"{rounds} interleaved rounds" in verification["verdict"]
    summary = summarize(study)
    assert f"{rounds} interleaved rounds" in summary.verdict
    assert summary.to_dict()["verification"]["rounds"] == rounds
    print(verification["verdict"])  # what the study ended with, for the log of a run with -s
    full_run_s = max(r["elapsed_s"] for r in study.user_attrs[attrs.DEFAULT_BY_RUNG].values())
    assert took_s <= BUDGET_S + full_run_s + 5.0, f"{took_s:.1f} s for a {BUDGET_S:.0f} s budget"
