"""A scratch PostgreSQL server to keep studies in (``--storage``): a storage helper, not a target under test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import KnobtuneError
from knobtune.targets import await_server
from knobtune.server.process import run_logged, spawn, stop_group
from knobtune.server.life import remove_stale_homes
from knobtune.systems.postgresql.server import (
    DB_NAME, DB_USER, HOME_PREFIX, PG_USER, POLL_S, READY_LIMIT_S, accepts_connections, initdb_argv, postgres_argv,
    postgres_user, server_message,
)


class StorageServer:
    """A scratch PostgreSQL server to keep studies in (``--storage``), for trying workers on one machine and for
    tests: knobtune's child like the servers under test, on a Unix socket only, removed on exit. Studies on
    several machines need a server they all reach, set up by its owner (docs/workers.md).

    Usage: ``with StorageServer() as url: ...``; ``url`` is an Optuna (SQLAlchemy) storage URL.
    """

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        """``settings``: more of the server's settings (one ``-c`` each), beside ``max_connections``."""
        self.settings = dict(settings or {})
        self._home: Path | None = None
        self._server: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start the server and return its storage URL.

        Raises:
            ToolMissingError: PostgreSQL is not installed.
            KnobtuneError: initdb or the server failed (the message names the log).
        """
        user = postgres_user()
        remove_stale_homes(HOME_PREFIX)
        self._home = home = Path(tempfile.mkdtemp(prefix=f"{HOME_PREFIX}{os.getpid()}-storage-"))
        shutil.chown(home, user.pw_uid, user.pw_gid)
        init = run_logged(initdb_argv(home / "data"), log_path=home / "initdb.log", timeout_s=300, user=PG_USER)
        if init.returncode != 0:
            raise KnobtuneError(f"initdb of the storage server failed. Fix: see {home / 'initdb.log'}")
        self.start_server()
        return f"postgresql+psycopg://{DB_USER}@/{DB_NAME}?host={home}"

    def start_server(self) -> None:
        """Start the server on its data (after ``stop_server``: the same studies, the same URL) and wait for it.

        Raises:
            KnobtuneError: it did not start (the message names the log).
        """
        if self._home is None:
            raise KnobtuneError("the storage server has no data folder. Fix: start it with start() first")
        home, log = self._home, self._home / "server.log"
        self._server = spawn(postgres_argv(home / "data", home, {"max_connections": "200", **self.settings}),
                             log_path=log, user=PG_USER)
        await_server(self._server, lambda: accepts_connections(home), system="PostgreSQL (storage)",
                     why_exited=lambda: server_message(log), log=log, default_config=True, refusal=False,
                     limit_s=READY_LIMIT_S, poll_s=POLL_S)

    @property
    def home(self) -> Path:
        """The server's folder: its socket, and its data in ``data/``.

        Raises:
            KnobtuneError: it is not started.
        """
        if self._home is None:
            raise KnobtuneError("the storage server has no folder. Fix: start it with start() first")
        return self._home

    def stop_server(self) -> None:
        """Stop the server as its owner's fast shutdown does (every connection is cut), keeping its data."""
        if self._server is not None:
            stop_group(self._server, signal.SIGINT)
            self._server = None

    def stop(self) -> None:
        self.stop_server()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
