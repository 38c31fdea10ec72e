"""A PostgreSQL capture (docs/replay.md): the server's CSV log and the dump taken when logging began.

``from_files`` reads the log (``pglog.py``) and checks the dump before anything is written, then makes the
capture folder (owner-only): a private copy of both, ``replay.dat`` (the statements in the compact form the
replayer reads, ``native/pgreplay``) and ``capture.toml`` (statement fingerprints and the mix, never a
statement's text). ``from_workload`` runs one of knobtune's pgbench kits on a scratch server with logging on,
dumps at the start, and captures that (for tests, the bench, and to try the replay).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections import defaultdict
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from knobtune.errors import KnobtuneError, WorkloadError
from knobtune.knobs import Value, load_catalog
from knobtune.targets import RunFailure
from knobtune.server.process import last_lines
from knobtune.systems.postgresql.generated import KEYS_FILE, IdMap, map_ids, read_keys, write_keys
from knobtune.systems.postgresql.pglog import ParsedLog, fingerprint, mix, read_log
from knobtune.systems.postgresql.server import PG_BIN
from knobtune.systems.postgresql.target import PostgresTarget
from knobtune.workloads import Workload
from knobtune.workloads.capture import (
    CaptureSummary, Fingerprint, make_private_dir, private_copy, sha256_of, write_capture,
)

LOG_FILE, STATEMENTS_FILE = "postgresql.csv", "replay.dat"
DUMP_FILES = {"custom": "dump.custom", "plain": "dump.sql"}
LADDER = (0.1, 0.3, 1.0)
TOP_FINGERPRINTS = 10
DUMP_FIX = "Fix: take it with `pg_dump -Fc -f app.dump DBNAME` (or plain: `pg_dump --no-owner --no-privileges`)"
# columns our own kits fill from the clock: left out of the replay's data check (docs/replay.md)
# ... and tables whose rows depend on the order concurrent sessions ran in (only their row counts are compared):
# TPC-C's order ids come from d_next_o_id in commit order, Delivery takes each district's oldest new order, and
# New-Order's stock update (s_quantity - q, plus 91 under 10) does not commute
KIT_NONDETERMINISTIC = {"tpcb-like": ("pgbench_history.mtime",),
                        "tpcc": ("orders.*", "new_order.*", "order_line.*", "customer.*", "stock.*", "history.h_date")}
LOGGING = {"log_destination": "csvlog", "logging_collector": "on", "log_directory": "log",
           "log_filename": "capture.log", "log_statement": "all", "log_min_duration_statement": "0",
           "log_connections": "on", "log_disconnections": "on", "lc_messages": "C"}


@dataclass(frozen=True)
class Dump:
    format: str  # custom (pg_dump -Fc) or plain (SQL)
    database: str | None  # the database a custom dump was taken of


def check_dump(path: Path | None) -> Dump:
    """The dump's format, checked whole (a cut-off dump fails here, not at the study's load).

    Raises:
        WorkloadError: missing, of a format knobtune does not restore, cut off, or setting owners (one line).
    """
    if path is None or not path.exists():
        raise WorkloadError("a PostgreSQL capture needs the dump taken when logging "
                            f"began{f' ({path} is missing)' if path else ''}. "
                            f"{DUMP_FIX}, then give it with --state")
    if path.is_dir():
        raise WorkloadError(f"{path} is a folder (pg_dump's directory format): knobtune restores the custom or the "
                            f"plain format. {DUMP_FIX}")
    with path.open("rb") as handle:
        head = handle.read(512)
    if head.startswith(b"PGDMP"):
        return Dump("custom", _custom_database(path))
    if len(head) > 262 and head[257:262] == b"ustar":
        raise WorkloadError(f"{path} is pg_dump's tar format: knobtune restores the custom or the plain format. "
                            f"{DUMP_FIX}")
    if not head.startswith(b"--\n-- PostgreSQL database dump"):
        what = "a pg_dumpall dump (many databases)" if b"database cluster dump" in head else "not a pg_dump dump"
        raise WorkloadError(f"{path} is {what}. {DUMP_FIX}")
    _check_plain(path)
    return Dump("plain", None)


def _custom_database(path: Path) -> str | None:
    """The database a custom dump holds, after reading it whole with pg_restore (a cut-off file fails)."""
    full = subprocess.run([str(PG_BIN / "pg_restore"), "-f", "/dev/null", str(path)], capture_output=True, text=True,
                          check=False)
    if full.returncode != 0:
        raise WorkloadError(f"{path} cannot be read whole ({last_lines(full.stderr)}): the dump is truncated or "
                            f"damaged. {DUMP_FIX}")
    listing = subprocess.run([str(PG_BIN / "pg_restore"), "-l", str(path)], capture_output=True, text=True, check=False)
    for line in listing.stdout.splitlines():
        if line.strip(";").strip().lower().startswith("dbname:"):
            return line.split(":", 1)[1].strip()
    return None


def _check_plain(path: Path) -> None:
    with path.open("rb") as handle:
        for line in handle:
            if line.startswith((b"ALTER ", b"GRANT ",
                                b"REVOKE ")) and (b" OWNER TO " in line or not line.startswith(b"ALTER ")):
                raise WorkloadError(f"{path} sets owners or privileges (roles the scratch server does not have). "
                                    "Fix: take it with `pg_dump --no-owner --no-privileges`, or in the custom format "
                                    "(-Fc)")
        handle.seek(max(0, handle.seek(0, 2) - 200))
        if b"-- PostgreSQL database dump complete" not in handle.read():
            raise WorkloadError(f"{path} does not end as pg_dump ends a dump: it is truncated. {DUMP_FIX}")


def from_files(log: Path, dump: Path | None, out: Path, name: str,
               nondeterministic: Sequence[str] = ()) -> CaptureSummary:
    """The capture folder ``out`` made from the server's CSV log and the dump (see the module doc).

    Raises:
        WorkloadError: the log or the dump is unusable, or ``out`` is not new: before anything is written.
    """
    if log.is_dir():
        raise WorkloadError(f"{log} is a folder. Fix: give the .csv log file itself (concatenate rotated files in "
                            "order: cat postgresql-*.csv > all.csv)")
    checked = check_dump(dump)
    parsed = read_log(log)
    database = _database(parsed, checked, log)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WorkloadError(f"{out} exists and is not an empty folder. Fix: name a new folder with -o")
    if len(parsed.databases) > 1:
        parsed = _only(parsed, database)
    keys = read_keys(dump, checked.format)  # type: ignore[arg-type]
    ids = map_ids([(s.session, s.text, s.params, s.kind) for s in parsed.statements], keys)
    make_private_dir(out)
    private_copy(log, out / LOG_FILE)
    private_copy(dump, out / DUMP_FILES[checked.format])  # type: ignore[arg-type]
    write_statements(parsed, out / STATEMENTS_FILE, ids)
    write_keys(keys, out / KEYS_FILE)
    summary = _summary(parsed, out, checked, ids)
    section = {"log": LOG_FILE, "dump": DUMP_FILES[checked.format], "dump_format": checked.format,
               "statements": STATEMENTS_FILE, "keys": KEYS_FILE, "database": database, "pace": "captured",
               "nondeterministic": list(nondeterministic)}
    write_capture(out, name=name, description=f"PostgreSQL capture: {summary.operations:,} statements of "
                  f"{summary.sessions:,} sessions over {summary.span_s:,.1f} s, replayed at the captured pace",
                  system="postgresql", objective="p99_us", ladder=LADDER, counts="statements", section=section,
                  summary=summary)
    return summary


def _database(parsed: ParsedLog, dump: Dump, log: Path) -> str:
    if len(parsed.databases) == 1:
        return parsed.databases[0]
    if dump.database in parsed.databases:
        return dump.database  # type: ignore[return-value]
    raise WorkloadError(f"{log} holds sessions of the databases {', '.join(parsed.databases)}, and a dump holds one. "
                        "Fix: dump one of them in the custom format (pg_dump -Fc names its database)")


def _only(parsed: ParsedLog, database: str) -> ParsedLog:
    """The log's sessions of ``database`` only, renumbered."""
    sessions = [s for s in parsed.sessions if s.database == database]
    kept = {id(statement) for session in sessions for statement in session.statements}
    for index, session in enumerate(sessions):
        session.index = index
        for statement in session.statements:
            statement.session = index
    dropped = len(parsed.sessions) - len(sessions)
    return ParsedLog(tuple(sessions), tuple(s for s in parsed.statements if id(s) in kept), (database,),
                     (*parsed.notes, f"{dropped:,} sessions of other databases were left out"))


