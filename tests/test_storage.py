"""The study storage: several processes opening one new SQLite storage at once all succeed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OPEN = "from knobtune.storage import open_store; open_store(%r).storage(); print('ok')"


def test_processes_creating_one_new_storage_at_once_all_succeed(tmp_path: Path) -> None:
    home = tmp_path / "studies"
    home.mkdir()
    processes = [subprocess.Popen([sys.executable, "-c", OPEN % str(home)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, [err for _, err in results]
    assert (home / "studies.db").exists()
