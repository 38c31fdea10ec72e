"""A PostgreSQL server's CSV log (``log_destination = 'csvlog'``) read into sessions and their statements.

The settings that make a log replayable (docs/replay.md): ``log_statement = 'all'`` (each statement when it
starts, an ``execute`` with its parameters), ``log_min_duration_statement = 0`` (its duration when it ends),
``log_connections`` and ``log_disconnections`` (when each session began and ended), ``lc_messages = 'C'``
(the messages this module reads are English). The columns are PostgreSQL 15's (the manual's "Using CSV-Format
Log Output"); 13 and 14 write the same first 23.

A statement is replayed as the client sent it: a simple query as one query string; an ``execute`` of a named
prepared statement prepared once per session, then run with the logged parameters; an unnamed one with
``PQexecParams``. A fetch from an open portal (``execute fetch from``) is the rest of an execute already
replayed, so it is skipped. Sessions of pg_dump are the dump itself, not the work: they are dropped, and when
the log holds one, the capture starts at its snapshot (what came before is in the dump).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from knobtune.errors import WorkloadError

SETTINGS = ("log_destination = 'csvlog'", "logging_collector = on", "log_statement = 'all'",
            "log_min_duration_statement = 0", "log_connections = on", "log_disconnections = on", "lc_messages = 'C'")
SETTINGS_FIX = "set " + ", ".join(SETTINGS) + " (docs/replay.md)"
MIN_COLUMNS = 23  # PostgreSQL 13 writes 23 columns, 14 and 15 write 26
FIELD_LIMIT = 2**31 - 1  # a statement is read whole: the server takes up to 1 GB (csv's own limit is 128 KiB)
DUMP_SESSIONS = ("pg_dump", "pg_dumpall")
_TIME, _DB, _USER, _SESSION, _SEVERITY, _STATE, _MESSAGE, _DETAIL, _APP, _BACKEND = 0, 2, 1, 5, 11, 12, 13, 14, 22, 23
_DURATION = re.compile(r"duration: ([0-9.]+) ms(?:  (.*))?", re.S)
_EXECUTE = re.compile(r"execute (fetch from )?([^:]*?)(?:/[^:]*)?: (.*)", re.S)
_PARAM = re.compile(r"\$(\d+) = (?:NULL|'((?:[^']|'')*)')")


@dataclass
class Statement:
    """One statement a session sent: ``kind`` s (simple query), p (named prepared), u (unnamed extended)."""

    session: int
    start_us: int
    kind: str
    name: str
    text: str
    params: tuple[str | None, ...] = ()
    duration_us: int | None = None
    failed: str | None = None  # the SQLSTATE it failed with in the capture


@dataclass
class Session:
    index: int
    key: str  # the log's session id
    database: str
    application: str
    start_us: int
    end_us: int = -1
    statements: list[Statement] = field(default_factory=list)


@dataclass(frozen=True)
class ParsedLog:
    sessions: tuple[Session, ...]  # numbered from 0 in the order they began, each with at least one statement
    statements: tuple[Statement, ...]  # in captured start order (ties in log order)
    databases: tuple[str, ...]
    notes: tuple[str, ...]


def read_log(path: Path) -> ParsedLog:
    """The sessions and statements of the CSV log at ``path``.

    Raises:
        WorkloadError: not a CSV log, cut off mid-line, or holding no statement a replay can run (one line, with
            the setting that fixes it).
    """
    rows = _rows(path)
    sessions: dict[str, Session] = {}
    order: list[Statement] = []
    origin: datetime | None = None
    log_lines = dump_start = 0
    dumps: set[str] = set()
    for row in rows:
        if len(row) > _BACKEND and row[_BACKEND] != "client backend":
            continue
        when = _time(row[_TIME], path)
        origin = origin or when
        at_us = round((when - origin).total_seconds() * 1e6)
        key, message = row[_SESSION], row[_MESSAGE]
        if row[_APP] in DUMP_SESSIONS:
            if key not in dumps and message.startswith(("statement: ", "execute ")):
                dumps.add(key)
                dump_start = dump_start or at_us
            continue
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = Session(-1, key, row[_DB], row[_APP], at_us)
        session.end_us = max(session.end_us, at_us)
        log_lines += row[_SEVERITY] == "LOG"
        statement = _statement(message, row[_DETAIL], at_us)
        if statement is not None:
            last = session.statements[-1] if session.statements else None
            statement.start_us = max(statement.start_us, last.start_us if last else 0)
            statement.session = -1
            session.statements.append(statement)
            order.append(statement)
        elif message.startswith("duration: ") and session.statements and session.statements[-1].duration_us is None:
            match = _DURATION.match(message)
            if match and not match.group(2):
                session.statements[-1].duration_us = round(float(match.group(1)) * 1000)
        elif message.startswith("disconnection: "):
            session.end_us = at_us
        elif row[_SEVERITY] in ("ERROR", "FATAL") and session.statements and session.statements[-1].failed is None:
            session.statements[-1].failed = row[_STATE] or "XX000"
    return _assemble(path, sessions, order, log_lines, dump_start, len(dumps))


def _rows(path: Path) -> Iterator[list[str]]:
    """The log's rows, each checked to be a CSV log's."""
    with path.open("rb") as raw:
        raw.seek(0, 2)
        size = raw.tell()
        if size == 0:
            raise WorkloadError(f"{path} is empty. Fix: give the .csv file the server wrote while logging, with "
                                f"{SETTINGS_FIX}")
        raw.seek(size - 1)
        if raw.read(1) != b"\n":
            raise WorkloadError(f"{path} ends mid-line: the file is truncated. Fix: copy the whole log after the "
                                "server has written it (or after a log rotation), then capture again")
    csv.field_size_limit(FIELD_LIMIT)
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.reader(handle, strict=True)
        try:
            for number, row in enumerate(reader, 1):
                if len(row) < MIN_COLUMNS or row[_SEVERITY] not in _SEVERITIES:
                    if number == 1:
                        raise WorkloadError(f"{path} is not a CSV log (its first line is not one of csvlog's rows). "
                                            f"Fix: {SETTINGS_FIX}, and give the .csv file from the log folder")
                    raise WorkloadError(f"{path}: line {reader.line_num} is not a csvlog row: the file is cut or "
                                        "mixed with another log. Fix: give the .csv file as the server wrote it")
                yield row
        except csv.Error as exc:
            raise WorkloadError(f"{path}: line {reader.line_num} cannot be read as CSV ({exc}): the file is "
                                "truncated or not a csvlog. "
                                "Fix: give the whole .csv file as the server wrote it") from None


_SEVERITIES = frozenset({"DEBUG1", "DEBUG2", "DEBUG3", "DEBUG4", "DEBUG5", "INFO", "NOTICE", "WARNING", "ERROR",
                         "LOG", "FATAL", "PANIC", "DETAIL", "STATEMENT"})


def _time(text: str, path: Path) -> datetime:
    try:
        return datetime.fromisoformat(text[:23])
    except ValueError:
        raise WorkloadError(f"{path}: '{text[:40]}' is not a csvlog time. Fix: give the .csv file as the server "
                            "wrote it") from None


def _statement(message: str, detail: str, at_us: int) -> Statement | None:
    """The statement a log message starts (or, with a duration, ended), or None."""
    duration_us = None
    if message.startswith("duration: "):
        match = _DURATION.match(message)
        if match is None or not match.group(2):
            return None
        duration_us = round(float(match.group(1)) * 1000)
        message = match.group(2)
    if message.startswith("statement: "):
        return _timed(Statement(-1, at_us, "s", "", message[11:]), duration_us)
    match = _EXECUTE.match(message) if message.startswith("execute ") else None
    if match is None or match.group(1):
        return None  # parse and bind steps, portal fetches, everything else
    name = match.group(2)
    params = tuple(None if m.group(0).endswith("NULL") else m.group(2).replace("''", "'")
                   for m in _PARAM.finditer(detail)) if detail.startswith("parameters: ") else ()
    return _timed(Statement(-1, at_us, "u" if name == "<unnamed>" else "p", "" if name == "<unnamed>" else name,
                            match.group(3), params), duration_us)


def _timed(statement: Statement, duration_us: int | None) -> Statement:
    if duration_us is not None:  # logged when it ended: it started that long before
        statement.duration_us = duration_us
        statement.start_us = max(0, statement.start_us - duration_us)
    return statement


def _assemble(path: Path, sessions: dict[str, Session], order: list[Statement], log_lines: int, dump_start: int,
              dumps: int) -> ParsedLog:
    notes = []
    if dump_start:
        before = sum(1 for s in order if s.start_us < dump_start)
        order = [s for s in order if s.start_us >= dump_start]
        notes.append(f"the capture starts at pg_dump's snapshot: {before:,} statements logged before it are in the "
                     "dump and were left out" if before else "pg_dump's session in the log was left out")
    kept = [s for s in sessions.values() if any(st.start_us >= dump_start for st in s.statements)]
    if not order:
        what = ("its messages are not in English" if log_lines else "it logged no statement")
        raise WorkloadError(f"{path} holds no statement a replay can run ({what}). Fix: {SETTINGS_FIX}")
    kept.sort(key=lambda s: min(st.start_us for st in s.statements if st.start_us >= dump_start))
    for index, session in enumerate(kept):
        session.index = index
        session.statements = [st for st in session.statements if st.start_us >= dump_start]
        for statement in session.statements:
            statement.session = index
    order.sort(key=lambda s: s.start_us)  # stable: a session's statements keep their order
    origin = order[0].start_us
    for statement in order:
        statement.start_us -= origin
    for session in kept:
        session.start_us = max(0, min(session.start_us, session.statements[0].start_us + origin) - origin)
        session.end_us = max(session.end_us - origin, session.statements[-1].start_us
                             + (session.statements[-1].duration_us or 0))
    without_duration = sum(1 for s in order if s.duration_us is None)
    if without_duration == len(order):
        notes.append("the log has no durations (log_min_duration_statement = 0 adds them): the costliest "
                     "fingerprints are counted, not timed")
    return ParsedLog(tuple(kept), tuple(order), tuple(sorted({s.database for s in kept})), tuple(notes))


# ---------------------------------------------------------------- fingerprints: statements without their constants

_STRIP = (
    (re.compile(r"/\*.*?\*/|--[^\n]*", re.S), " "),
    (re.compile(r"\$([A-Za-z_]\w*|)\$.*?\$\1\$", re.S), "?"),  # dollar-quoted strings
    (re.compile(r"(?:[EeBbXxNn]|[Uu]&)?'(?:[^']|'')*'"), "?"),  # string constants
    (re.compile(r"(?<![\w$.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)"), "?"),  # numbers
    (re.compile(r"\s+"), " "),
    (re.compile(r"\(\s*\?(?:\s*,\s*\?)+\s*\)"), "(?, ...)"),  # IN lists of any length
)


def fingerprint(text: str) -> str:
    """``text`` with its constants (strings, numbers, IN lists) stripped: the statement's kind, not its data."""
    for pattern, replacement in _STRIP:
        text = pattern.sub(replacement, text)
    return text.strip()


def command(text: str) -> str:
    """The statement's first keyword, upper-case (SELECT, UPDATE, BEGIN ...)."""
    words = fingerprint(text).split(None, 1)
    return re.sub(r"\W", "", words[0]).upper() or "?" if words else "?"


def mix(statements: Sequence[Statement]) -> Counter[str]:
    return Counter(command(s.text) for s in statements)