def write_statements(parsed: ParsedLog, path: Path, ids: IdMap | None = None) -> None:
    """The compact form the replayer reads (``native/pgreplay/main.cc`` says it), owner-only: version 2 when
    ``ids`` maps generated values (generated.py), with each statement's capture failure."""
    ids = ids or IdMap({}, {}, {}, Counter(), 0)
    think_us = think_times(parsed)
    with path.open("wb") as out:
        path.chmod(0o600)
        out.write(b"KTREPLAY 2\n")
        for session in parsed.sessions:
            db = session.database.encode()
            out.write(b"S %d %d %d %d\n%s\n" % (session.index, session.start_us, session.end_us, len(db), db))
        for index, statement in enumerate(parsed.statements):
            generator = ids.generators.get(index)
            text = statement.text
            if generator is not None and generator.append:
                text = text.rstrip().rstrip(";").rstrip() + generator.append
            name, encoded = statement.name.encode(), text.encode()
            out.write(b"Q %d %d %s %d %d %d\n%s%s" % (statement.session, statement.start_us, statement.kind.encode(),
                                                     len(name), len(encoded), len(statement.params), name, encoded))
            for param in statement.params:
                value = b"" if param is None else param.encode()
                out.write(b"-1\n" if param is None else b"%d\n%s" % (len(value), value))
            if generator is not None:
                table = generator.table.encode()
                out.write(b"G %d %d %d\n%s" % (max(0, generator.column), len(generator.slots), len(table), table))
                out.writelines(b"%d %d\n" % (slot, ids.captured[slot]) for slot in generator.slots)
            for reference in ids.references.get(index, ()):
                at = reference.value
                if at.param is not None:
                    out.write(b"M %d %d\n" % (at.param, reference.slot))
                else:
                    start, end = len(text[:at.start].encode()), len(text[:at.end].encode())
                    out.write(b"L %d %d %d\n" % (start, end, reference.slot))
            if statement.failed:
                out.write(b"F %s\n" % statement.failed.encode())
            if think_us.get(id(statement)):
                out.write(b"T %d\n" % think_us[id(statement)])


