"""Facts about this machine's processes, for every layer that leaves work behind it (storage, targets), and the
removal of what a process that is gone left behind."""

from __future__ import annotations

import os
import shutil
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
    freed = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
    shutil.rmtree(folder, ignore_errors=True)
    return freed
