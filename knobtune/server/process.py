"""Run a benchmark process: argv only (never a shell), output to a log, a hard time limit, its memory measured.

The child gets its own process group and dies with its parent (PR_SET_PDEATHSIG),
so neither a timeout, Ctrl-C nor a SIGKILL of knobtune leaves it running. Its
peak resident memory is the kernel's high-water mark of the program
(``VmHWM``), read while it runs. Not ``wait4``'s ``ru_maxrss``: the child is
forked from knobtune, and ``ru_maxrss`` keeps the forked copy of knobtune's
own memory from before the exec (``/bin/true`` run from a 430 MiB knobtune
"used" 430 MiB). With a memory limit, its resident memory is also checked
while it runs and it is killed as soon as it uses more.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from knobtune.interrupts import InterruptsDeferred, raise_if_stopped

_PR_SET_PDEATHSIG = 1
INTERRUPTED_MARK = "knobtune: stopped (Ctrl-C or SIGTERM) before this program ended; its output above is incomplete"
_POLL_S = 0.005
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcessResult:
    returncode: int
    elapsed_s: float
    timed_out: bool
    peak_rss_bytes: int  # the most resident memory the program used (its VmHWM; see the module's note)
    over_memory: bool = False  # killed because it used more than the memory limit


def _die_with(parent: int) -> Callable[[], None]:
    """What the child runs between fork and exec: die with ``parent`` (this process), even when it died already,
    between the fork and the prctl (then no signal would ever come)."""
    def die_with_parent() -> None:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass
        if os.getppid() != parent:
            os._exit(1)
    return die_with_parent


def spawn(argv: list[str], *, log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None,
          user: str | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, dying with knobtune, output into ``log_path``; as ``user`` if given.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    raise_if_stopped()  # a stop whose KeyboardInterrupt was lost (knobtune.interrupts) starts no more programs
    log_path.parent.mkdir(parents=True, exist_ok=True)
    as_user = user or None  # None (or ""): as this process's user, with its groups
    # Ctrl-C and SIGTERM are deferred across the fork: Python runs its after-fork hooks (logging's lock release)
    # where a KeyboardInterrupt raised by a signal handler is printed as "Exception ignored" and lost, and the
    # stop with it (seen: a tune that went on after SIGTERM). Deferred, the signal is delivered once Popen returns.
    with InterruptsDeferred() as deferred:
        with open(log_path, "ab") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                       env=env, start_new_session=True, preexec_fn=_die_with(os.getpid()),
                                       user=as_user, group=as_user, extra_groups=None if as_user is None else [])
        try:
            deferred.release()
        except BaseException:  # the stop that arrived meanwhile: the program just started goes with it
            _kill_group(process)
            raise
    return process


def run_logged(argv: list[str], *, log_path: Path, timeout_s: float | None, cwd: Path | None = None,
               env: dict[str, str] | None = None, memory_limit_bytes: int | None = None,
               user: str | None = None) -> ProcessResult:
    """Run ``argv`` to completion, until ``timeout_s``, or until it holds more than ``memory_limit_bytes``.

    stdout and stderr go into ``log_path`` (overwritten).

    Raises:
        FileNotFoundError: the program does not exist.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process = None
    try:  # the stop may land in spawn too (it kills what it started): the empty log must say so as well
        log_path.write_bytes(b"")
        start = time.monotonic()
        process = spawn(argv, log_path=log_path, cwd=cwd, env=env, user=user)
        return _watch(process, start, timeout_s, memory_limit_bytes)
    except KeyboardInterrupt:
        if process is not None:
            _kill_group(process)
        with open(log_path, "a") as log:  # a cut log says so: no reader takes it for a run's whole output
            log.write(f"\n{INTERRUPTED_MARK}\n")
        raise
    finally:
        if process is not None:
            _kill_group(process)  # Ctrl-C or any error: never leave the child behind


def _watch(process: subprocess.Popen[bytes], start: float, timeout_s: float | None,
           memory_limit_bytes: int | None) -> ProcessResult:
    """Wait for ``process``, reading its memory's high-water mark as it runs, killing it at a limit.

    ``Popen`` returns once the child has exec'd, so every reading is of the program, not of the forked knobtune.
    A program that ends before the first reading reports ``ru_maxrss`` (an upper bound: it includes the fork).
    """
    deadline = None if timeout_s is None else start + timeout_s
    peak = 0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return ProcessResult(process.returncode, time.monotonic() - start, False, peak or usage.ru_maxrss * 1024)
        peak = max(peak, _high_water_bytes(process.pid))
        if memory_limit_bytes is not None and _rss_bytes(process.pid) > memory_limit_bytes:
            return _stop(process, start, max(peak, _rss_bytes(process.pid)), over_memory=True)
        if deadline is not None and time.monotonic() >= deadline:
            return _stop(process, start, peak, over_memory=False)
        time.sleep(_POLL_S)


def _stop(process: subprocess.Popen[bytes], start: float, peak: int, *, over_memory: bool) -> ProcessResult:
    elapsed = time.monotonic() - start
    peak = max(peak, _high_water_bytes(process.pid))
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return ProcessResult(process.returncode, elapsed, timed_out=not over_memory,
                         peak_rss_bytes=peak or usage.ru_maxrss * 1024, over_memory=over_memory)


def _high_water_bytes(pid: int) -> int:
    """The most resident memory ``pid``'s program has used so far (``VmHWM``; 0 once it is gone)."""
    return _proc_kib_field(f"/proc/{pid}/status", b"VmHWM:")


def _proc_kib_field(path: str, field: bytes) -> int:
    """The value of the line starting ``field`` in a /proc file whose sizes are in kB, in bytes (0 once the
    process is gone or the file lacks it)."""
    try:
        with open(path, "rb") as lines:
            for line in lines:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` now (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


def tree_pss_bytes(root_pid: int) -> int:
    """Memory used by ``root_pid`` and all its descendants, shared pages counted once (the sum of their PSS).

    By descent, not process group: PostgreSQL's children leave the postmaster's group (setsid).
    """
    return sum(_pss_bytes(pid) for pid in process_tree(root_pid))


def process_tree(root_pid: int) -> list[int]:
    """``root_pid`` and every process descended from it, parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])  # after "(comm)": state, ppid, ...
            except (OSError, IndexError, ValueError):
                continue  # it ended while being read
            children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def last_lines(text: str, count: int = 2) -> str:
    """The last ``count`` non-blank lines of a program's output, on one line (at most 400 characters)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])[-400:] or "no output"


def kill_tree(root_pid: int, wait_s: float = 30.0) -> None:
    """SIGKILL ``root_pid`` and its descendants at once, and wait until none runs (zombies hold nothing).

    The wait matters to a restart: a PostgreSQL child still exiting holds the old shared memory, and a new
    postmaster refuses to start beside it ("pre-existing shared memory block is still in use").
    """
    tree = process_tree(root_pid)
    for pid in reversed(tree):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    while any(_running(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(_POLL_S)


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _pss_bytes(pid: int) -> int:
    return _proc_kib_field(f"/proc/{pid}/smaps_rollup", b"Pss:")


def stop_group(process: subprocess.Popen[bytes], sig: int = signal.SIGKILL, wait_s: float = 30.0) -> None:
    """Send ``sig`` to the process group of ``process`` and reap it; SIGKILL if it is still there after ``wait_s``."""
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=wait_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass  # gone already, or still there: killed below
    _kill_group(process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.returncode is not None:
        return  # reaped: its group id may belong to someone else by now
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(process.pid, 0)
    except ChildProcessError:
        pass
    process.returncode = -signal.SIGKILL
