"""A full disk: the machine's failure, never the config's, said with the folder, its free space and the fix.

RocksDB, LevelDB and the C library print ENOSPC as "No space left on device"
(db_bench: "put error: IO error: No space left on device: While appending to
file: ..."); Python raises ``OSError`` with errno 28. Not always: Debian's
db_bench 7.8.3 aborts on an assertion when a write finds the disk full
(``Assertion `sync_without_flush_called_' failed``, signal 6) and says nothing
of the disk. So a failed run is the full disk's when its logs say so, or when
its folder's disk has less than ``NEARLY_FULL_BYTES`` left as it ends (before
its store is removed), whatever the store made of it (a crash, a failed
reopen, a refused open).
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from knobtune.units import human_bytes
from knobtune.targets._base import FailureKind, RunFailure

NO_SPACE = "No space left on device"  # strerror(ENOSPC)
NEARLY_FULL_BYTES = 4 << 20  # a disk with less free space than this when a run fails was full for it
DISK_FULL_FIX = ("free space on that disk, or run with --dir (or KNOBTUNE_HOME) on a disk with room, or a smaller "
                 "--records")
_DETAIL_CHARS = 240


def _free_and_total_bytes(folder: Path) -> tuple[int, int] | None:
    """The free and total bytes of ``folder``'s disk (its nearest existing parent's), or None."""
    for path in (folder, *folder.parents):
        try:
            usage = shutil.disk_usage(path)
        except OSError:
            continue
        return usage.free, usage.total
    return None


def free_space(folder: Path) -> str:
    """"12.0 KiB free of 64.0 MiB" for ``folder``'s disk."""
    usage = _free_and_total_bytes(folder)
    return "free space unknown" if usage is None else f"{human_bytes(usage[0])} free of {human_bytes(usage[1])}"


def nearly_full(folder: Path) -> bool:
    """Whether ``folder``'s disk has less than NEARLY_FULL_BYTES free."""
    usage = _free_and_total_bytes(folder)
    return usage is not None and usage[0] < NEARLY_FULL_BYTES


def no_space_line(*logs: Path | None) -> str | None:
    """The first line of ``logs`` that says the disk was full, trimmed; None when none does."""
    for log in logs:
        if log is None or not log.is_file():
            continue
        for line in log.read_text(errors="replace").splitlines():
            if NO_SPACE in line:
                return line.strip()[-_DETAIL_CHARS:]
    return None


def disk_full(folder: Path, detail: str, log_path: Path | None = None) -> RunFailure:
    """The failure of a run that found no space left in ``folder``: the machine's (TOOL), with its fix."""
    return RunFailure(FailureKind.TOOL, f"no space left on device in {folder} (its disk has {free_space(folder)}; "
                      f"{detail})", log_path, fix=DISK_FULL_FIX)


def is_disk_full(exc: OSError) -> bool:
    return exc.errno == errno.ENOSPC


def disk_full_of(exc: OSError, folder: Path, log_path: Path | None = None) -> RunFailure:
    """The failure for Python's own ENOSPC: the folder of the file it was writing, else ``folder``."""
    where = Path(exc.filename).parent if exc.filename else folder
    return disk_full(where, f"writing {exc.filename or 'a file'}: {exc.strerror}", log_path)
