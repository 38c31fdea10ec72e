"""A real small study (RocksDB's db_bench, a tiny put-get-delete) under --time: its verification adds interleaved
rounds while the interval straddles 1, only while they fit, and its verdict names the rounds it stands on in what
`tune` stores, `show` prints and `show --json` gives."""

from __future__ import annotations

import time

import pytest

from knobtune.report import summarize
from knobtune.systems import make_target
from knobtune.tuning import Experiment, Tuner, attrs, build_space
from knobtune.tuning.proof import stopped_open, verify_study

from conftest import tiny

pytestmark = pytest.mark.slow

BUDGET_S = 30.0  # on 2 shared cores, enough for the known configs and a few others to reach full size


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


# a config mostly ahead of the default on put-get-delete at 20,000 records (blob files, a larger cache and write
# buffers, bloom filters): 1.02x-1.22x at this test's first look (2 rounds) in runs beside the rest of the suite
AHEAD = {"enable_blob_files": True, "cache_size": 512 << 20, "bloom_bits": 10, "max_write_buffer_number": 4,
         "write_buffer_size": 128 << 20}
TRIES = 5


def test_a_longer_time_goes_on_with_the_rounds_a_budget_stopped(rocksdb, store, tmp_path) -> None:  # noqa: ANN001
    """A verification stopped by the time budget with its candidate open (2 rounds: far too few to prove a gain) is
    taken up by the next one of the same candidates: the stored rounds stay, rounds are added, looks go on."""
    workload = tiny("put-get-delete", 20000)
    options = dict(study="resumed", space=build_space(rocksdb), search__sampler="random", search__seed=5,
                   budget__trials=1, measurement__control_every=0, research__rules=False,
                   research__try_known_configs=False, start_configs=(("ahead", AHEAD),))
    study = Tuner(Experiment.of(rocksdb, workload, proof__verify_top=0, **options), store).run()  # searched only
    verifying = Experiment.of(rocksdb, workload, proof__verify_top=1, proof__repeats=2, proof__max_rounds=6,
                              proof__known_configs=False, **options)
    target = make_target(rocksdb, workload, tmp_path / "scratch", "db_bench")
    notes: list[str] = []
    for _ in range(TRIES):  # two rounds may settle it at once (when they agree closely) or show no gain: again
        study.set_user_attr(attrs.VERIFICATION, None)
        with target:
            first = verify_study(study, target, verifying, tmp_path / "verify", notes.append, room=lambda s: False)
        if first["stopped"] == "budget":
            break
    assert first["rounds"] == 2 and first["stopped"] == "budget", first["verdict"]
    assert stopped_open(first) == "trial 1", first["verdict"]
    assert "keep the default. Fix: the same command with a longer --time resumes the study" in first["verdict"]
    assert not any("its rounds go on" in note for note in notes)
    with target:
        second = verify_study(study, target, verifying, tmp_path / "verify", notes.append, room=None)
    assert any("the time budget ended it with trial 1 still open after 2 rounds: its rounds go on" in note
               for note in notes), notes
    rounds = second["rounds"]
    assert 2 < rounds <= 6 and second["stopped"] in ("settled", "futile", "most"), second["verdict"]
    default, candidate = second["candidates"]
    assert default["values"][:2] == first["candidates"][0]["values"] and len(default["values"]) == rounds
    assert candidate["values"][:2] == first["candidates"][1]["values"]
    assert candidate["speedup"]["looked"][0] == 2 and candidate["speedup"]["rounds"] == len(candidate["values"])
    assert f"{rounds} interleaved rounds: 2, then {rounds - 2} added" in second["verdict"]
    assert study.user_attrs[attrs.VERIFICATION]["rounds"] == rounds  # what show and export read
    print(first["verdict"], "\n", second["verdict"])  # for the log of a run with -s


def test_candidates_whose_labels_share_their_first_60_characters_log_their_runs_apart() -> None:
    from knobtune.tuning.proof.verify import _log_names

    folder = "/home/someone/configs/" + "tuned-for-the-inbox-application-" * 2
    names = _log_names(["default", folder + "a.json", folder + "b.json", "trial 3"])
    cut = "-home-someone-configs-tuned-for-the-inbox-application-tuned-"  # the first 60, made safe for a file name
    assert names == ["default", cut + "-c1", cut + "-c2", "trial-3"]
