"""Facts about this machine's processes, for every layer that leaves work behind it (storage, targets), and the
removal of what a process that is gone left behind."""

from __future__ import annotations

import os
import shutil
import stat
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


def remove_left_behind(folder: Path, pid: str) -> int:
    """Remove ``folder``, left by process ``pid`` (its name's digits), when that process is gone; the bytes freed
    (0 when it lives or is not a pid)."""
    if not pid.isdigit() or pid_alive(int(pid)):
        return 0
    freed = _bytes_in(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return freed


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
