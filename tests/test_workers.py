"""Several workers on one study in a real PostgreSQL storage: shared work, per-machine defaults, lost workers.

Two processes on this host stand in for two machines (``--machine a`` / ``b``):
each measures its own default, and b's trials are told to Optuna in a's units.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from optuna.trial import TrialState

from knobtune.errors import StorageError
from knobtune.storage import StudyStore
from knobtune.systems.postgresql.storage_server import StorageServer
from knobtune.tuning import attrs

from conftest import kill_while

pytestmark = pytest.mark.slow

STUDY = "shared"


@pytest.fixture(scope="module")
def storage_url() -> Iterator[str]:
    with StorageServer() as url:
        yield url


@pytest.fixture()
def study_name(request: pytest.FixtureRequest) -> str:
    return request.node.name.removeprefix("test_")[:40]  # one study per test in the shared server


def _knobtune(*args: str) -> list[str]:
    return [sys.executable, "-m", "knobtune.cli", *args]


def _tune(home: Path, url: str, study: str, trials: int, *extra: str) -> list[str]:
    """A tune on machine a. The tests' studies share one storage: none learns from another's (what a test measures
    must not depend on the tests before it)."""
    return _knobtune("tune", "rocksdb", "--workload", "fillrandom", "--records", "40000", "--trials", str(trials),
                     "--study", study, "--storage", url, "--dir", str(home), "--sampler", "random",
                     "--control-every", "0", "--machine", "a", "--no-earlier-studies", *extra)


def _worker(home: Path, url: str, study: str, *extra: str) -> list[str]:
    return _knobtune("worker", "--study", study, "--storage", url, "--dir", str(home), "--machine", "b", *extra)


def _start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def _await(condition, what: str, limit_s: float = 120) -> None:  # noqa: ANN001
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def _study(url: str, name: str) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name=name, storage=url)
    except KeyError:
        return None


def _started(url: str, name: str) -> bool:
    study = _study(url, name)
    return study is not None and attrs.EXPERIMENT in study.user_attrs


def _left_behind(home: Path, pid: int | None = None) -> list[str]:
    """db_bench processes running under the studies folder ``home`` (of one worker's scratch folder, given its pid)."""
    pattern = f"db_bench.*{home}" + (f"/scratch/[^/]*-{pid}/" if pid else "")
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


def test_two_workers_share_a_study_each_against_its_own_default(storage_url: str, study_name: str,
                                                                 tmp_path: Path) -> None:
    home = tmp_path / "studies"
    first = _start(_tune(home, storage_url, study_name, 12, "--verify-top", "1", "--repeats", "2"), tmp_path / "a.log")
    _await(lambda: _started(storage_url, study_name), "the study to start")
    second = _start(_worker(home, storage_url, study_name), tmp_path / "b.log")
    assert second.wait(timeout=300) == 0, (tmp_path / "b.log").read_text()[-3000:]
    assert first.wait(timeout=300) == 0, (tmp_path / "a.log").read_text()[-3000:]

    study = _study(storage_url, study_name)
    trials = study.get_trials(deepcopy=False)
    # starts the rules queued (fillrandom only writes: the vector-memtable start) that --trials did not reach wait
    # for a resume, asked by no machine; every trial asked names its machine, one that gave way too
    waiting = [t for t in trials if t.state is TrialState.WAITING]
    assert all(attrs.STARTED_FROM in t.user_attrs for t in waiting), [t.user_attrs for t in waiting]
    trials = [t for t in trials if t.state is not TrialState.WAITING]
    by_machine = defaultdict(list)
    for trial in trials:
        by_machine[trial.user_attrs[attrs.TRIAL_MACHINE]].append(trial)
    assert set(by_machine) == {"a", "b"}
    for machine, own in by_machine.items():
        assert any(attrs.is_default(t.user_attrs) for t in own), f"machine {machine} never measured its default"
    sampled = [t for t in trials if not attrs.is_default(t.user_attrs)]
    assert any(t.user_attrs[attrs.TRIAL_MACHINE] == "b" for t in sampled), "the worker ran no sampled trial"
    # each worker checks the budget, then asks; when both ask for the last trial, the higher number gives way
    ran = [t for t in sampled if t.state.is_finished() and attrs.CONFIG in t.user_attrs]
    assert len(ran) == 12, len(ran)
    assert all(t.user_attrs[attrs.OUTCOME] == "budget" for t in sampled if attrs.CONFIG not in t.user_attrs)

    # every measurement names its machine and its ratio to that machine's default; b's are in a's units
    units = study.user_attrs[attrs.DEFAULT_BY_RUNG]
    b_default = next(t for t in by_machine["b"] if attrs.is_default(t.user_attrs))
    measured = defaultdict(set)
    for trial in sampled:
        for key, result in trial.user_attrs.items():
            if not key.startswith(attrs.RUNG_PREFIX) or "failure" in result:
                continue
            assert result["machine"] in ("a", "b") and result["ratio"] > 0
            if result["machine"] == "b":
                rung = key.removeprefix(attrs.RUNG_PREFIX)
                expected = units[rung]["value"] * result["value"] / b_default.user_attrs[key]["value"]
                assert result["study_value"] == pytest.approx(expected)
            measured[(trial.user_attrs[attrs.CONFIG_HASH], key)].add(json.dumps(result, sort_keys=True))
    assert all(len(results) == 1 for results in measured.values()), "a config was measured twice at one rung"
    assert study.user_attrs[attrs.MACHINE_PREFIX + "b"]["cpus"] == os.cpu_count()
    assert attrs.VERIFICATION in study.user_attrs  # the study's own process verified, on its machine
    assert "worker done" in (tmp_path / "b.log").read_text()
    assert _left_behind(home) == []
    shown = subprocess.run(_knobtune("show", study_name, "--storage", storage_url, "--dir", str(home)),
                           capture_output=True, text=True).stdout
    assert "machines: a (" in shown and "; b (" in shown and "values are in a's units" in shown


def test_a_killed_workers_trial_is_run_again_by_the_other(storage_url: str, study_name: str, tmp_path: Path) -> None:
    home = tmp_path / "studies"
    first = _start(_tune(home, storage_url, study_name, 60, "--verify-top", "0"), tmp_path / "a.log")
    _await(lambda: _started(storage_url, study_name), "the study to start")
    second = _start(_worker(home, storage_url, study_name), tmp_path / "b.log")

    def worker_mid_trial() -> list[optuna.trial.FrozenTrial]:
        study = _study(storage_url, study_name)
        return [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                if t.user_attrs.get(attrs.WORKER, "").endswith(f":{second.pid}")
                and not attrs.is_default(t.user_attrs) and attrs.CONFIG_HASH in t.user_attrs]

    mid = kill_while(second.pid, lambda: _left_behind(home, second.pid) and worker_mid_trial(), limit_s=90)
    assert mid, "the worker never ran db_bench in a sampled trial: " + (tmp_path / "b.log").read_text()[-2000:]
    killed = mid[0].number  # taken before the kill: the other process may recover it at once
    second.wait()

    def rerun_ended() -> bool:
        return any(t.user_attrs.get(attrs.RETRY_OF) == killed and t.state.is_finished()
                   for t in _study(storage_url, study_name).get_trials(deepcopy=False))

    _await(lambda: rerun_ended() or first.poll() is not None, "the killed trial's config to run again", 300)
    first.send_signal(signal.SIGTERM)  # the rest of its 60 trials (there to catch the worker mid-trial) are not needed
    assert first.wait(timeout=120) in (0, 143), (tmp_path / "a.log").read_text()[-3000:]

    trials = {t.number: t for t in _study(storage_url, study_name).get_trials(deepcopy=False)}
    assert trials[killed].state == TrialState.FAIL
    assert trials[killed].user_attrs[attrs.OUTCOME] == "interrupted"
    rerun = [t for t in trials.values() if t.user_attrs.get(attrs.RETRY_OF) == killed]
    assert len(rerun) == 1 and rerun[0].state in (TrialState.COMPLETE, TrialState.PRUNED)
    assert rerun[0].user_attrs[attrs.TRIAL_MACHINE] == "a"
    assert rerun[0].params == trials[killed].params
    assert _left_behind(home) == []


def test_a_trial_whose_heartbeat_stopped_is_run_again(storage_url: str, study_name: str, tmp_path: Path) -> None:
    """A worker on another machine that died (no process to look for here): only its heartbeat tells."""
    home = tmp_path / "studies"
    env = {"KNOBTUNE_HEARTBEAT_S": "1"}  # stale after 6 s
    done = subprocess.run(_tune(home, storage_url, study_name, 2, "--verify-top", "0"), capture_output=True, text=True,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stdout[-2000:]
    storage = optuna.storages.RDBStorage(storage_url)
    study = optuna.load_study(study_name=study_name, storage=storage)
    model = next(t for t in study.trials if not attrs.is_default(t.user_attrs))
    lost = optuna.trial.create_trial(state=TrialState.RUNNING, params=model.params, distributions=model.distributions,
                                     user_attrs={attrs.WORKER: "elsewhere:1", attrs.TRIAL_MACHINE: "a"})
    lost_id = storage.create_new_trial(study._study_id, template_trial=lost)
    storage.record_heartbeat(lost_id)  # the worker on "elsewhere" beat once, then its machine died
    lost_number = storage.get_trial(lost_id).number
    time.sleep(7)
    resumed = subprocess.run(_tune(home, storage_url, study_name, 3, "--verify-top", "0"), capture_output=True,
                             text=True, env={**os.environ, **env})
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert f"trial {lost_number} lost its worker (elsewhere:1)" in resumed.stdout
    trials = {t.number: t for t in _study(storage_url, study_name).get_trials(deepcopy=False)}
    assert trials[lost_number].state == TrialState.FAIL
    rerun = [t for t in trials.values() if t.user_attrs.get(attrs.RETRY_OF) == lost_number]
    assert len(rerun) == 1 and rerun[0].params == model.params and rerun[0].state.is_finished()


def test_a_trial_waiting_for_a_dead_workers_run_of_its_config_goes_on_once_that_worker_is_stale(
        storage_url: str, study_name: str, tmp_path: Path) -> None:
    """A trial whose config another worker is measuring waits for that run; when that worker died (its heartbeat
    stopped), the waiting process fails its trial as stale, queues it again and goes on, rather than wait for ever."""
    home = tmp_path / "studies"
    env = {**os.environ, "KNOBTUNE_HEARTBEAT_S": "1"}  # stale after 6 s
    done = subprocess.run(_tune(home, storage_url, study_name, 1, "--verify-top", "0"), capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stdout[-2000:]
    storage = optuna.storages.RDBStorage(storage_url)
    study = optuna.load_study(study_name=study_name, storage=storage)
    model = next(t for t in study.trials if not attrs.is_default(t.user_attrs))
    lost = optuna.trial.create_trial(state=TrialState.RUNNING, params=model.params, distributions=model.distributions,
                                     user_attrs={attrs.WORKER: "elsewhere:1", attrs.TRIAL_MACHINE: "a",
                                                 attrs.CONFIG_HASH: model.user_attrs[attrs.CONFIG_HASH]})
    lost_id = storage.create_new_trial(study._study_id, template_trial=lost)
    storage.record_heartbeat(lost_id)  # it beat just now, then its machine died: fresh when the next tune starts
    lost_number = storage.get_trial(lost_id).number
    study.enqueue_trial(model.params)  # the same config again: its first rung waits for the lost trial's
    resumed = subprocess.run(_tune(home, storage_url, study_name, 3, "--verify-top", "0"), capture_output=True,
                             text=True, env=env, timeout=120)
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert f"trial {lost_number} lost its worker (elsewhere:1)" in resumed.stdout
    assert _study(storage_url, study_name).get_trials(deepcopy=False)[lost_number].state == TrialState.FAIL


def _a_config_measured_elsewhere(storage_url: str, study_name: str, home: Path) -> tuple[
        optuna.trial.FrozenTrial, optuna.storages.RDBStorage, optuna.Study]:
    """A sampled config measured at rung 0 in a study of its own (the model), then the study ``study_name``, which
    never ran it (its first sampled trial is a known config, as the other study's was): the model, the storage, the
    study."""
    model_name = f"{study_name[:32]}-model"
    for name, trials in ((model_name, 2), (study_name, 1)):
        done = subprocess.run(_tune(home, storage_url, name, trials, "--verify-top", "0", "--no-rules"),
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:]
    model = next(t for t in _study(storage_url, model_name).trials if not attrs.is_fixed(t.user_attrs)
                 and "value" in t.user_attrs.get(f"{attrs.RUNG_PREFIX}0", {}))
    storage = optuna.storages.RDBStorage(storage_url)
    return model, storage, optuna.load_study(study_name=study_name, storage=storage)


def _running_elsewhere(storage: optuna.storages.RDBStorage, study: optuna.Study, model: optuna.trial.FrozenTrial,
                       **user_attrs: object) -> tuple[int, int]:
    """A trial of ``model``'s config that a worker on another machine is running (``user_attrs`` besides): its id
    and number."""
    running = optuna.trial.create_trial(
        state=TrialState.RUNNING, params=model.params, distributions=model.distributions,
        user_attrs={attrs.WORKER: "elsewhere:1", attrs.TRIAL_MACHINE: "a", attrs.CONFIG: model.user_attrs[attrs.CONFIG],
                    attrs.CONFIG_HASH: model.user_attrs[attrs.CONFIG_HASH], **user_attrs})
    trial_id = storage.create_new_trial(study._study_id, template_trial=running)
    return trial_id, storage.get_trial(trial_id).number


def _worker_elsewhere(storage: optuna.storages.RDBStorage, study: optuna.Study, trial_id: int, watched: int,
                      waiting: Callable[[optuna.trial.FrozenTrial], bool],
                      stored: dict[str, object]) -> tuple[threading.Thread, threading.Event]:
    """The worker elsewhere running trial ``trial_id``: it beats until trial ``watched`` has been ``waiting`` for
    3 s, or has ended (it did not wait), then stores ``stored`` on its trial and ends it, as its worker would. The
    event is set once ``watched`` was seen waiting."""
    seen = threading.Event()

    def beat() -> None:
        deadline, seen_from = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            storage.record_heartbeat(trial_id)
            try:
                other = storage.get_trial(storage.get_trial_id_from_study_id_trial_number(study._study_id, watched))
            except KeyError:  # not made yet
                other = None
            if other is not None and other.state.is_finished():
                break
            if other is not None and waiting(other) and not seen.is_set():
                seen_from = time.monotonic()
                seen.set()
            if seen_from is not None and time.monotonic() - seen_from > 3:
                break
            time.sleep(0.2)
        for key, value in stored.items():
            storage.set_trial_user_attr(trial_id, key, value)
        storage.set_trial_state_values(trial_id, state=TrialState.PRUNED)

    thread = threading.Thread(target=beat)
    thread.start()
    return thread, seen


def test_a_queued_trial_waits_for_a_later_trial_measuring_its_config_and_takes_its_run(
        storage_url: str, study_name: str, tmp_path: Path) -> None:
    """Trials do not run in the order of their numbers: a queued config keeps the lower number it was given, yet
    another worker may have drawn the same config under a higher one and be measuring it. The queued trial sees that
    trial's claim on the rung, waits for its run and takes it, rather than measure the config a second time."""
    home = tmp_path / "studies"
    model, storage, study = _a_config_measured_elsewhere(storage_url, study_name, home)
    study.enqueue_trial(model.params)  # the queued config: the lower number
    queued = max(t.number for t in study.get_trials(deepcopy=False))
    measuring_id, measuring_number = _running_elsewhere(storage, study, model,
                                                        **{attrs.CLAIM: {"rung": 0, "state": attrs.CLAIM_MEASURING}})
    run = model.user_attrs[f"{attrs.RUNG_PREFIX}0"]
    beating, looked = _worker_elsewhere(storage, study, measuring_id, queued,
                                        lambda t: (t.user_attrs.get(attrs.CLAIM) or {}).get("rung") == 0,
                                        {f"{attrs.RUNG_PREFIX}0": run})
    resumed = subprocess.run(_tune(home, storage_url, study_name, 3, "--verify-top", "0"), capture_output=True,
                             text=True, timeout=180)
    beating.join()
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert looked.is_set(), "the queued trial never said what it does at its first rung"
    took = _study(storage_url, study_name).get_trials(deepcopy=False)[queued]
    assert took.user_attrs[attrs.CONFIG_HASH] == model.user_attrs[attrs.CONFIG_HASH]
    assert took.user_attrs.get(attrs.REUSED_FROM) == measuring_number, resumed.stdout[-2000:]
    assert took.user_attrs[f"{attrs.RUNG_PREFIX}0"] == run


def test_a_trial_waits_at_the_next_rung_of_a_lower_trial_of_its_config_that_has_reached_rung_0(
        storage_url: str, study_name: str, tmp_path: Path) -> None:
    """A lower trial of the same config on another worker has measured rung 0 and is measuring rung 1: the later
    trial takes its rung 0, then waits at rung 1 for its run and takes that too, rather than measure rung 1 a second
    time side by side (CI at e671013, tests/test_hosts.py: rung 0 reached was read as none reached, and both
    measured rung 1)."""
    home = tmp_path / "studies"
    model, storage, study = _a_config_measured_elsewhere(storage_url, study_name, home)
    first = model.user_attrs[f"{attrs.RUNG_PREFIX}0"]
    second = {**first, "value": first["value"] * 1.5}  # any run will do at rung 1: the test reads whose it took
    measuring_id, measuring_number = _running_elsewhere(
        storage, study, model, **{f"{attrs.RUNG_PREFIX}0": first, attrs.REACHED_RUNG: 0,
                                  attrs.CLAIM: {"rung": 1, "state": attrs.CLAIM_MEASURING}})
    # the same config under a higher number, as a known config (never pruned: it climbs to rung 1 whatever rung 0 ran)
    study.enqueue_trial(model.params, user_attrs={attrs.STARTED_FROM: "the lower trial's config"})
    later = measuring_number + 1
    beating, waited = _worker_elsewhere(
        storage, study, measuring_id, later,
        lambda t: t.user_attrs.get(attrs.CLAIM) == {"rung": 1, "state": attrs.CLAIM_DEFERRED},
        {f"{attrs.RUNG_PREFIX}1": second, attrs.REACHED_RUNG: 1})
    resumed = subprocess.run(_tune(home, storage_url, study_name, 3, "--verify-top", "0"), capture_output=True,
                             text=True, timeout=180)
    beating.join()
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    took = _study(storage_url, study_name).get_trials(deepcopy=False)[later]
    assert took.user_attrs[attrs.CONFIG_HASH] == model.user_attrs[attrs.CONFIG_HASH]
    assert took.user_attrs[f"{attrs.RUNG_PREFIX}0"] == first
    assert waited.is_set(), f"the later trial did not wait at rung 1: {took.user_attrs.get(attrs.CLAIM)}"
    assert took.user_attrs[f"{attrs.RUNG_PREFIX}1"] == second
    assert took.user_attrs.get(attrs.REUSED_FROM) == measuring_number


def test_a_machine_of_another_kind_is_refused_unless_allowed(storage_url: str, study_name: str,
                                                             tmp_path: Path) -> None:
    home = tmp_path / "studies"
    done = subprocess.run(_tune(home, storage_url, study_name, 1, "--verify-top", "0"), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    study = _study(storage_url, study_name)
    first = study.user_attrs[attrs.MACHINE]
    study.set_user_attr(attrs.MACHINE, {**first, "cpus": 64, "cpu_model": "Some Other CPU"})  # the first machine
    document = study.user_attrs[attrs.EXPERIMENT]
    study.set_user_attr(attrs.EXPERIMENT, {**document, "budget": {**document["budget"], "trials": 2}})
    refused = subprocess.run(_worker(home, storage_url, study_name), capture_output=True, text=True)
    assert refused.returncode == 2
    message = refused.stderr.strip()
    assert len(message.splitlines()) == 1
    assert "is not of the kind" in message and "cpus: 2 vs 64" in message.replace(f"{os.cpu_count()} vs", "2 vs")
    assert "--allow-mixed-machines" in message
    allowed = subprocess.run(_worker(home, storage_url, study_name, "--allow-mixed-machines"), capture_output=True,
                             text=True)
    assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]
    assert "worker done" in allowed.stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["--study", "nosuch"], "no study 'nosuch'"),
    (["--study", "x", "--storage", "postgresql+psycopg://nobody@/nodb?host=/nonexistent"], "cannot open storage"),
])
def test_joining_what_is_not_there_is_one_clear_line(argv: list[str], message: str, tmp_path: Path) -> None:
    result = subprocess.run(_knobtune("worker", *argv, "--dir", str(tmp_path)), capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Fix:" in result.stderr


def test_a_config_queued_after_the_budget_is_spent_does_not_keep_the_study_running(tmp_path: Path) -> None:
    """The study's process waits for other workers before verifying, then searches on only if its budget allows."""
    home = tmp_path / "studies"
    argv = _knobtune("tune", "rocksdb", "--workload", "fillrandom", "--records", "20000", "--trials", "2",
                     "--study", "spent", "--dir", str(home), "--sampler", "random", "--verify-top", "0")
    assert subprocess.run(argv, capture_output=True, text=True).returncode == 0
    url = f"sqlite:///{home / 'studies.db'}"
    study = _study(url, "spent")
    model = next(t for t in study.trials if not attrs.is_default(t.user_attrs))
    study.enqueue_trial(model.params)  # e.g. a lost worker's trial queued again after the last trial ended
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout[-2000:]
    assert [t.state for t in _study(url, "spent").trials].count(TrialState.WAITING) == 1  # left for a later budget


def test_a_worker_without_the_studys_own_workload_file_is_told_to_copy_it(tmp_path: Path) -> None:
    home, mine = tmp_path / "studies", tmp_path / "my-fill.toml"
    shipped = Path(__file__).parents[1] / "knobtune" / "workloads" / "data" / "fillrandom.toml"
    mine.write_text(shipped.read_text().replace('name = "fillrandom"', 'name = "my-fill"'))
    started = subprocess.run(_knobtune("tune", "rocksdb", "--workload", str(mine), "--records", "5000", "--trials", "1",
                                       "--study", "own", "--dir", str(home), "--verify-top", "0"),
                             capture_output=True, text=True)
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    mine.unlink()  # as on another machine
    joined = subprocess.run(_knobtune("worker", "--study", "own", "--dir", str(home)), capture_output=True, text=True)
    assert joined.returncode == 2
    assert len(joined.stderr.strip().splitlines()) == 1
    assert f"workload 'my-fill' is a file of its first machine ({mine}), not here" in joined.stderr
    assert "Fix: copy it" in joined.stderr


def _running_of(url: str, name: str, pid: int) -> list[int]:
    """The trials process ``pid`` is running, by number."""
    study = _study(url, name)
    return [] if study is None else [
        t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if t.user_attrs.get(attrs.WORKER, "").endswith(f":{pid}")]


def test_a_storage_restarted_under_two_workers_costs_no_trial(study_name: str, tmp_path: Path) -> None:
    """The storage server stops and starts again (its owner's fast shutdown: every connection cut) while both
    workers run trials: both finish the study, the trials they were running end as they would have, none fails."""
    home, server = tmp_path / "studies", StorageServer()
    try:
        url = server.start()
        first = _start(_tune(home, url, study_name, 8, "--verify-top", "0"), tmp_path / "a.log")
        _await(lambda: _started(url, study_name), "the study to start")
        second = _start(_worker(home, url, study_name), tmp_path / "b.log")
        _await(lambda: _running_of(url, study_name, first.pid) and _running_of(url, study_name, second.pid),
               "both workers to run a trial")
        running = _running_of(url, study_name, first.pid) + _running_of(url, study_name, second.pid)
        server.stop_server()
        # down until each process has found it gone (its next call: a trial's end, or its heartbeat within 10 s):
        # a fixed 3 s once missed a process that made no call meanwhile, on a loaded machine
        _await(lambda: all("does not answer" in (tmp_path / log).read_text() for log in ("a.log", "b.log")),
               "both processes to find the storage gone", limit_s=30)
        server.start_server()
        assert second.wait(timeout=120) == 0, (tmp_path / "b.log").read_text()[-3000:]
        assert first.wait(timeout=120) == 0, (tmp_path / "a.log").read_text()[-3000:]

        trials = _study(url, study_name).get_trials(deepcopy=False)
        assert [t.number for t in trials if t.state == TrialState.FAIL] == [], "a trial failed over the restart"
        assert all(trials[n].state in (TrialState.COMPLETE, TrialState.PRUNED) for n in running)
        assert not any(attrs.RETRY_OF in t.user_attrs for t in trials), "a trial had to run again"
        sampled = [t for t in trials if not attrs.is_default(t.user_attrs)]
        assert len([t for t in sampled if t.state.is_finished() and attrs.CONFIG in t.user_attrs]) == 8
        assert all(t.user_attrs[attrs.OUTCOME] == "budget" for t in sampled if attrs.CONFIG not in t.user_attrs)
        for log in ("a.log", "b.log"):  # each process lost its connections, said so once, and went on
            said = (tmp_path / log).read_text()
            assert "does not answer" in said and "answers again" in said, said[-3000:]
        assert _left_behind(home) == []
    finally:
        server.stop()


def test_a_storage_gone_for_good_is_one_line_and_its_running_trial_is_kept(study_name: str, tmp_path: Path) -> None:
    """Past the retry limit (3 s here, 45 s by default), one line names the storage and the fix; the trial in
    progress is left running in the storage (not failed), for the next process to run again."""
    home, server = tmp_path / "studies", StorageServer()
    try:
        url = server.start()
        out, err = tmp_path / "out.log", tmp_path / "err.log"
        tune = subprocess.Popen(_tune(home, url, study_name, 30, "--verify-top", "0"), stdout=out.open("w"),
                                stderr=err.open("w"), env={**os.environ, "KNOBTUNE_STORAGE_RETRY_S": "3"})

        def sampled_running() -> list[int]:
            study = _study(url, study_name)
            return [] if study is None else [
                t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                if not attrs.is_default(t.user_attrs) and attrs.CONFIG_HASH in t.user_attrs]

        _await(lambda: bool(sampled_running()) and _left_behind(home, tune.pid), "a sampled trial to run db_bench")
        running = sampled_running()
        server.stop_server()
        assert tune.wait(timeout=60) == 2, out.read_text()[-3000:]
        said = err.read_text().strip()
        assert len(said.splitlines()) == 1, said
        assert said.startswith("error: lost the storage postgresql+psycopg://") and "did not answer for 3 s" in said
        assert "Fix: check that the storage server is up and reachable from this machine" in said
        assert _left_behind(home) == []
        server.start_server()
        trials = _study(url, study_name).get_trials(deepcopy=False)
        assert [t.number for t in trials if t.state == TrialState.FAIL] == [], "a trial was failed for it"
        left = [t for t in trials if t.state == TrialState.RUNNING]  # the one in progress (unless the stop came
        assert len(left) <= 1 and all(t.user_attrs[attrs.WORKER].endswith(f":{tune.pid}") for t in left)  # between)
        assert all(trials[n].state in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED) for n in running)
    finally:
        server.stop()


