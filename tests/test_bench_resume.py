"""A bench stopped before its end goes on where it stopped (bench/_steps.py, ``bench/run.py --dir DIR --resume``):
the knobtune commands that ended are not run again, a `tune` a stopped sitting left half-searched runs anew, the
result names the earlier sitting, and a folder whose steps ran on other code, or a bench that times itself, is
refused in one line. Real `tune`s of RocksDB at a tiny size."""

from __future__ import annotations

import contextlib
import datetime
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import psutil
import pytest
from typer.testing import CliRunner

from knobtune.cli import app
from knobtune.storage import open_store
from knobtune.tuning import attrs

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import _cli  # noqa: E402  (bench/ holds scripts, not a package)
import _stamp  # noqa: E402
import _steps  # noqa: E402
import suite  # noqa: E402

TUNE = ("tune", "rocksdb", "--workload", "fillrandom", "--records", "2000", "--trials", "2", "--sampler", "random",
        "--knobs", "write_buffer_size,bloom_bits", "--verify-top", "0")


def _trials(home: Path, study: str) -> list[optuna.trial.FrozenTrial]:
    storage = open_store(home).storage()
    return optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)


def _sampled(home: Path, study: str) -> int:
    """Sampled trials: the default and its controls (one more when its warm-up ran much faster, as on a loaded
    machine) are not counted."""
    return len([t for t in _trials(home, study) if not attrs.is_default(t.user_attrs)])


