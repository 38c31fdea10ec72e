"""Where studies live: an Optuna storage URL plus a folder for artifacts and scratch data.

By default both are in ``./knobtune-studies`` (override with ``--dir`` or
``KNOBTUNE_HOME``): ``studies.db`` (SQLite), ``artifacts/<study>/`` with each
trial's raw output, and ``scratch/`` for the databases under test. Any Optuna
storage URL (any database SQLAlchemy and Optuna reach) may replace the SQLite file; the study
name plus that URL is all it takes to come back to a study.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import sqlalchemy.exc
from sqlalchemy.engine import make_url

from knobtune.errors import StorageError, StudyNotFoundError
from knobtune.interrupts import quiet_after_a_stop
from knobtune.outputs import is_sqlite
from knobtune.names import existing_ancestor, inside
from knobtune.names import study_name as study_name_checked
from knobtune.processes import LeftBehind, left_behind, remove_left_behind
from knobtune.reconnecting import ReconnectingStorage, shown_url

DEFAULT_HOME = "knobtune-studies"
# a running trial's process writes a heartbeat this often; a trial without one for 6 times as long has lost its
# process (its machine died, or the network to the storage): another worker runs it again
HEARTBEAT_S = max(1, int(os.environ.get("KNOBTUNE_HEARTBEAT_S", "10")))
GRACE_S = 6 * HEARTBEAT_S
# a storage server over a network: a link that dies without a word (a cable, a partition that drops packets) is
# noticed by TCP within about this long, rather than after the kernel's retransmissions (~15 min) or its
# keepalives (2 h); a slow but live server is not taken for dead (its kernel still acknowledges)
LINK_TIMEOUT_S = 2 * HEARTBEAT_S

StaleTrialCallback = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]


@dataclass(frozen=True)
class StudyStore:
    home: Path
    url: str

    @property
    def scratch_root(self) -> Path:
        return self.home / "scratch"

    def artifacts(self, study_name: str) -> Path:
        """The folder of ``study_name``'s raw output, proven to be inside ``home/artifacts``.

        Raises:
            UsageError: the name would leave that folder (a separator, '..', empty).
        """
        return inside(self.home / "artifacts", study_name)

    def worker_scratch(self) -> Path:
        """This process's own scratch folder (removed when the target stops)."""
        return self.scratch_root / f"{socket.gethostname()}-{os.getpid()}"

    @property
    def shown_url(self) -> str:
        """``url`` as it may be printed: its password hidden."""
        return shown_url(self.url)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite:")

    def storage(self, on_stale: StaleTrialCallback | None = None,
                on_note: Callable[[str], None] | None = None) -> optuna.storages.BaseStorage:
        """The Optuna storage behind ``url``, with heartbeats.

        ``on_stale`` is called for a trial whose heartbeat stopped.
        A server's storage retries a lost connection for a while (``knobtune.reconnecting``), saying so to ``on_note``.

        Raises:
            StorageError: the URL cannot be opened.
        """
        self.check_url()
        self.create()
        try:
            with self._creation_lock(), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats: chosen knowingly
                rdb = optuna.storages.RDBStorage(
                    self.url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                    heartbeat_stale_trial_callback=on_stale, engine_kwargs=link_limits(self.url))
                pool_logger = rdb.engine.pool.logger  # its pool class's logger (one of its own only under echo_pool)
                if isinstance(pool_logger, logging.Logger):
                    pool_logger.addFilter(quiet_after_a_stop)
                storage = optuna.storages.get_storage(rdb)
        except Exception as exc:  # Optuna raises many kinds for a bad URL
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StorageError(f"cannot open storage '{self.shown_url}': {first_line}. "
                               "Fix: give a valid Optuna storage URL (e.g. sqlite:///studies.db)") from None
        # its abstract methods are attached by setattr (knobtune.reconnecting), which mypy does not see
        return storage if self.is_sqlite else ReconnectingStorage(storage, self.url, on_note)  # type: ignore[abstract]

    def check_url(self) -> None:
        """What can be told of ``url`` without opening it (nothing is created): its database kind is known and its
        driver installed; a SQLite file is in a folder that exists (or is the studies folder, made when it is first
        written) and is a SQLite database when it exists.

        Raises:
            StorageError: one line naming the URL, the cause and the fix.
        """
        fix = "Fix: give a valid Optuna storage URL (e.g. sqlite:///studies.db)"
        try:
            parsed = make_url(self.url)
            parsed.get_dialect()
        except Exception as exc:  # noqa: BLE001  SQLAlchemy raises several kinds for a bad URL or a missing driver
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StorageError(f"cannot open storage '{self.shown_url}': {first_line}. {fix}") from None
        if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
            return
        database = Path(parsed.database).expanduser().absolute()
        if database.parent.resolve() != self.home and not database.parent.is_dir():
            raise StorageError(f"cannot open storage '{self.shown_url}': the folder {database.parent} does not exist. "
                               f"Fix: create it first, or give a SQLite file in an existing folder")
        if database.is_dir() or (database.is_file() and database.stat().st_size and not is_sqlite(database)):
            raise StorageError(f"cannot open storage '{self.shown_url}': {database} is not a SQLite database. Fix: "
                               "give a studies database, or a new file's path")

    def create(self) -> None:
        """Make the studies folder (once every input is checked: ``open_store`` makes nothing).

        Raises:
            StorageError: it cannot be made.
        """
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot make the studies folder {self.home} ({exc.strerror}). "
                               "Fix: choose a writable folder with --dir or KNOBTUNE_HOME") from None

    def _sqlite_missing(self) -> bool:
        """Whether the storage is a SQLite file that does not exist yet (it holds no study, and opening it would
        make it)."""
        if not self.url.startswith("sqlite:///"):
            return False
        database = make_url(self.url).database
        return database is not None and database not in ("", ":memory:") and not Path(database).expanduser().exists()

    def find(self, study_name: str) -> optuna.Study | None:
        """An existing study, or None (without making a storage that is not there).

        Raises:
            StorageError: the URL cannot be opened.
        """
        if self._sqlite_missing():
            self.check_url()
            return None
        try:
            return self.load(study_name)
        except StudyNotFoundError:
            return None

    @contextlib.contextmanager
    def _creation_lock(self) -> Iterator[None]:
        """One process at a time creates the SQLite storage in ``home`` (two creating its tables at once race)."""
        if not self.url.startswith("sqlite:///"):
            yield
            return
        with open(self.home / ".storage.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load(self, study_name: str) -> optuna.Study:
        """An existing study.

        Raises:
            StudyNotFoundError: no study of that name in the storage.
        """
        if self._sqlite_missing():  # nothing to load: say so without making the file
            self.check_url()
            study_name_checked(study_name, "study")
            raise StudyNotFoundError(f"no study '{study_name}' in {self.shown_url} (studies there: none). "
                                     "Fix: check --study, --storage and --dir")
        storage = self.storage()
        names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
        if study_name not in names:
            study_name_checked(study_name, "study")  # a name that cannot be a study says why, not only that it is
            # missing
            listed = ", ".join(names) if names else "none"
            raise StudyNotFoundError(f"no study '{study_name}' in {self.shown_url} (studies there: {listed}). "
                                     "Fix: check --study, --storage and --dir")
        return optuna.load_study(study_name=study_name, storage=storage)

    def stale_scratch(self) -> list[LeftBehind]:
        """The scratch folders of processes on this host that are gone (killed by SIGKILL, or the machine stopped)."""
        return [found for folder in sorted(self.scratch_root.glob(f"{socket.gethostname()}-*"))
                if (found := left_behind(folder, folder.name.rsplit("-", 1)[-1])) is not None]

    def remove_stale_scratch(self) -> int:
        """Remove scratch folders of processes on this host that are gone (after a SIGKILL); the bytes freed."""
        return sum(remove_left_behind(folder, folder.name.rsplit("-", 1)[-1])
                   for folder in self.scratch_root.glob(f"{socket.gethostname()}-*"))


def link_limits(url: str) -> dict[str, object]:
    """SQLAlchemy's engine settings that bound how long a dead link to a PostgreSQL storage goes unnoticed: libpq's
    connect timeout, TCP keepalives and user timeout, all about ``LINK_TIMEOUT_S``; each unless the URL sets it.
    (A Unix socket has no link: libpq ignores them there.)"""
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        return {}
    if parsed.get_backend_name() != "postgresql":
        return {}
    limit_s = LINK_TIMEOUT_S
    limits = {"connect_timeout": max(2, limit_s), "keepalives": 1, "keepalives_idle": max(1, limit_s // 2),
              "keepalives_interval": max(1, limit_s // 4), "keepalives_count": 2, "tcp_user_timeout": limit_s * 1000}
    return {"connect_args": {k: v for k, v in limits.items() if k not in parsed.query}}


def open_store(home: str | Path | None = None, url: str | None = None) -> StudyStore:
    """The store under ``home`` (``$KNOBTUNE_HOME`` or ``./knobtune-studies``), SQLite unless ``url``. Nothing is
    made: the folder is made when something is first written there (``StudyStore.create``), after every input of
    the command is checked.

    Raises:
        StorageError: the folder (or, while it does not exist, the nearest folder that does) cannot be written.
    """
    folder = Path(home or os.environ.get("KNOBTUNE_HOME") or DEFAULT_HOME).expanduser().resolve()
    try:
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(20, "Not a directory")
        # one per process: they may race
        with tempfile.NamedTemporaryFile(dir=existing_ancestor(folder), prefix=".write-test-"):
            pass
    except OSError as exc:
        raise StorageError(f"cannot write to the studies folder {folder} ({exc.strerror}). "
                           "Fix: choose a writable folder with --dir or KNOBTUNE_HOME") from None
    return StudyStore(home=folder, url=url or f"sqlite:///{folder / 'studies.db'}")