def test_a_lost_storage_is_said_in_our_words_not_in_optunas_fallback_warning(tmp_path: Path) -> None:
    """Optuna warns "Caught an error from sqlalchemy ... Falling back to a slower alternative." (many lines, the
    SQL included) when its query of a study's trials fails; when the server went away just before it (as in CI
    once), that is the lost connection, said once by our retries."""
    heard: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
    optuna_logger = logging.getLogger("optuna")
    server = StorageServer()
    try:
        url = server.start()
        storage = StudyStore(tmp_path, url).storage(on_note=heard.append)
        study_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "fallback")
        engine = storage._inner._backend.engine  # noqa: SLF001 (Optuna's cached RDB storage)

        @sqlalchemy.event.listens_for(engine, "before_cursor_execute")
        def server_goes(conn, cursor, statement, *rest) -> None:  # noqa: ANN001
            if "FROM trials" in statement:
                server.stop_server()  # between the study's lookup and the trials' query (then a no-op)

        optuna_logger.addHandler(handler)
        storage._limit_s = 1.0  # noqa: SLF001 (the 45 s default is for real outages)
        with pytest.raises(StorageError, match="did not answer for 1 s"):
            storage.get_all_trials(study_id)
    finally:
        optuna_logger.removeHandler(handler)
        server.stop()
    assert [h for h in heard if "does not answer" in h], heard
    assert not [h for h in heard if "Falling back" in h], heard