def think_times(parsed: ParsedLog) -> dict[int, int]:
    """Each statement's think time (by ``id``): the gap in the capture between its session's previous statement's
    end and its own start, the client's own work (0 for a session's first; an unknown duration counts as 0)."""
    out: dict[int, int] = {}
    for session in parsed.sessions:
        for before, statement in zip(session.statements, session.statements[1:]):
            out[id(statement)] = max(0, statement.start_us - before.start_us - (before.duration_us or 0))
    return out


@dataclass(frozen=True)
class Replayed:
    """One statement of a capture's ``replay.dat``, as a failure's message needs it."""

    index: int
    text: str
    failed: str | None  # the SQLSTATE it failed with in the capture


def read_statements(path: Path) -> Iterator[Replayed]:
    """The statements of a capture's ``replay.dat`` (either version), in order."""
    with path.open("rb") as handle:
        handle.readline()
        index = -1
        text = ""
        failed: str | None = None
        while line := handle.readline():
            tag = line[:1]
            if tag == b"S":
                handle.read(int(line.split()[4]) + 1)
            elif tag == b"Q":
                if index >= 0:
                    yield Replayed(index, text, failed)
                _, _, _, _, name_len, text_len, nparams = line.split()
                handle.read(int(name_len))
                text = handle.read(int(text_len)).decode(errors="replace")
                failed = None
                for _ in range(int(nparams)):
                    size = int(handle.readline())
                    handle.read(max(0, size))
                index += 1
            elif tag == b"G":
                handle.read(int(line.split()[3]))
                for _ in range(int(line.split()[2])):
                    handle.readline()
            elif tag == b"F":
                failed = line.split()[1].decode()
        if index >= 0:
            yield Replayed(index, text, failed)


