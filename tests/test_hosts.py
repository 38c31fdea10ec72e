"""One study across hosts made here (network namespaces, tests/hosts.py), and the faults such hosts meet.

A PostgreSQL storage on host ``storage`` (TCP, TLS, a password), ``tune`` on
``h1``, workers on ``h2`` and ``h3``: each host has its own network, host name
and studies folder, as separate machines would. Each test makes one fault
while trials run and checks what docs/workers.md promises: no trial lost, none
counted twice, no trial left running without its process, and the study
verified by its `tune`. Heartbeats every 2 s here (grace 12 s; the default is
10 s and 60 s).
"""

from __future__ import annotations

import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from conftest import kill_while
from hosts import PASSWORD, Hosts, NetworkStorage, knobtune_argv, missing
from knobtune.tuning import attrs

_why = missing()
pytestmark = [pytest.mark.slow, pytest.mark.hosts, pytest.mark.skipif(_why is not None, reason=_why or "")]

HEARTBEAT_S = 2
GRACE_S = 6 * HEARTBEAT_S
LINK_TIMEOUT_S = 2 * HEARTBEAT_S  # knobtune.storage.LINK_TIMEOUT_S at this heartbeat
ENV = {"KNOBTUNE_HEARTBEAT_S": str(HEARTBEAT_S), "KNOBTUNE_STORAGE_RETRY_S": "60"}
RECORDS = "40000"  # runs long enough on the release build to catch a worker mid-trial
TRIALS = 20  # most are pruned at their first rung in a second: enough that a worker is caught mid-trial


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hosts, NetworkStorage]]:
    with Hosts(tmp_path_factory.mktemp("hosts"), ["storage", "h1", "h2", "h3"]) as hosts, \
            NetworkStorage(hosts) as storage:
        yield hosts, storage


@pytest.fixture()
def study_name(request: pytest.FixtureRequest) -> str:
    base, _, param = request.node.name.removeprefix("test_").partition("[")
    return base[:32] + (f"-{param.rstrip(']')}" if param else "")  # one study per test, a parameter's own


