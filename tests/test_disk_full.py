"""A full disk is the machine's failure, never the config's: the study stops in one line and blames no config.

The studies folder's ``scratch/`` (where db_bench builds its stores) is a 64 MiB
tmpfs of its own, mounted as root (CI runs as root). A real study runs on it;
once it has finished trials and runs another, the test fills the tmpfs with a
file, so the running db_bench (or its settle) gets ENOSPC.
"""

from __future__ import annotations

import contextlib
import errno
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from knobtune.tuning import attrs

pytestmark = pytest.mark.slow

STUDY = "full"
DISK = "64m"


@pytest.fixture()
def home(tmp_path: Path) -> Iterator[Path]:
    """A studies folder whose ``scratch/`` is a tmpfs of 64 MiB; unmounted after the test, whatever happened."""
    home = tmp_path / "studies"
    scratch = home / "scratch"
    scratch.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(scratch)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"mounting a tmpfs needs root (CI and scripts/test run as root): {mounted.stderr.strip()}")
    try:
        yield home
    finally:
        if subprocess.run(["umount", str(scratch)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(scratch)], check=False)  # a process still in it: detach anyway


def _tune(home: Path) -> list[str]:
    return [sys.executable, "-m", "knobtune.cli", "tune", "rocksdb", "--workload", "fillrandom", "--records", "40000",
            "--trials", "6", "--study", STUDY, "--dir", str(home), "--sampler", "random", "--verify-top", "0",
            "--control-every", "0"]


def _study(home: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{home / 'studies.db'}")


def _db_bench_under(home: Path) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"db_bench.*{home}"], capture_output=True, text=True).stdout.split()


@contextlib.contextmanager
def _kept_full(folder: Path) -> Iterator[Path]:
    """Write a file into ``folder`` until its disk is full, and keep it full (what a run frees when its store is
    removed is taken again at once, as another process filling the disk would) until the block ends; the file."""
    filler, stop = folder / "filler", threading.Event()
    chunk = b"\0" * (64 << 10)

    def fill(out: BinaryIO) -> None:
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise

    def keep_full(out: BinaryIO) -> None:
        while not stop.wait(0.01):
            fill(out)

    with open(filler, "wb", buffering=0) as out:
        fill(out)
        keeper = threading.Thread(target=keep_full, args=(out,), daemon=True)
        keeper.start()
        try:
            yield filler
        finally:
            stop.set()
            keeper.join()


