"""The study storage: several processes opening one new SQLite storage at once all succeed; a server's URL is
shown without its password; a dead link to a server is noticed within a bound."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy.exc

from knobtune.errors import StorageError
from knobtune.reconnecting import ReconnectingStorage
from knobtune.storage import LINK_TIMEOUT_S, StudyStore, link_limits

OPEN = "from knobtune.storage import open_store; open_store(%r).storage(); print('ok')"


@pytest.mark.slow
def test_processes_creating_one_new_storage_at_once_all_succeed(tmp_path: Path) -> None:
    home = tmp_path / "studies"
    home.mkdir()
    processes = [subprocess.Popen([sys.executable, "-c", OPEN % str(home)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, [err for _, err in results]
    assert (home / "studies.db").exists()


def test_a_storage_that_cannot_be_opened_is_named_without_its_password(tmp_path: Path) -> None:
    url = "postgresql+psycopg://knobtune:secret-word@/studies?host=/nonexistent"
    with pytest.raises(StorageError, match="cannot open storage") as raised:
        StudyStore(tmp_path, url).storage()
    assert "secret-word" not in str(raised.value) and "knobtune:***@" in str(raised.value)


def test_a_postgresql_storage_bounds_how_long_a_dead_link_goes_unnoticed() -> None:
    """libpq's connect timeout, keepalives and TCP user timeout, about LINK_TIMEOUT_S; what the URL sets wins."""
    limits = link_limits("postgresql+psycopg://k:p@10.0.0.5/studies?sslmode=require&connect_timeout=30")
    assert limits["connect_args"] == {"keepalives": 1, "keepalives_idle": LINK_TIMEOUT_S // 2,
                                      "keepalives_interval": max(1, LINK_TIMEOUT_S // 4), "keepalives_count": 2,
                                      "tcp_user_timeout": LINK_TIMEOUT_S * 1000}
    assert link_limits("sqlite:///studies.db") == {}


def test_an_attempt_begun_before_the_storage_answered_again_does_not_say_it_is_lost_again() -> None:
    """Two threads in one outage (the heartbeat's and the trial's): one is answered again while the other's
    connect, begun before, is still timing out. The outage and its end are each said once; the late failure is
    retried without a word (seen across a partition: "answers again", then "does not answer" once more)."""
    heard: list[str] = []
    begun, release = threading.Event(), threading.Event()
    lost = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection timeout expired"))
    attempts: dict[str, int] = {}

    class Inner:
        def get_all_studies(self) -> list:
            name = threading.current_thread().name
            attempts[name] = attempts.get(name, 0) + 1
            if attempts[name] == 1:
                if name == "slow":  # begun in the outage, fails after the other thread was answered
                    begun.set()
                    release.wait(5)
                raise lost
            return []

    storage = ReconnectingStorage(Inner(), "postgresql+psycopg://k:p@10.0.0.5/studies",  # type: ignore[arg-type]
                                  heard.append)
    slow = threading.Thread(target=storage.get_all_studies, name="slow")
    slow.start()
    assert begun.wait(5)
    assert storage.get_all_studies() == []  # lost, then answered again after 0.5 s
    release.set()
    slow.join(10)
    assert ["answers again" if "answers again" in h else "does not answer" for h in heard] == [
        "does not answer", "answers again"], heard


QUIET = """
import logging, os, signal, time
from knobtune.interrupts import catch_stops
from knobtune.storage import open_store
open_store(%r).storage()
catch_stops()
pool = logging.getLogger("sqlalchemy.pool.impl.QueuePool")  # the SQLite storage's pool class logs through it
pool.error("a pool error before any stop")
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
except KeyboardInterrupt:
    try:
        raise RuntimeError("Cannot operate on a closed database.")
    except RuntimeError:
        pool.error("Error closing cursor", exc_info=True)
print("stopped")
"""


def test_what_sqlalchemys_pool_logs_once_a_stop_arrived_is_not_printed(tmp_path: Path) -> None:
    """A SIGTERM that lands inside a storage query leaves SQLAlchemy closing a cursor of a closed connection, and it
    logged that with a traceback (a SIGTERM test saw it): once a stop arrived, its pool's logger says nothing."""
    ran = subprocess.run([sys.executable, "-c", QUIET % str(tmp_path / "studies")], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "stopped", ran.stderr
    assert "a pool error before any stop" in ran.stderr
    assert "Error closing cursor" not in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
