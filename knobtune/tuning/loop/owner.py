"""One process runs a study kept in SQLite: a second `tune` of it is refused, naming the process that runs it.

A SQLite storage is a file on one machine. Two `tune` processes on one study
there would both rewrite how it searches, both verify, and wait on the file's
lock; several processes on one study is what workers on a PostgreSQL storage
are for (docs/workers.md). So while `tune` runs a study kept in SQLite it holds
a lock file beside the database (``.studies.db.NAME.tune.lock``: ``flock``,
which the kernel drops when the process ends, even by SIGKILL), with its host
and pid inside. A second `tune` of the study that cannot take the lock is
refused in one line, before it opens anything; so is one while a live process
on this host runs a trial of the study (a `worker`: the trial's recorded
worker, ``host:pid``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

import optuna
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

from knobtune.errors import UsageError
from knobtune.processes import pid_alive
from knobtune.storage import StudyStore
from knobtune.tuning.records import records


def lock_path(store: StudyStore, study_name: str) -> Path | None:
    """The lock file of ``study_name`` beside ``store``'s SQLite database (None: not a SQLite file)."""
    database = make_url(store.url).database if store.is_sqlite else None
    if not database or database == ":memory:":
        return None
    db = Path(database).expanduser().resolve()
    return db.parent / f".{db.name}.{quote(study_name, safe='')}.tune.lock"


def refuse_if_running(store: StudyStore, study_name: str) -> None:
    """Refuse, before anything runs, a study that another live process runs in a SQLite storage.

    Raises:
        UsageError: one line naming that process (pid, host) and the way to share a study.
    """
    path = lock_path(store, study_name)
    if path is None:
        return
    if path.exists():
        with open(path, "a+") as lock:
            if _locked(lock):
                raise _refusal(store, study_name, _owner_in(path))
            fcntl.flock(lock, fcntl.LOCK_UN)  # a lock its last holder left behind: free
    if worker := _live_trial_owner(store, study_name):
        raise _refusal(store, study_name, worker)


@contextlib.contextmanager
def running(store: StudyStore, study_name: str) -> Iterator[None]:
    """Hold ``study_name``'s lock while the block runs (a SQLite storage; nothing for a server's).

    Raises:
        UsageError: another live process holds it or runs a trial of the study (one line, as above).
    """
    path = lock_path(store, study_name)
    if path is None:
        yield
        return
    store.create()  # the first thing a study writes (open_store makes nothing)
    lock = _take(store, study_name, path)
    try:
        if worker := _live_trial_owner(store, study_name):
            raise _refusal(store, study_name, worker)
        lock.truncate(0)
        lock.write(f"{socket.gethostname()}:{os.getpid()}\n")
        lock.flush()
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: a process waiting on this file finds it gone and retries
        lock.close()


def _take(store: StudyStore, study_name: str, path: Path) -> TextIO:
    """The lock file, opened and locked; the file still at ``path`` (one removed by its last holder is retried)."""
    while True:
        lock = open(path, "a+")
        if _locked(lock):
            lock.close()
            raise _refusal(store, study_name, _owner_in(path))
        try:
            same = os.fstat(lock.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return lock
        lock.close()


def _locked(lock: TextIO) -> bool:
    """Try to take ``lock``; True when another process holds it."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


def _owner_in(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _live_trial_owner(store: StudyStore, study_name: str) -> str | None:
    """The worker (``host:pid``) of a live process on this host, other than this one, running a trial of the study."""
    storage = store.storage()
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        return None  # a new study
    host = socket.gethostname()
    for record in records(study, (TrialState.RUNNING,)):
        worker_host, _, pid = (record.worker or "").rpartition(":")
        if worker_host == host and pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
            return record.worker
    return None


def _refusal(store: StudyStore, study_name: str, worker: str) -> UsageError:
    host, _, pid = worker.rpartition(":")
    who = f"pid {pid} on {host}" if pid.isdigit() else "a process on this machine"
    stop = f"stop it (`kill {pid}`: " if pid.isdigit() else "stop it ("
    return UsageError(
        f"study '{study_name}' is being run by another knobtune process ({who}) in the SQLite storage {store.url}, "
        f"which one process uses at a time. Fix: wait for it to end, or {stop}its finished trials are kept, then run "
        "this command again to resume); to run one study in several processes or on several machines, keep it on a "
        "PostgreSQL storage (--storage postgresql+psycopg://...) and add `knobtune worker` processes (docs/workers.md)")