class Study:
    """One study's processes on the hosts, and what the test reads of it through the server's socket."""

    def __init__(self, net: tuple[Hosts, NetworkStorage], name: str, logs: Path) -> None:
        (self.hosts, self.storage), self.name, self.logs = net, name, logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def tune(self, host: str, trials: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        argv = knobtune_argv("tune", "rocksdb", "--workload", "fillrandom", "--records", RECORDS, "--trials",
                             str(trials), "--study", self.name, "--storage", self.storage.url, "--dir",
                             str(self.hosts[host].home), "--sampler", "random", "--control-every", "0",
                             "--verify-top", "1", "--repeats", "2", "--no-warm-up", "--no-rules", "--unsettled",
                             "--no-earlier-studies",  # the tests' studies share one storage: none learns from another's
                             "--timeout-factor", "20")  # runs of a second: a loaded machine must not time them out
        return self._start(host, argv, env)

    def worker(self, host: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        argv = knobtune_argv("worker", "--study", self.name, "--storage", self.storage.url, "--dir",
                             str(self.hosts[host].home))
        return self._start(host, argv, env)

    def _start(self, host: str, argv: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
        process = self.hosts.start(host, argv, self.log(host), {**ENV, **(env or {})})
        self.processes[host] = process
        return process

    def log(self, host: str) -> Path:
        return self.logs / f"{host}.log"

    def said(self, host: str) -> str:
        return self.log(host).read_text(errors="replace")

    def failure(self, host: str) -> str:
        """What a process on ``host`` that ended badly said of it: from the last traceback or error line on (two
        processes on one host share its log, and the other's summary may follow), else the log's end."""
        said = self.said(host)
        start = max(said.rfind("Traceback (most recent call last)"), said.rfind("error: "))
        return said[start:][:6000] if start >= 0 else said[-3000:]

    def trials(self) -> list[optuna.trial.FrozenTrial]:
        try:
            return optuna.load_study(study_name=self.name, storage=self.storage.local_url).get_trials(deepcopy=False)
        except KeyError:
            return []

    def user_attrs(self) -> dict:
        return optuna.load_study(study_name=self.name, storage=self.storage.local_url).user_attrs

    def started(self) -> bool:
        for host, process in self.processes.items():
            if process.poll() is not None:
                pytest.fail(f"{host} ended ({process.returncode}) before the study started: {self.said(host)[-3000:]}")
        try:
            return attrs.EXPERIMENT in self.user_attrs()
        except KeyError:
            return False

    def running_sampled(self, host: str) -> list[int]:
        """The sampled trials a process on ``host`` is running (its config drawn, its end not yet being written), by
        number. A trial whose outcome is stored is being told its end: a fault landing then leaves a failed trial
        that says it completed (seen once), which is not the mid-trial fault a test means to make."""
        return [t.number for t in self._running_on(host, self.trials())
                if attrs.CONFIG_HASH in t.user_attrs and attrs.OUTCOME not in t.user_attrs]

    def running_on(self, host: str) -> list[int]:
        """The sampled trials named for a process on ``host`` and running, config drawn or not, by number."""
        return [t.number for t in self._running_on(host, self.trials())]

    @staticmethod
    def _running_on(host: str, frozen: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
        return [t for t in frozen if t.state == TrialState.RUNNING and not attrs.is_default(t.user_attrs)
                and t.user_attrs.get(attrs.WORKER, "").startswith(f"{host}:")]

    def running(self, host: str) -> list[int]:
        """The trials a process on ``host`` is running, its default's and controls included, by number."""
        return [t.number for t in self.trials() if t.state == TrialState.RUNNING
                and t.user_attrs.get(attrs.WORKER, "").startswith(f"{host}:")]

    def running_unnamed(self) -> list[int]:
        """The running trials no process has named itself the worker of yet (before their first heartbeat)."""
        return [t.number for t in self.trials() if t.state == TrialState.RUNNING and attrs.WORKER not in t.user_attrs]

    def ends(self, host: str, limit_s: float = 150) -> int:
        try:
            return self.processes[host].wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{host} did not end within {limit_s:.0f} s: {self.failure(host)}")


def _await(condition: Callable[[], object], what: str, limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            logs = "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-2500:]}"
                           for log in sorted(_LOGS.glob("*.log")))
            pytest.fail(f"timed out waiting for {what}{logs}")
        time.sleep(0.1)


_LOGS = Path("/nonexistent")  # the current test's logs, shown when a wait times out


def _study(net: tuple[Hosts, NetworkStorage], name: str, tmp_path: Path) -> Study:
    global _LOGS
    _LOGS = tmp_path
    return Study(net, name, tmp_path)


def _whole(study: Study, trials: int, lost: tuple[int, ...] = ()) -> None:
    """What every fault must leave: each lost trial failed and run again exactly once to its end, none left
    running, exactly ``trials`` sampled trials counted, no config measured twice at one rung, a verdict."""
    frozen = study.trials()
    by_number = {t.number: t for t in frozen}
    assert [t.number for t in frozen if t.state == TrialState.RUNNING] == [], "a trial is left running"
    for number in lost:
        assert by_number[number].state == TrialState.FAIL
        again = [t for t in frozen if t.user_attrs.get(attrs.RETRY_OF) == number]
        assert len(again) == 1, f"trial {number} was run again {len(again)} times"
        if again[0].state == TrialState.WAITING:  # queued as another worker asked for the last trial: the lower ran
            _said_once("".join(study.said(host) for host in study.processes),
                       f"trial {again[0].number} (the config of lost trial {number}, queued again) did not run")
        else:
            assert again[0].state in (TrialState.COMPLETE, TrialState.PRUNED), again[0].user_attrs
        # the same config (a queued trial holds it as Optuna's fixed params until it runs); a trial lost while its
        # config was being drawn (some params stored) keeps those
        params = again[0].params or again[0].system_attrs.get("fixed_params", {})
        assert params.items() >= by_number[number].params.items()
        if attrs.CONFIG in by_number[number].user_attrs:
            assert params == by_number[number].params
    sampled = [t for t in frozen if not attrs.is_default(t.user_attrs) and t.state != TrialState.WAITING]
    # a lost trial is failed, whatever outcome it stored before its process lost the storage: its retry counts
    counted = [t for t in sampled if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and attrs.CONFIG in
               t.user_attrs and t.user_attrs.get(attrs.OUTCOME) not in (None, "interrupted", "tool")]
    assert len(counted) == trials, [(t.number, t.state.name, t.user_attrs.get(attrs.OUTCOME)) for t in sampled]
    # a sampled trial with no config is one the budget stopped before it drew one, or a lost one (checked above)
    assert all(t.user_attrs.get(attrs.OUTCOME) == "budget" for t in sampled
               if attrs.CONFIG not in t.user_attrs and t.number not in lost)
    # ended by another worker's heartbeat check (keeping an outcome stored before the cut) or a dead pid on its host
    lost_here = [t.number for t in sampled if t.state == TrialState.FAIL and t.user_attrs.get(attrs.OUTCOME) != "tool"]
    assert sorted(lost_here) == sorted(lost), f"trials ended as lost: {lost_here}, expected {list(lost)}"
    measured = defaultdict(dict)
    for trial in counted:
        for key, result in trial.user_attrs.items():
            if key.startswith(attrs.RUNG_PREFIX) and "failure" not in result:
                measured[(trial.user_attrs[attrs.CONFIG_HASH], key)][repr(sorted(result.items()))] = trial
    twice = {at: [(t.number, t.state.name, t.datetime_start, t.datetime_complete,
                   {k: v for k, v in t.user_attrs.items() if not k.startswith(attrs.RUNG_PREFIX)})
                  for t in results.values()] for at, results in measured.items() if len(results) > 1}
    assert not twice, f"a config was measured twice at one rung: {twice}"
    verification = study.user_attrs().get(attrs.VERIFICATION)
    assert verification and verification.get("verdict"), "the study has no verdict"


def _fault_mid_trial(study: Study, host: str, make: Callable[[], None], undo: Callable[[], None]) -> int:
    """Make a fault while ``host`` runs a sampled trial; the trial's number. A trial that ended just before the
    fault landed (``host`` can change nothing once it has) is not taken: the fault is undone and made again."""
    for _ in range(10):
        _await(lambda: study.running_sampled(host), f"{host} to run a sampled trial")
        make()
        if running := study.running_sampled(host):
            return running[0]
        undo()
    pytest.fail(f"{host}'s trials ended before every fault landed")


def _said_once(log: str, text: str) -> None:
    lines = [line for line in log.splitlines() if text in line]
    assert len(lines) == 1, lines or log[-3000:]


def _faults(hosts: Hosts) -> dict[str, tuple[Callable[[str], None], Callable[[str], None]]]:
    return {"link-down": (hosts.cut, hosts.mend),
            "nft-drop": (lambda h: hosts.partition(h, "storage"), hosts.heal)}


@pytest.mark.parametrize("fault", ["link-down", "nft-drop"])
def test_a_worker_cut_off_past_the_grace_has_its_trial_taken_over_and_its_late_result_refused(
        net: tuple[Hosts, NetworkStorage], study_name: str, tmp_path: Path, fault: str) -> None:
    """A link cut (or a silent partition) longer than the grace: another process fails the trial as lost and runs
    its config again; when the link returns the cut worker's result is refused in one line and it goes on."""
    hosts, study = net[0], _study(net, study_name, tmp_path)
    make, undo = _faults(hosts)[fault]
    tune = study.tune("h1", TRIALS)
    _await(study.started, "the study to start")
    study.worker("h2")
    lost = _fault_mid_trial(study, "h2", lambda: make("h2"), lambda: undo("h2"))
    cut_at = time.monotonic()
    _await(lambda: "does not answer" in study.said("h2"), "h2 to notice", limit_s=HEARTBEAT_S + 2 * LINK_TIMEOUT_S + 5)
    noticed_s = time.monotonic() - cut_at
    _await(lambda: study.trials()[lost].state == TrialState.FAIL, "the trial to be taken over", limit_s=GRACE_S + 30)
    undo("h2")
    assert study.ends("h2") == 0, study.said("h2")[-3000:]
    assert tune.wait(timeout=150) == 0, study.said("h1")[-3000:]

    _whole(study, TRIALS, lost=(lost,))
    said = study.said("h2")
    _said_once(said, f"trial {lost}: its result here is not recorded")
    assert "Traceback" not in said and "worker done" in said, said[-3000:]
    _said_once(said, "does not answer")  # one outage, said once
    assert PASSWORD not in said + study.said("h1")
    assert study.trials()[lost].user_attrs.get(attrs.OUTCOME) is None  # nothing of the late run written over it
    assert noticed_s <= HEARTBEAT_S + 2 * LINK_TIMEOUT_S + 2, noticed_s


def test_a_link_cut_shorter_than_the_grace_and_a_storage_server_restart_cost_nothing(
        net: tuple[Hosts, NetworkStorage], study_name: str, tmp_path: Path) -> None:
    """h2's link cut for a quarter of the grace: its trial finishes and is recorded once, by h2. Then the storage
    server restarted (its owner's fast shutdown: every connection cut) while both run trials: nothing fails, nothing
    runs again, each process says the outage once and its end once."""
    (hosts, storage), study = net, _study(net, study_name, tmp_path)
    tune = study.tune("h1", 3 * TRIALS)  # trials left to run after the cut, for the restart
    _await(study.started, "the study to start")
    study.worker("h2")
    cut = _fault_mid_trial(study, "h2", lambda: hosts.cut("h2"), lambda: hosts.mend("h2"))
    time.sleep(GRACE_S / 4)
    hosts.mend("h2")
    _await(lambda: study.trials()[cut].state != TrialState.RUNNING, "the cut trial to end")
    _await(lambda: study.running_sampled("h1") or study.running_sampled("h2"), "a sampled trial to run")
    # a process running a trial when the server stops calls it within the outage (its heartbeat every 2 s, or its
    # result); one verifying calls nothing and may never see the outage
    busy = [host for host, process in study.processes.items() if process.poll() is None and study.running(host)]
    storage.stop_server()
    time.sleep(3)
    storage.start_server()
    assert study.ends("h2") == 0, study.said("h2")[-3000:]
    assert tune.wait(timeout=150) == 0, study.said("h1")[-3000:]
    _whole(study, 3 * TRIALS)
    assert study.trials()[cut].state in (TrialState.COMPLETE, TrialState.PRUNED)
    assert study.trials()[cut].user_attrs[attrs.WORKER].startswith("h2:")
    assert not any(attrs.RETRY_OF in t.user_attrs for t in study.trials())
    assert busy, "no process ran a trial when the storage server stopped"
    for host in study.processes:  # each process the restart met said it once (h2 also once for its cut)
        said = study.said(host).split(f"trial {cut}", 1)[-1] if host == "h2" else study.said(host)
        if host in busy:
            assert "does not answer" in said and "answers again" in said, said[-3000:]
        whole, times = study.said(host), 2 if host == "h2" else 1
        assert whole.count("does not answer") == whole.count("answers again") <= times, whole[-3000:]


def test_a_killed_worker_and_a_killed_verifier_restarted_on_another_host_lose_nothing(
        net: tuple[Hosts, NetworkStorage], study_name: str, tmp_path: Path) -> None:
    """SIGKILL, no word to anyone, on two hosts: a worker (h2), then `tune` (h1), each mid-trial; the same `tune`
    command started again on h3, where a worker runs too. Only the stopped heartbeats tell (another host's pid means
    nothing here): both trials run again once, and the study is verified once, on h3."""
    study = _study(net, study_name, tmp_path)
    tune = study.tune("h1", 8)
    _await(study.started, "the study to start")
    worker, other = study.worker("h2"), study.worker("h3")
    # each killed while paused mid-trial (kill_while: a small rung's trial may end between a look and a kill), so
    # what runs on its host after the kill is what it ran at the kill; a trial not yet named at the kill is either
    # a live process's or a dead one's: its end tells which
    assert kill_while(worker.pid, lambda: study.running_sampled("h2"), limit_s=120), "h2 ran no sampled trial"
    lost, unnamed = study.running_on("h2"), study.running_unnamed()
    assert kill_while(tune.pid, lambda: study.running_sampled("h1"), limit_s=120), "h1 ran no sampled trial"
    lost += study.running_on("h1")
    unnamed += study.running_unnamed()
    assert attrs.VERIFICATION not in study.user_attrs()
    again = study.tune("h3", 8)
    assert again.wait(timeout=150) == 0, study.failure("h3")
    assert other.wait(timeout=60) == 0, study.failure("h3")  # the worker on h3 (the same log)
    by_number = {t.number: t for t in study.trials()}
    lost_unnamed = [n for n in set(unnamed) - set(lost) if by_number[n].state == TrialState.FAIL
                    and attrs.WORKER not in by_number[n].user_attrs
                    and by_number[n].user_attrs.get(attrs.OUTCOME) is None]
    _whole(study, 8, lost=tuple(lost + lost_unnamed))
    told = study.said("h3")
    assert all(f"trial {n} lost its worker (h" in told for n in lost), told[-3000:]
    assert all(f"trial {n} lost its worker (unknown)" in told for n in lost_unnamed), told[-3000:]
    # verified once, on h3, and never begun on h1; a candidate may be turned away before its runs (its verifiable
    # twin ran past its limit: a config that reads slowly, a vector memtable), which ends in a verdict too
    assert told.count("verdict: ") == 1, told[-3000:]
    assert "verifying" not in study.said("h1") and "verifiable twin" not in study.said("h1")


def test_a_storage_host_gone_past_the_retry_limit_stops_every_process_in_one_line_and_the_study_resumes(
        net: tuple[Hosts, NetworkStorage], study_name: str, tmp_path: Path) -> None:
    """The storage's host unreachable for longer than the retries (8 s here): each process stops in one line, its
    trial left running; when the host is back, the same commands finish the study with nothing lost."""
    hosts, study = net[0], _study(net, study_name, tmp_path)
    short = {"KNOBTUNE_STORAGE_RETRY_S": "8"}
    tune = study.tune("h1", TRIALS, short)
    _await(study.started, "the study to start")
    worker = study.worker("h2", short)
    _await(lambda: study.running_sampled("h2") and tune.poll() is None, "h2 to run a sampled trial")
    hosts.cut("storage")
    try:
        for host, process in (("h1", tune), ("h2", worker)):
            assert process.wait(timeout=8 + 2 * LINK_TIMEOUT_S + 30) == 2, study.said(host)[-3000:]
            last = study.said(host).strip().splitlines()[-1]
            assert last.startswith("error: lost the storage postgresql+psycopg://knobtune:***@"), last
    finally:
        hosts.mend("storage")
    left = [t.number for t in study.trials() if t.state == TrialState.RUNNING]
    assert left and [t.number for t in study.trials() if t.state == TrialState.FAIL] == []
    tune = study.tune("h1", TRIALS)
    study.worker("h2")
    assert tune.wait(timeout=150) == 0, study.said("h1")[-3000:]
    assert study.ends("h2") == 0, study.said("h2")[-3000:]
    _whole(study, TRIALS, lost=tuple(n for n in left if not attrs.is_default(study.trials()[n].user_attrs)))
