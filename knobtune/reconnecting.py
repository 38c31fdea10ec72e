"""A storage server that goes away for a while costs no trial: a lost connection is retried, within a limit.

A study on a PostgreSQL (or other server) storage outlives its server's restarts (an
upgrade, a failover, a network blip). Every call knobtune, and Optuna for it,
makes to such a storage goes through ``ReconnectingStorage``: a call that fails
because the connection was lost or refused is made again after 0.5, 1, 2, 4,
8, 8, ... s, for up to ``RECONNECT_S`` (45 s; ``KNOBTUNE_STORAGE_RETRY_S``),
and the first such failure and the return are each said once. The trial in
progress is not disturbed: its run needs no storage, and its heartbeat and its
result wait for the server. After the limit the call fails in one line naming
the storage and the fix; the trial stays RUNNING in the storage, where the
next process on this host (its pid is gone) or its stopped heartbeat hands it
on (docs/workers.md). SQLite is a file on this machine, not a connection, and
is not wrapped.
"""

from __future__ import annotations

import abc
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy.exc
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat
from sqlalchemy.engine import make_url

from knobtune.errors import StorageError

RECONNECT_S = float(os.environ.get("KNOBTUNE_STORAGE_RETRY_S", "45"))
FIRST_WAIT_S = 0.5
LONGEST_WAIT_S = 8.0

# every call of Optuna's storage interface (BaseStorage, BaseHeartbeat), each passed on with retries
_CALLS = (
    "create_new_study", "delete_study", "set_study_user_attr", "set_study_system_attr", "get_study_id_from_name",
    "get_study_name_from_id", "get_study_directions", "get_study_user_attrs", "get_study_system_attrs",
    "get_all_studies", "create_new_trial", "set_trial_param", "get_trial_id_from_study_id_trial_number",
    "get_trial_number_from_id", "get_trial_param", "set_trial_state_values", "set_trial_intermediate_value",
    "set_trial_user_attr", "set_trial_system_attr", "get_trial", "get_all_trials", "get_n_trials", "get_best_trial",
    "get_trial_params", "get_trial_user_attrs", "get_trial_system_attrs", "remove_session",
    "check_trial_is_updatable", "record_heartbeat", "_get_stale_trial_ids", "get_heartbeat_interval",
    "get_heartbeat_stale_trial_callback",
)

# Optuna's server storage, when a query fails, warns "Caught an error from sqlalchemy: ... Falling back to a
# slower alternative." and tries again without its IN list (meant for SQLite's limit on variables). On a
# server the error is nearly always the lost connection, which the retries below say once in their own words;
# the fallback itself is right either way, so the warning only repeats the error in many lines.
_OPTUNA_RDB_LOGGER = "optuna.storages._rdb.storage"


def _not_optunas_fallback(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Caught an error from sqlalchemy")


def shown_url(url: str) -> str:
    """``url`` as it may be printed: its password hidden (otherwise as given)."""
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        return url
    return url if parsed.password is None else parsed.render_as_string(hide_password=True)


def lost_connection(exc: BaseException) -> BaseException | None:
    """The database driver's error when ``exc`` (or what caused it) is a connection lost or refused, else None.

    Optuna turns SQLAlchemy's errors into ``StorageInternalError`` with the original as its cause."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)) or (
                isinstance(seen, sqlalchemy.exc.DBAPIError) and seen.connection_invalidated):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class ReconnectingStorage(BaseStorage, BaseHeartbeat):
    """Optuna's storage for a server (``inner``), every call retried while the connection is lost, up to
    ``limit_s``; ``on_note`` hears when the server stops answering and when it answers again. Thread-safe as
    ``inner`` is (the heartbeat thread and the trial's thread both call it)."""

    def __init__(self, inner: BaseStorage, url: str, on_note: Callable[[str], None] | None = None,
                 limit_s: float = RECONNECT_S) -> None:
        self._inner, self._url, self._note, self._limit_s = inner, shown_url(url), on_note, limit_s
        self._lock = threading.Lock()
        self._lost_at: float | None = None  # when the current outage was first seen (None: the server answers)
        self._answered_at = 0.0  # when the server last answered after an outage
        logging.getLogger(_OPTUNA_RDB_LOGGER).addFilter(_not_optunas_fallback)  # once: the same filter

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``inner.name(*args, **kwargs)``, made again while the connection is lost, up to the limit.

        Raises:
            StorageError: the storage did not answer within the limit (one line: the storage, the fix).
        """
        started, wait_s = time.monotonic(), FIRST_WAIT_S
        while True:
            tried_at = time.monotonic()
            try:
                result = getattr(self._inner, name)(*args, **kwargs)
            except Exception as exc:  # Optuna's and SQLAlchemy's many kinds: only a lost connection is retried
                lost = lost_connection(exc)
                if lost is None:
                    raise
                waited_s = time.monotonic() - started
                if waited_s >= self._limit_s:
                    raise StorageError(
                        f"lost the storage {self._url}: it did not answer for {self._limit_s:.0f} s "
                        f"({_first_line(lost)}). Fix: check that the storage server is up and reachable from this "
                        "machine, then run the same command to resume "
                        "(finished trials are kept; the trial in progress runs again)") from None
                # an attempt begun before the server last answered (another thread's connect, timing out) failed
                # in the outage already said and over: it is retried without a word
                if tried_at >= self._answered_at:
                    self._lost(lost)
                time.sleep(min(wait_s, self._limit_s - waited_s))
                wait_s = min(2 * wait_s, LONGEST_WAIT_S)
                continue
            self._answers()
            return result

    def _lost(self, lost: BaseException) -> None:
        with self._lock:
            if self._lost_at is not None:
                return
            self._lost_at = time.monotonic()
        if self._note:
            self._note(f"the storage {self._url} does not answer ({_first_line(lost)}); retrying for up to "
                       f"{self._limit_s:.0f} s, the trial in progress goes on")

    def _answers(self) -> None:
        if self._lost_at is None:  # the common case, without the lock
            return
        with self._lock:
            lost_at, self._lost_at = self._lost_at, None
            self._answered_at = time.monotonic()
        if lost_at is not None and self._note:
            self._note(f"the storage {self._url} answers again (after {time.monotonic() - lost_at:.1f} s)")


def _passed_on(name: str) -> Callable[..., Any]:
    def call(self: ReconnectingStorage, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)
    call.__name__ = call.__qualname__ = name
    return call


for _name in _CALLS:
    setattr(ReconnectingStorage, _name, _passed_on(_name))
# each abstract call is now passed on (mypy does not see methods attached by setattr)
abc.update_abstractmethods(ReconnectingStorage)  # type: ignore[type-abstract]
