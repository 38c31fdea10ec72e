"""The study storage: several processes opening one new SQLite storage at once all succeed; a server's URL is
shown without its password; a dead link to a server is noticed within a bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from knobtune.errors import StorageError
from knobtune.storage import LINK_TIMEOUT_S, StudyStore, link_limits

OPEN = "from knobtune.storage import open_store; open_store(%r).storage(); print('ok')"


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