def _summary(parsed: ParsedLog, out: Path, dump: Dump, ids: IdMap) -> CaptureSummary:
    by_print: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for statement in parsed.statements:
        entry = by_print[fingerprint(statement.text)]
        entry[0] += 1
        entry[1] += statement.duration_us or 0
    prints = sorted(by_print.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))[:TOP_FINGERPRINTS]
    last = max(s.start_us + (s.duration_us or 0) for s in parsed.statements)
    failed = sum(1 for s in parsed.statements if s.failed)
    notes = [*parsed.notes, "every session replays as one superuser: roles, privileges and per-role settings are "
             "not replayed"]
    if failed:
        notes.append(f"{failed:,} statements failed in the capture too (their failure is not counted against a config)")
    if (remapped := ids.note()) is not None:
        notes.append(remapped)
    files = {name: sha256_of(out / name) for name in (LOG_FILE, DUMP_FILES[dump.format], STATEMENTS_FILE, KEYS_FILE)}
    return CaptureSummary(system="postgresql", operations=len(parsed.statements), span_s=round(last / 1e6, 3),
                          sessions=len(parsed.sessions), mix=dict(mix(parsed.statements)),
                          fingerprints=tuple(Fingerprint(text, count, round(total / 1e6, 4))
                                             for text, (count, total) in prints),
                          files=files, notes=tuple(notes))


# ---------------------------------------------------------------- a kit's run, captured


class _Recording(PostgresTarget):
    """The kit's server with logging on once its data is loaded: it runs the kit once and keeps the log."""

    logging = False

    def start_argv(self, data: Path, config: Mapping[str, Value]) -> list[str]:
        argv = super().start_argv(data, config)
        return argv + [arg for name, value in LOGGING.items() for arg in ("-c",
                                                                          f"{name}={value}")] if self.logging else argv

    def record(self, into: Path) -> tuple[Path, Path]:
        """Start the loaded copy with logging on, dump it, run the kit at full size; the log and the dump."""
        data = self._restore()
        dump, log = into / "kit.dump", into / "kit.csv"
        self.logging = True
        try:
            self._start(data, self.catalog.defaults(), into / "server.log", refusal=False)
            self._client([str(PG_BIN / "pg_dump"), *self._connection(), "-Fc", "-f", str(dump)], into / "pg_dump.log",
                         "pg_dump", timeout_s=1800)
            self.pgbench.run(self.workload.full, None, into / "pgbench.log", 1, self._connection(), verified=False)
            self._stop_server(clean=True)
        finally:
            self.logging = False
            self._stop_server(clean=False)
        with log.open("wb") as joined:
            for part in sorted((data / "log").glob("*.csv")):
                joined.write(part.read_bytes())
        return log, dump


def from_workload(workload: Workload, out: Path, name: str, records: int | None) -> CaptureSummary:
    """Run ``workload`` (a pgbench kit: ``[drivers.pgbench]``) under the default config with logging on, and capture
    it into ``out``; ``records`` its transactions (default: the workload's full size).

    Raises:
        WorkloadError: the workload is no pgbench kit, or ``out`` is not new.
        KnobtuneError: the kit's run failed.
    """
    if "pgbench" not in workload.drivers:
        raise WorkloadError(f"workload '{workload.name}' is not a pgbench kit (it has {', '.join(workload.drivers)}). "
                            "Fix: capture one with [drivers.pgbench], e.g. pgbench-tpcb or tpcc")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WorkloadError(f"{out} exists and is not an empty folder. Fix: name a new folder with -o")
    sized = workload.scaled(records) if records else workload
    section = sized.driver("pgbench")
    kit = "tpcc" if section.get("load") == "tpcc" else str(section.get("script", ""))
    with tempfile.TemporaryDirectory(prefix="knobtune-capture-") as scratch:
        folder = Path(scratch)
        target = _Recording(load_catalog("postgresql"), sized, folder / "target", settle=False)
        try:
            with target:
                log, dump = target.record(folder)
        except RunFailure as failure:
            raise KnobtuneError(f"running {workload.name} to capture it failed ({failure.kind}): {failure.reason}. "
                                "Fix: run the kit with `knobtune tune postgresql --workload ...` to see it fail with "
                                "its logs kept") from None
        return from_files(log, dump, out, name, KIT_NONDETERMINISTIC.get(kit, ()))