def _while_db_bench_runs(home: Path, process: subprocess.Popen[bytes], limit_s: float = 10.0) -> bool:
    """Wait until a db_bench of the study runs (a run lasts a tenth of a second here: the check that found a sampled
    trial running is too slow to see one by itself); False if none did within ``limit_s`` or the study ended."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and process.poll() is None:
        if _db_bench_under(home):
            return True
    return False


def _rung_failures(trial: optuna.trial.FrozenTrial) -> dict[str, dict]:
    return {k: v for k, v in trial.user_attrs.items() if k.startswith(attrs.RUNG_PREFIX) and "failure" in v}


def test_a_full_scratch_disk_stops_the_study_and_blames_no_config(home: Path, tmp_path: Path) -> None:
    log, errors = tmp_path / "out.log", tmp_path / "err.log"
    process = subprocess.Popen(_tune(home), stdout=log.open("w"), stderr=errors.open("w"))
    deadline = time.monotonic() + 120
    finished: list[optuna.trial.FrozenTrial] = []
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if "rung" not in log.read_text():  # the SQLite file is made: reading it no longer races its creation
            continue
        trials = _study(home).get_trials(deepcopy=False)
        finished = [t for t in trials if t.state.is_finished()]
        sampled_running = [t for t in trials if t.state == TrialState.RUNNING and not attrs.is_default(t.user_attrs)]
        if len(finished) >= 2 and sampled_running and _while_db_bench_runs(home, process):
            break
    else:
        process.kill()
        pytest.fail("the study never ran a sampled trial after the default: " + log.read_text()[-2000:])
    with _kept_full(home / "scratch") as filler:
        assert process.wait(timeout=120) == 2, log.read_text()[-3000:]
        said = errors.read_text().strip()
        assert len(said.splitlines()) == 1, said
        scratch = home / "scratch"
        match = re.search(r"trial (\d+) failed for a reason that is not the config's: no space left on device in "
                          rf"{re.escape(str(scratch))}/\S+ \(its disk has [\d.]+ \w*B free of 64\.0 MiB; ", said)
        assert match, said
        assert "Finished trials are kept and its config is queued again. Fix: free space on that disk, or run with " \
               "--dir" in said and said.endswith("then run the same command to resume"), said

        trials = {t.number: t for t in _study(home).get_trials(deepcopy=False)}
        for kept in finished:  # every trial that had finished is as it was
            assert (trials[kept.number].state, trials[kept.number].value) == (kept.state, kept.value)
        failed = trials[int(match.group(1))]
        assert failed.state == TrialState.FAIL  # the sampler ignores it
        assert failed.user_attrs[attrs.OUTCOME] == "tool"
        assert failed.user_attrs[attrs.REASON].startswith(f"no space left on device in {scratch}/")
        assert failed.user_attrs[attrs.FIX].startswith("free space on that disk")
        (key, stored), = _rung_failures(failed).items()  # the run that found the disk full says so
        assert stored["failure"] == "tool"
        assert 3 ** int(key.removeprefix(attrs.RUNG_PREFIX)) not in failed.intermediate_values  # no pessimistic value
        for trial in trials.values():  # no run the full disk stopped is scored against its config
            for stored in _rung_failures(trial).values():
                assert stored["failure"] == "tool" or "space" not in stored["reason"].lower(), stored
        retry = [t for t in trials.values() if t.user_attrs.get(attrs.RETRY_OF) == failed.number]
        assert len(retry) == 1 and retry[0].state == TrialState.WAITING
        assert retry[0].system_attrs["fixed_params"] == failed.params
        assert _db_bench_under(home) == []
        assert sorted(p.name for p in scratch.iterdir()) == ["filler"], "the run's store was left on the full disk"

        # still full: the same command refuses to start, in one line with the sizes (nothing is run)
        refused = subprocess.run(_tune(home), capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert f"not enough free space in {scratch} " in refused.stderr and "Fix:" in refused.stderr

    # room again: the same command resumes, and the config the full disk stopped runs to its end
    filler.unlink()
    resumed = subprocess.run(_tune(home), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    trials = {t.number: t for t in _study(home).get_trials(deepcopy=False)}
    assert trials[retry[0].number].state in (TrialState.COMPLETE, TrialState.PRUNED)
    sampled = [t for t in trials.values() if not attrs.is_default(t.user_attrs) and attrs.CONFIG in t.user_attrs]
    assert len([t for t in sampled if t.user_attrs[attrs.OUTCOME] != "tool"]) == 6  # the failed one not counted
    assert _db_bench_under(home) == [] and list(scratch.iterdir()) == []


def test_a_server_whose_own_data_folder_fills_up_fails_as_the_machine_not_the_config(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """PostgreSQL's home (its data copy, in the temporary folder) on a tmpfs of 1.2 GiB (the room its WAL may need),
    filled while pgbench runs: whatever the server then fails to write (its restart after the kill, a WAL segment),
    the run is the machine's failure, with the folder, its free space and the fix."""
    import tempfile  # noqa: PLC0415

    from knobtune.knobs import load_catalog  # noqa: PLC0415
    from knobtune.targets import FailureKind, RunFailure  # noqa: PLC0415
    from knobtune.systems import make_target  # noqa: PLC0415
    from knobtune.systems.postgresql.target import PG_BIN  # noqa: PLC0415

    from conftest import tiny  # noqa: PLC0415

    if not (PG_BIN / "postgres").exists():
        pytest.skip("PostgreSQL 15 is not installed")
    temporary = Path(tempfile.mkdtemp(prefix="knobtune-test-tmpfs-"))  # in /tmp: the postgres user reaches it
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200m,mode=1777", "tmpfs", str(temporary)],
                      capture_output=True).returncode != 0:
        pytest.fail("mounting a tmpfs needs root (CI and scripts/test run as root)")
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setenv("KNOBTUNE_CACHE", str(tmp_path / "cache"))
    catalog, workload = load_catalog("postgresql"), tiny("pgbench-tpcb", 60000)
    outcome: dict[str, object] = {}
    try:
        with make_target(catalog, workload, tmp_path / "scratch") as target:

            def run() -> None:
                try:
                    outcome["measured"] = target.run(catalog.defaults(), workload.full, timeout_s=300,
                                                     log_path=tmp_path / "run.log",
                                                     seed=1)
                except RunFailure as failure:
                    outcome["failure"] = failure

            runner = threading.Thread(target=run)
            runner.start()
            deadline = time.monotonic() + 60
            while not _started_here("pgbench") and runner.is_alive():
                assert time.monotonic() < deadline, "pgbench never started"
                time.sleep(0.05)
            with _kept_full(temporary):
                runner.join(timeout=300)
            assert not runner.is_alive()
    finally:
        if subprocess.run(["umount", str(temporary)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(temporary)], check=False)
        temporary.rmdir()
    failure = outcome.get("failure")
    assert isinstance(failure, RunFailure), f"the run did not fail: {outcome}"
    assert failure.kind is FailureKind.TOOL, failure.reason
    assert failure.reason.startswith(f"no space left on device in {temporary}/"), failure.reason
    assert "free of 1.2 GiB" in failure.reason and failure.fix.startswith("free space on that disk")


def _started_here(program: str) -> bool:
    """Whether a process of ``program`` runs among this test's own descendants (not another run's on the machine)."""
    return any(_name(child) == program for child in psutil.Process().children(recursive=True))


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.NoSuchProcess:
        return ""
