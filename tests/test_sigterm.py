"""SIGTERM (a service manager's or a batch system's stop) ends every command that runs something as Ctrl-C does.

Each test starts the real command on RocksDB's db_bench at a small size, waits until it has finished at least one run
and is inside another, sends SIGTERM to knobtune alone (not its process group: knobtune must take its own children
down), and checks: exit status 143, one line saying it stopped and what it kept, what finished is kept as it was,
nothing half-written without saying so, and no process it started still running. ``tune`` is checked in
``test_resume.py``.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from knobtune.cli import KEPT_BY_A_STUDY, KEPT_WHEN_STOPPED
from knobtune import interrupts
from knobtune.interrupts import InterruptsDeferred, after_a_stop
from knobtune.server import process as _process
from knobtune.server.process import INTERRUPTED_MARK, run_logged
from knobtune.tuning import attrs

pytestmark = pytest.mark.slow

RECORDS = "3000"  # put-get-delete x 10 KiB: a full-size run takes about 0.3 s here
_FINISHED_TRIAL = re.compile(r"trial \d+( \(the default[^)]*\))? (complete|pruned|timeout|refused|crash|data-loss|"
                             r"memory): ")
_FINISHED_ROUND = re.compile(r"^round \d+(/\d+)? .*: ", re.MULTILINE)


def _knobtune(*args: str) -> list[str]:
    return [sys.executable, "-m", "knobtune.cli", *args]


@dataclass
class Stopped:
    """A command stopped by SIGTERM: its status, its output, and every process it had started that was seen."""

    pid: int
    returncode: int
    output: str
    started: dict[int, float] = field(default_factory=dict)  # pid -> create time, of every descendant seen

    @property
    def last_line(self) -> str:
        return [line for line in self.output.splitlines() if line.strip()][-1]


def _descendants(process: psutil.Process) -> dict[int, float]:
    found = {}
    for child in process.children(recursive=True):
        try:
            found[child.pid] = child.create_time()
        except psutil.NoSuchProcess:
            continue
    return found


def _stop_when(argv: list[str], log: Path, ready: Callable[[str], bool], *, limit_s: float = 60,
               before: Callable[[], None] = lambda: None, mid_run: bool = True) -> Stopped:
    """Run ``argv``; once ``ready(output)`` (and, with ``mid_run``, while it has a child process running), call
    ``before`` and send SIGTERM to it alone."""
    process = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT)
    parent, started = psutil.Process(process.pid), {}
    deadline = time.monotonic() + limit_s
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"it ended before it could be stopped (status {process.returncode}): "
                            f"{log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"it never got ready to be stopped: {log.read_text()[-2000:]}")
            running = _descendants(parent)
            started.update(running)
            if ready(log.read_text()) and (running or not mid_run):
                before()
                started.update(_descendants(parent))
                process.send_signal(signal.SIGTERM)
                break
            time.sleep(0.02)
        returncode = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return Stopped(process.pid, returncode, log.read_text(), started)


def _assert_stopped(stopped: Stopped, home: Path, kept: str) -> None:
    assert stopped.returncode == 143, stopped.output[-3000:]
    assert stopped.last_line == f"stopped (SIGTERM): {kept}", stopped.output[-3000:]
    assert "Traceback" not in stopped.output, stopped.output[-3000:]
    time.sleep(0.2)  # a child killed at the parent's death (PR_SET_PDEATHSIG) is reaped by init
    alive = [pid for pid, created in stopped.started.items() if _alive(pid, created)]
    assert alive == [], f"processes knobtune started outlived it: {alive}"
    assert subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True).stdout == "", \
        "a process working in the studies folder outlived knobtune"
    assert list((home / "scratch").glob("*")) == [], "scratch data left behind"


def _alive(pid: int, created: float) -> bool:
    try:
        process = psutil.Process(pid)
        return process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _assert_logs_whole_or_marked(folder: Path, finished_runs: int) -> None:
    """Every raw log is a finished program's (db_bench's ends with its last benchmark's result, a settle's has its
    result file) or ends saying it was cut; at least one whole db_bench log per finished run."""
    whole_runs, cut = 0, []
    for log in folder.rglob("*.log"):
        text = log.read_text(errors="replace")
        if text.rstrip().endswith(INTERRUPTED_MARK):
            cut.append(log.name)
        elif log.name.endswith(".settle.log"):
            assert log.with_suffix(".result.json").is_file(), f"{log} is neither whole nor marked cut"
        else:
            assert re.search(r"^deleterandom\s*:.* ops/sec", text, re.MULTILINE), f"{log} is neither whole nor marked"
            whole_runs += 1
    assert whole_runs >= finished_runs >= 1
    assert len(cut) <= 1, cut  # the one program running when SIGTERM came


# ------------------------------------------------------------------ studies: worker, rank


def _load(home: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{home / 'studies.db'}")


def _finished(home: Path, name: str) -> dict[int, tuple[TrialState, float | None]]:
    return {t.number: (t.state, t.value) for t in _load(home, name).get_trials(deepcopy=False)
            if t.state.is_finished()}


def _assert_study_kept(home: Path, name: str, before: dict[int, tuple[TrialState, float | None]], pid: int) -> None:
    """Every trial finished before SIGTERM is as it was; the stopped process left no trial RUNNING; the one it was
    in (if any) is marked interrupted and, unless it ran the default, queued again with the same config."""
    trials = _load(home, name).get_trials(deepcopy=False)
    assert len(before) >= 1
    for number, (state, value) in before.items():
        assert (trials[number].state, trials[number].value) == (state, value)
    assert [t.number for t in trials if t.state == TrialState.RUNNING] == [], "a trial was left RUNNING"
    mine = f"{socket.gethostname()}:{pid}"
    interrupted = [t for t in trials if t.user_attrs.get(attrs.OUTCOME) == "interrupted"
                   and t.user_attrs.get(attrs.WORKER) == mine]
    assert len(interrupted) <= 1
    for trial in interrupted:
        assert trial.state == TrialState.FAIL
        if not attrs.is_default(trial.user_attrs):
            retries = [t for t in trials if t.user_attrs.get(attrs.RETRY_OF) == trial.number]
            assert len(retries) == 1 and retries[0].state == TrialState.WAITING
            assert retries[0].system_attrs["fixed_params"] == trial.params  # Optuna's own queue: the same config


def _finished_by(output: str, after: str) -> int:
    return len(_FINISHED_TRIAL.findall(output.partition(after)[2]))


@pytest.fixture()
def joinable(tmp_path: Path) -> Path:
    """A study of 1 trial (its default measured on this machine), then given a budget of 40 for a worker."""
    home = tmp_path / "studies"
    done = subprocess.run(_knobtune("tune", "rocksdb", "--workload", "put-get-delete", "--records", RECORDS,
                                    "--trials", "1", "--study", "joined", "--dir", str(home), "--sampler", "random",
                                    "--verify-top", "0", "--no-rules"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    study = _load(home, "joined")
    document = study.user_attrs[attrs.EXPERIMENT]
    study.set_user_attr(attrs.EXPERIMENT, {**document, "budget": {**document["budget"], "trials": 40}})
    return home


@pytest.mark.parametrize("moment", ["mid-run", "between-trials"])
def test_sigterm_stops_a_worker_keeping_its_finished_trials(joinable: Path, tmp_path: Path, moment: str) -> None:
    """Mid-run: db_bench or the settle is running. Between trials: right after one ended, when the next is being
    asked for (a trial asked for and not yet recorded as the worker's must not be left RUNNING)."""
    home, before = joinable, {}
    stopped = _stop_when(_knobtune("worker", "--study", "joined", "--dir", str(home)), tmp_path / "worker.log",
                         lambda out: _finished_by(out, "joined study") >= 1,
                         before=lambda: before.update(_finished(home, "joined")), mid_run=moment == "mid-run")
    _assert_stopped(stopped, home, KEPT_BY_A_STUDY)
    trials = _load(home, "joined").get_trials(deepcopy=False)
    assert any(trials[n].user_attrs.get(attrs.WORKER, "").endswith(f":{stopped.pid}") for n in before), \
        "the worker had finished no trial of its own before SIGTERM"
    _assert_study_kept(home, "joined", before, stopped.pid)


def test_sigterm_stops_rank_keeping_its_finished_samples(tmp_path: Path) -> None:
    home, before = tmp_path / "studies", {}
    stopped = _stop_when(_knobtune("rank", "rocksdb", "--workload", "put-get-delete", "--records", RECORDS,
                                   "--samples", "30", "--study", "ranked", "--dir", str(home)), tmp_path / "rank.log",
                         lambda out: _finished_by(out, "ranking study") >= 2,
                         before=lambda: before.update(_finished(home, "ranked")))
    _assert_stopped(stopped, home, KEPT_BY_A_STUDY)
    _assert_study_kept(home, "ranked", before, stopped.pid)
    assert attrs.RANKING not in _load(home, "ranked").user_attrs  # no ranking of a design cut short


# ------------------------------------------------------------------ measurements: compare, sweep


def test_sigterm_stops_compare_keeping_its_finished_runs_raw_output(tmp_path: Path) -> None:
    home, config = tmp_path / "studies", tmp_path / "more-buffers.json"
    config.write_text('{"max_write_buffer_number": 4}')
    stopped = _stop_when(_knobtune("compare", "rocksdb", "--workload", "put-get-delete", "--records", RECORDS,
                                   "--config", "default", "--config", str(config), "--repeats", "30",
                                   "--dir", str(home)), tmp_path / "compare.log",
                         lambda out: len(_FINISHED_ROUND.findall(out)) >= 1)
    _assert_stopped(stopped, home, KEPT_WHEN_STOPPED["compare"])
    _assert_logs_whole_or_marked(home / "compare", len(_FINISHED_ROUND.findall(stopped.output)))


def test_sigterm_stops_sweep_writing_no_result(tmp_path: Path) -> None:
    home = tmp_path / "studies"
    stopped = _stop_when(_knobtune("sweep", "rocksdb", "--workload", "put-get-delete", "--records", RECORDS,
                                   "--knob", "max_write_buffer_number", "--points", "3", "--repeats", "10",
                                   "--dir", str(home)), tmp_path / "sweep.log",
                         lambda out: len(_FINISHED_ROUND.findall(out)) >= 1)
    _assert_stopped(stopped, home, KEPT_WHEN_STOPPED["sweep"])
    folder = home / "artifacts" / "sweep-rocksdb-put-get-delete-max_write_buffer_number"
    assert not list(folder.glob("sweep.*")), "an unfinished sweep wrote a result"
    _assert_logs_whole_or_marked(folder / "runs", len(_FINISHED_ROUND.findall(stopped.output)))


# ------------------------------------------------------------------ the step an interrupt must not split


def test_a_signal_held_while_a_trial_is_claimed_lands_at_the_release(tmp_path: Path) -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    reached = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with InterruptsDeferred() as deferred:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler would have raised here
                reached.append("claimed")
                deferred.release()
                reached.append("after the release")
        assert reached == ["claimed"]
        assert signal.getsignal(signal.SIGTERM) is interrupt  # the handler is back
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_stop_during_the_start_of_a_program_kills_it_and_marks_its_log(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM arriving while ``spawn`` holds the signals (here: right after the fork) is delivered at the release:
    the program just started is killed and the still-empty log says it was cut (a compare's log was left empty)."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    started = []

    class SignalledPopen(subprocess.Popen):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self.pid)
            os.kill(os.getpid(), signal.SIGTERM)  # deferred: lands at spawn's release

    previous = signal.signal(signal.SIGTERM, interrupt)
    monkeypatch.setattr(_process.subprocess, "Popen", SignalledPopen)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_logged(["sleep", "30"], log_path=tmp_path / "run.log", timeout_s=60)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(started) == 1 and not Path(f"/proc/{started[0]}").exists(), "the program started is gone"
    assert (tmp_path / "run.log").read_text().strip() == INTERRUPTED_MARK


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt, on purpose
def test_a_stop_lost_in_a_finalizer_starts_no_more_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised while Python runs a finalizer is printed as "Exception ignored" and dropped (a
    tune once went on after Ctrl-C, in CI): the stop is noted, and the next program does not start."""
    monkeypatch.setattr(interrupts._Stop, "signum", None)
    saved = {signum: signal.getsignal(signum) for signum in interrupts.STOP_SIGNALS}

    class Collected:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here, inside the finalizer: its KeyboardInterrupt is dropped

    try:
        interrupts.catch_stops()
        Collected()  # collected at once
        assert interrupts.stopped_by() == signal.SIGTERM  # the stop arrived, and nothing was raised here
        with pytest.raises(KeyboardInterrupt):
            run_logged(["touch", str(tmp_path / "started")], log_path=tmp_path / "run.log", timeout_s=60)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    assert not (tmp_path / "started").exists(), "a program started after the stop"


def test_a_stop_that_cuts_a_storage_write_leaves_the_trial_markable(tmp_path: Path) -> None:
    """A KeyboardInterrupt landing inside an Optuna write to SQLite can leave the cut write's connection holding the
    database's lock until it is collected; the clean-up's ``tell`` then failed with "database is locked" and the
    trial stayed RUNNING (CI: a worker stopped between trials; here about 1 cut in 12). After ``after_a_stop`` every
    cut trial is told how it ended."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'cut.db'}", study_name="cut")
    armed = threading.Event()

    def interrupt(signum: int, frame: object) -> None:
        if armed.is_set():  # only inside the writes: the test's own steps are never cut
            armed.clear()
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    cuts, rng = 0, random.Random(1)
    try:
        for _ in range(50):  # about 4 cuts that kept the lock, at 1 in 12
            trial = study.ask()
            timer = threading.Timer(rng.uniform(0, 0.015), os.kill, (os.getpid(), signal.SIGTERM))
            try:
                try:  # armed and started inside: a timer quick enough to fire within start() is a cut like the others
                    armed.set()
                    timer.start()
                    for n in range(50):
                        trial.set_user_attr(f"a{n}", n)
                    time.sleep(0.05)
                finally:  # disarmed before leaving: a timer late on a loaded machine must not cut the test itself
                    armed.clear()
            except BaseException as exc:  # noqa: BLE001 - the cut, as TrialRunner.run catches it
                cuts += 1
                after_a_stop(exc)
            timer.join()
            if study._storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
                study.tell(trial, state=TrialState.FAIL)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert cuts >= 30  # most stops landed inside a write
    assert [t.number for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING] == []
