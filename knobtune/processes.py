"""Facts about this machine's processes, for every layer that leaves work behind it (storage, targets)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists here (one of another user's counts: it may not be signalled, but it lives)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
