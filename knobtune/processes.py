"""Facts about this machine's processes, for every layer that leaves work behind it (storage, targets), and the
removal of what a process that is gone left behind."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists here (one of another user's counts: it may not be signalled, but it lives)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LeftBehind:
    """A folder a knobtune process that is gone left behind (killed: it never ran its clean-up)."""

    folder: Path
    pid: int
    size_bytes: int


def left_behind(folder: Path, pid: str) -> LeftBehind | None:
    """``folder``, made by process ``pid`` (its name's digits), when that process is gone, else None.

    A pid alive again after a reboot or a wrap of the pids is another process: one started after the folder was
    last changed cannot have made it, so the folder counts as left behind.
    """
    if not pid.isdigit() or (pid_alive(int(pid)) and not _started_after(int(pid), folder)):
        return None
    return LeftBehind(folder, int(pid), _bytes_in(folder))


def remove_left_behind(folder: Path, pid: str) -> int:
    """Remove ``folder``, left by process ``pid`` (its name's digits), when that process is gone; the bytes freed
    (0 when it lives or is not a pid)."""
    found = left_behind(folder, pid)
    if found is None:
        return 0
    shutil.rmtree(folder, ignore_errors=True)
    return found.size_bytes


def _started_after(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` started after ``folder`` was last changed (so it did not make it); False when either
    cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot_s = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                      if line.startswith("btime "))
        started_s = boot_s + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of proc(5): starttime
        return started_s > folder.stat().st_mtime + 2  # btime is whole seconds
    except (OSError, IndexError, ValueError, StopIteration):
        return False


def _bytes_in(folder: Path) -> int:
    """The bytes of the files under ``folder``; files and folders that vanish meanwhile (another knobtune process
    reclaiming the same folder at once) count as nothing."""
    total = 0
    for root, _, files in os.walk(folder):  # os.walk skips a folder removed under it; rglob raises
        for name in files:
            try:
                status = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            total += status.st_size if stat.S_ISREG(status.st_mode) else 0  # symlinks: not their targets
    return total
