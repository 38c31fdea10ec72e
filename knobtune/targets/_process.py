"""Run a benchmark process: argv only (never a shell), output to a log, a hard time limit.

The child gets its own process group and dies with its parent (PR_SET_PDEATHSIG),
so neither a timeout, Ctrl-C nor a SIGKILL of knobtune leaves it running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ProcessResult:
    returncode: int
    elapsed_s: float
    timed_out: bool


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def run_logged(argv: list[str], *, log_path: Path, timeout_s: float | None, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> ProcessResult:
    """Run ``argv`` to completion or until ``timeout_s``, stdout and stderr into ``log_path``.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        start = time.monotonic()
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=cwd, env=env, start_new_session=True, preexec_fn=_die_with_parent)
        try:
            returncode = process.wait(timeout=timeout_s)
            return ProcessResult(returncode, time.monotonic() - start, timed_out=False)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return ProcessResult(process.returncode, time.monotonic() - start, timed_out=True)
        finally:
            _kill_group(process)  # Ctrl-C or any error: never leave the child behind


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
