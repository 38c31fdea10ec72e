"""``knobtune clean``: what killed knobtune processes left (scratch, server data folders), listed, then removed;
a live process's folders stay. Run in-process, against a private studies folder and a private temporary folder."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from knobtune.cli import run


def _folder(path: Path, size: int) -> Path:
    path.mkdir(parents=True)
    (path / "data").write_bytes(b"x" * size)
    return path


@pytest.fixture()
def left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Two folders of a pid that cannot be alive (pid_max itself), one of a pid alive again (this process, started
    after the folder last changed: a reboot's reuse), and one of this process that it really made."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    dead = Path("/proc/sys/kernel/pid_max").read_text().strip()
    me, host = os.getpid(), socket.gethostname()
    studies = tmp_path / "studies"
    folders = {
        "scratch": _folder(studies / "scratch" / f"{host}-{dead}", 300_000),
        "home": _folder(tmp_path / "tmp" / f"knobtune-pg-{dead}-abc", 200_000),
        "reused": _folder(tmp_path / "tmp" / f"knobtune-pg-{me}-old", 1000),
        "live": _folder(studies / "scratch" / f"{host}-{me}", 1000),
        "studies": studies,
    }
    long_ago = time.time() - 30 * 24 * 3600
    os.utime(folders["reused"], (long_ago, long_ago))
    return folders


def test_clean_lists_then_removes_what_dead_processes_left(left: dict[str, Path],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["clean", "--dry-run", "--dir", str(left["studies"])]) == 0
    listed = capsys.readouterr().out
    assert f"would remove {left['scratch']} (293.0 KiB, left by process" in listed
    assert f"would remove {left['home']}" in listed and f"would remove {left['reused']}" in listed
    assert str(left["live"]) not in listed and "would remove 3 folder(s)" in listed
    assert all(left[name].exists() for name in ("scratch", "home", "reused", "live"))

    assert run(["clean", "--dir", str(left["studies"]), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["removed"] and {row["folder"] for row in done["folders"]} == {
        str(left["scratch"]), str(left["home"]), str(left["reused"])}
    assert done["bytes"] >= 501_000
    assert not any(left[name].exists() for name in ("scratch", "home", "reused")) and left["live"].exists()

    assert run(["clean", "--dir", str(left["studies"])]) == 0
    assert "nothing to clean" in capsys.readouterr().out