@pytest.fixture(autouse=True)
def keeping(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process keeps its steps, as a bench script that says ``RESUMES = True`` does."""
    monkeypatch.setattr(_steps, "KEEPS", True)
    monkeypatch.setattr(_steps, "_REUSED", {})


def _sitting(monkeypatch: pytest.MonkeyPatch, minutes: int) -> None:
    """A new sitting of the bench: its start later, its commands asked for anew."""
    monkeypatch.setattr(_steps, "_ASKED", {})
    monkeypatch.setitem(_stamp.STARTED, "at", datetime.datetime.now(datetime.timezone.utc)
                        + datetime.timedelta(minutes=minutes))


@pytest.mark.slow
def test_a_resumed_bench_reuses_the_steps_that_ended_and_runs_a_half_searched_tune_anew(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "studies"
    monkeypatch.delenv(_steps.RESUME_ENV, raising=False)
    tuned = json.loads(_cli.knobtune(*TUNE, "--seed", "1", "--study", "a", "--json", home=home))
    took_s = _cli.last_step_s()
    assert took_s > 0 and _sampled(home, "a") == 2
    ran = [(t.number, t.datetime_start) for t in _trials(home, "a")]
    # the sitting stops while `tune b` searches: its study is there, its step is not
    half = CliRunner().invoke(app, [*TUNE[:7], "1", *TUNE[8:], "--seed", "2", "--study", "b", "--no-earlier-studies",
                                    "--dir", str(home)])
    assert half.exit_code == 0, half.output
    assert _sampled(home, "b") == 1
    half_started = _trials(home, "b")[0].datetime_start

    _sitting(monkeypatch, 60)
    monkeypatch.setenv(_steps.RESUME_ENV, "1")
    again = json.loads(_cli.knobtune(*TUNE, "--seed", "1", "--study", "a", "--json", home=home))
    assert again == tuned and _cli.last_step_s() == round(took_s, 1), "its output and its time, as they were"
    assert [(t.number, t.datetime_start) for t in _trials(home, "a")] == ran, "a step that ended is not run again"
    _cli.knobtune(*TUNE, "--seed", "2", "--study", "b", "--json", home=home)
    anew = _trials(home, "b")
    assert anew[0].datetime_start > half_started and _sampled(home, "b") == 2, \
        "the half-searched study was removed and run anew, whole"

    [earlier] = _steps.earlier_sittings()
    assert earlier["commit"] == _stamp.STARTED["commit"] and earlier["quiet"]["quiet"] in (True, False)
    stamp = _stamp.stamp(None, [earlier])
    assert stamp["sittings"] == [earlier] and stamp["started"] == earlier["started"]
    assert stamp["quiet"]["quiet"] == (stamp["quiet"]["this_sitting"] and earlier["quiet"]["quiet"])
    assert suite.sittings_line(stamp).startswith("resumed: steps of 1 earlier sitting reused (")


def test_a_command_run_twice_is_two_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bench that runs one command more than once (repeats) gets each run's own output back, in order."""
    monkeypatch.setattr(_steps, "_ASKED", {})
    monkeypatch.delenv(_steps.RESUME_ENV, raising=False)
    for output in ("first", "second"):
        assert _steps.reused(tmp_path, ("compare", "x")) is None
        _steps.record(tmp_path, ("compare", "x"), output, 1.0)
    _sitting(monkeypatch, 60)
    monkeypatch.setenv(_steps.RESUME_ENV, "1")
    assert [_steps.reused(tmp_path, ("compare", "x")) for _ in range(3)] == [("first", 1.0), ("second", 1.0), None]


def test_resuming_is_refused_in_one_line_where_it_would_mix_code_or_clocks(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    headroom, timed = BENCH / "headroom.py", BENCH / "peers.py"
    assert _steps.resumes(headroom) and not _steps.resumes(timed)
    assert not _steps.resumes(Path(sys.argv[0])), "pytest is no bench script: its steps are kept only by the fixture"
    assert _steps.resume_problem(tmp_path, False, headroom) is None, "a new folder runs"
    _steps.record(tmp_path, ("show", "a"), "{}", 1.0)
    refused = _steps.resume_problem(tmp_path, False, headroom)
    assert refused is not None and "Fix: add --resume" in refused
    refused = _steps.resume_problem(tmp_path, True, timed)
    assert refused is not None and "cannot resume" in refused and "Fix: run it without --resume" in refused
    first = subprocess.run(["git", "-C", str(BENCH), "rev-list", "--max-parents=0", "HEAD"], capture_output=True,
                           text=True).stdout.split()[0]
    kept = json.loads((tmp_path / _steps.FILE).read_text())
    for sitting in kept["sittings"].values():
        sitting["commit"] = first[:7]
    (tmp_path / _steps.FILE).write_text(json.dumps(kept))
    refused = _steps.resume_problem(tmp_path, True, headroom)
    assert refused is not None and f"ran on commit {first[:7]}" in refused and "Fix: resume from a checkout" in refused
    assert "\n" not in refused


def test_a_stopped_step_stops_the_bench_and_is_not_kept(tmp_path: Path) -> None:
    """A knobtune command stopped by SIGTERM (a sitting's end) is not a failure a script records and goes on from
    (``except SystemExit`` does not catch it); its step is not kept, so ``--resume`` runs it; the script ends with
    status 130 and one line. A real `tune`, stopped while it runs."""
    raised: list[BaseException] = []
    command = ("tune", "rocksdb", "--workload", "fillrandom", "--records", "2000", "--time", "10m", "--sampler",
               "random", "--knobs", "write_buffer_size,bloom_bits")

    def step() -> None:
        try:
            _cli.knobtune(*command, home=tmp_path)
        except SystemExit as failed:
            raised.append(failed)  # what a bench script does with a failed step: caught, recorded, gone on from
        except BaseException as stopped:  # noqa: BLE001  (what the test asks for)
            raised.append(stopped)

    running = threading.Thread(target=step)
    running.start()
    try:
        deadline = time.monotonic() + 60
        while not (tunes := [p for p in psutil.Process().children() if "tune" in p.cmdline()]):
            assert time.monotonic() < deadline and running.is_alive(), f"the tune did not start: {raised}"
            time.sleep(0.1)
        time.sleep(2)  # into its search
        tunes[0].send_signal(signal.SIGTERM)
        running.join(120)
        assert not running.is_alive(), "the stopped tune did not end"
    finally:  # a failure above must not leave its 10-minute tune running: end what this test started
        started = [p for p in psutil.Process().children() if "tune" in p.cmdline()]
        for process in [child for p in started for child in p.children(recursive=True)] + started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        running.join(30)
    assert len(raised) == 1 and isinstance(raised[0], _cli.Stopped), raised
    assert not isinstance(raised[0], SystemExit) and "--resume" in str(raised[0])
    assert _steps.reused(tmp_path, command) is None, "a stopped step is run again, not reused"
    with pytest.raises(SystemExit) as ended, _cli.ends_when_stopped():
        raise raised[0]
    assert ended.value.code == 130


def test_a_change_to_the_test_modules_alone_still_resumes_but_one_to_the_applications_they_capture_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    for name in ("knobtune/loop.py", "tests/test_loop.py", "tests/apps/shop.py", "docs/tuning.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("one\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    commit = git("rev-parse", "HEAD").strip()
    monkeypatch.setattr(_stamp, "REPO", tmp_path)
    for prose_or_test in ("tests/test_loop.py", "docs/tuning.md"):
        (tmp_path / prose_or_test).write_text("two\n")
    assert not _steps._changed(commit), "a bench runs no test module: its steps still hold"
    (tmp_path / "tests/apps/shop.py").write_text("two\n")
    assert _steps._changed(commit), "a bench captures the applications in tests/apps: they are code"
