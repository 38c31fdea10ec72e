"""Ctrl-C and SIGTERM deferred across a step that must not be split, then delivered where it can be handled.

knobtune turns both into ``KeyboardInterrupt`` (SIGTERM through ``cli.main``'s handler), which lands between any
two bytecodes. Most places handle it where it lands (a trial in progress is marked interrupted and queued again),
but a few steps leave a half-made record when split: a trial asked for is RUNNING in the storage before the process
has written that it is its own, and a config half-suggested cannot be queued again. Such a step runs inside
``InterruptsDeferred``; a signal that arrives meanwhile is delivered, to the handler that was there before, when the
step is over (``release``), at a point that handles it.

A ``KeyboardInterrupt`` can also be lost: raised while Python runs a finalizer (a ``__del__``, a weakref
callback: a ``Popen`` collected as a run ends, a database connection given back to its pool), it is printed as
"Exception ignored" and dropped, and the study would go on. So the handler ``catch_stops`` installs also notes
the stop, and ``raise_if_stopped`` raises it again where work goes forward (before a program starts, before a
trial is asked for), never in the clean-up that follows a stop.

A ``KeyboardInterrupt`` that cuts a SQLite write can leave the write's connection unreachable but not yet
collected, still holding the database's write lock: the clean-up's next write (the trial marked interrupted) then
fails with "database is locked" and the trial would stay RUNNING. ``after_a_stop`` collects it first (seen in about
1 stop in 10 that landed inside a storage call).
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import traceback
from collections.abc import Iterator
from types import FrameType, TracebackType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Stop:
    """The signal that asked this process to stop (None: none did)."""

    signum: int | None = None


def _on_stop(signum: int, frame: FrameType | None) -> None:
    _Stop.signum = signum
    raise KeyboardInterrupt


def catch_stops() -> None:
    """SIGTERM (a service manager's or a batch system's stop), and SIGINT unless it is ignored (a background
    job's), raise ``KeyboardInterrupt`` and are noted for ``raise_if_stopped`` and ``stopped_by``. The main
    thread only (``cli.main``)."""
    _Stop.signum = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_stop)
    signal.signal(signal.SIGTERM, _on_stop)


def stopped_by() -> int | None:
    """The signal that stopped this process, if one did (through ``catch_stops``'s handler)."""
    return _Stop.signum


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, each once."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def raised_by_a_stop(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a stop's ``KeyboardInterrupt`` or was raised while one was handled: one that lands inside
    a storage call can end as the storage's own error (Optuna's StorageInternalError from SQLite's "database is
    locked" on the rollback)."""
    return any(isinstance(link, KeyboardInterrupt) for link in _chain(exc))


def after_a_stop(exc: BaseException) -> None:
    """Before the clean-up that follows ``exc`` writes to the storage: when a stop raised it, free the write lock a
    storage call it cut may have left behind (the module's last paragraph). The frames the stop cut still hold the
    connection while ``exc`` is handled: their locals are cleared (the traceback keeps its lines), then collected."""
    if not raised_by_a_stop(exc):
        return
    for link in _chain(exc):
        traceback.clear_frames(link.__traceback__)
    gc.collect()


def quiet_after_a_stop(record: logging.LogRecord) -> bool:
    """A logging filter: nothing a library logs once a stop has arrived passes. A stop that lands inside a database
    call leaves SQLAlchemy closing a cursor of the connection it has just closed, and it logs that failure through
    its pool's logger, traceback and all ("Error closing cursor": a SIGTERM test saw it once among its stops); the
    stop's own last line says what happened."""
    return _Stop.signum is None


def raise_if_stopped() -> None:
    """Raise ``KeyboardInterrupt`` again when a stop arrived: its first one may have been lost in a finalizer.

    Called only where work goes forward; the clean-up after a stop calls nothing that calls it.
    """
    if _Stop.signum is not None:
        raise KeyboardInterrupt


class InterruptsDeferred:
    """Defer SIGINT and SIGTERM from ``with`` until ``release()`` (or the block's end), then deliver the first that
    arrived.

    Outside the main thread (where Python runs signal handlers) it defers nothing. ``release`` is idempotent.
    """

    def __init__(self) -> None:
        self._saved: dict[int, object] = {}
        self._arrived: list[int] = []

    def __enter__(self) -> InterruptsDeferred:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._saved[signum] = signal.signal(signum, self._defer)
        return self

    def _defer(self, signum: int, frame: FrameType | None) -> None:
        self._arrived.append(signum)

    def release(self) -> None:
        """Put the handlers back; a signal that arrived meanwhile reaches its handler now (it may raise here)."""
        saved, self._saved = self._saved, {}
        for signum, handler in saved.items():  # None: a handler not set from Python, which Python cannot restore
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
        if saved and self._arrived:
            signal.raise_signal(self._arrived[0])

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
