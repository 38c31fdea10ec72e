"""PostgreSQL 15 replaying a capture (docs/replay.md): the user's own statements against the user's own data.

The capture (``capture.py``) holds the dump taken when logging began and the log's statements in a compact
form. The dump is restored once per study (as a kit's data is loaded); every run restores that copy, starts the
server under the config and replays the rung's first fraction of the statements with ``pgreplay-kt``
(``native/pgreplay``): each captured session on its own connection and thread, its statements in their order,
prepared statements with their parameters, no session waiting on another. ``pace = "captured"`` sends each
statement at its captured time (objective: p99 statement latency; the lag behind the schedule is recorded),
``pace = "fast"`` each session's statements back to back (objective: elapsed time).

The data check: after the replay and the settle, every table's row count and an order-independent checksum of
its rows (a sum of 64-bit hashes, the columns the workload names ``nondeterministic`` left out) must equal those
the default config's replay left at the same rung, and no statement may fail that did not fail under the
default: otherwise the run fails as DATA_LOSS. The reference is the first default run at each rung; a changed
config at a rung with none runs the default once first, outside its measured time.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from knobtune.errors import ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.server import loaded
from knobtune.targets import FailureKind, Measurement, Phase, RunFailure, WorkloadFacts
from knobtune.drivers.embedded import native_fix
from knobtune.drivers.replay import run_reference
from knobtune.server.process import last_lines, process_tree, run_logged
from knobtune.server.life import Benchmarked
from knobtune.systems.postgresql.capture import read_statements
from knobtune.systems.postgresql.generated import Keys, load_keys
from knobtune.systems.postgresql.section import PG_PACES, read_section
from knobtune.systems.postgresql.pglog import fingerprint
from knobtune.systems.postgresql.postgres import PostgresServer
from knobtune.systems.postgresql.server import DB_USER, PG_BIN
from knobtune.workloads import Rung, Workload
from knobtune.workloads.capture import check_pace

PROGRAM = "pgreplay-kt"
COUNTERS = ("replay_lag_p99_s", "replay_lag_max_s", "replay_failed_statements", "replayer_cpu_s",
            "replay_server_cpu_s", "replay_remapped_values", "replay_unmapped_waits")
# what a replay adds to the server's counters (counters.toml describes them)
UNFAITHFUL_SHARE = 0.01  # above this share of failed statements under the default, the replay is not the application
WAIT_S = 60.0  # how long a session waits for another's generated value before it sends the captured one
_WRITES = ("INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "TRUNCATE", "CREATE", "ALTER", "DROP")
_CALL = re.compile(r"(?i)^select\s+[\w.]+\s*\(")  # SELECT f(...): a function, which may write
_COLUMN = re.compile(r"^[^.]+\.[^.]+(\.[^.]+)?$")  # table.column, schema.table.column (column * : all)


def find_replayer() -> str:
    """The replayer: ``$KNOBTUNE_PGREPLAY``, or the checkout's native/build/pgreplay-kt.

    Raises:
        ToolMissingError: it is not built.
    """
    for candidate in (os.environ.get("KNOBTUNE_PGREPLAY"),
                      str(Path(__file__).resolve().parents[3] / "native" / "build" / PROGRAM)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise ToolMissingError(f"the PostgreSQL replayer {PROGRAM} is not built. {native_fix(PROGRAM)}")


@dataclass(frozen=True)
class ReplayRun(Benchmarked):
    """A replay: its rung, the statements that failed (index -> SQLSTATE), and the keys its generators returned
    (``generated.py``: a file of table, replayed key, label)."""

    rung: int
    failed: Mapping[int, str]
    ids: Path | None = None


@dataclass(frozen=True)
class TableDigest:
    rows: int
    checksum: str  # the sum of the rows' hashes (included columns)
    columns: Mapping[str, str]  # column -> the sum of its values' hashes (to name what differs)


@dataclass(frozen=True)
class Reference:
    tables: Mapping[str, TableDigest]
    failed: Mapping[int, str]


class PostgresReplayTarget(PostgresServer):
    """PostgreSQL 15 replaying a capture folder's statements (``[drivers.replay]``)."""

    driver = "replay"

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        """The capture's ``[drivers.replay]`` section read and checked; nothing runs yet.

        Raises:
            WorkloadError: the section names a missing file or an unknown pace (one line, with the fix).
        """
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for the replay")
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        section, self.files = read_section(workload)
        self.pace, self.speed = section.pace, section.speed
        check_pace(workload, self.pace, PG_PACES)
        self.dump_format, self.database = section.dump_format, section.database
        self.keys = load_keys(self.files["keys"]) if "keys" in self.files else Keys({}, {})
        self.nondeterministic = section.nondeterministic
        for column in self.nondeterministic:
            if not _COLUMN.match(column):
                raise WorkloadError(f"{workload.source}: [drivers.replay] nondeterministic names '{column}'. Fix: "
                                    "name each column as table.column or schema.table.column (table.* for all)")
        self._reference: dict[int, Reference] = {}
        self._columns: dict[str, list[str]] = {}  # schema.table -> its columns, as the latest data check listed
        self._run_counters: dict[str, float] = {}

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return True  # every replay's tables are checked against the default's

    @classmethod
    def installed(cls) -> str | None:
        try:
            return find_replayer() if (PG_BIN / "postgres").exists() else None
        except ToolMissingError:
            return None

    def check_tools(self) -> None:
        super().check_tools()
        find_replayer()

    def workload_facts(self) -> WorkloadFacts:
        """From the capture: its sessions are the clients; from its mix, whether it reads (SELECT) and whether it
        writes (anything that changes rows, or a function called with SELECT, which may: TPC-C's transactions are);
        the loaded data's size from the dump."""
        capture = self.workload.capture
        facts = WorkloadFacts.of(self.workload, data_bytes=self.data_bytes() or None,
                                 clients=capture.sessions if capture else 1)
        if capture is None or not capture.mix:
            return facts
        calls = any(_CALL.match(f.text) for f in capture.fingerprints)
        return replace(facts, reads=capture.mix.get("SELECT", 0) > 0,
                       writes=calls or any(capture.mix.get(k, 0) for k in _WRITES))

    def loaded_inputs(self) -> Mapping[str, object]:
        """The server's version and the dump (its SHA-256 from the capture's summary): later studies of the same
        capture reuse the restored copy."""
        known = self.workload.capture.files.get(self.files["dump"].name) if self.workload.capture else None
        return {"system": self.system, "driver": self.driver, "version": self.version(), "database": self.database,
                "dump": known or loaded.file_digest(self.files["dump"])}

    def data_bytes(self) -> int | None:
        size = self.files["dump"].stat().st_size
        return size * (5 if self.dump_format == "custom" else 2)  # a custom dump is compressed

    def load(self, logs: Path) -> None:
        """Create the captured database and restore the dump into it, then ANALYZE (the captured server had
        statistics; a restore leaves none)."""
        if self.database != "postgres":
            self._client([str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-c",
                          f"CREATE DATABASE {_ident(self.database)}"], logs / "createdb.log", "creating the database",
                         timeout_s=120)
        into = self._connection_to()
        dump = str(self.files["dump"])
        argv = ([str(PG_BIN / "pg_restore"), "--no-owner", "--no-acl", "--exit-on-error", *into, dump]
                if self.dump_format == "custom" else
                [str(PG_BIN / "psql"), *into, "-q", "-v", "ON_ERROR_STOP=1", "-f", dump])
        self._client(argv, logs / "restore.log", "restoring the capture's dump", timeout_s=None)
        self._client([str(PG_BIN / "psql"), *into, "-c", "ANALYZE"], logs / "analyze.log", "ANALYZE", timeout_s=None)

    # ------------------------------------------------------------ a run

    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        """The replay at ``rung``; first, when this rung has no reference yet and the config is not the default,
        the default's replay (unsettled, outside this run's measured time) to check against."""
        if rung.index not in self._reference and not self.is_default(config):
            self._reference_run(rung, log_path, seed)
        return super().run_at(config, rung, timeout_s=timeout_s, log_path=log_path, seed=seed)

    def _reference_run(self, rung: Rung, log_path: Path, seed: int) -> None:
        settle, self.settle = self.settle, False
        try:
            run_reference(rung, log_path, lambda log: super(PostgresReplayTarget, self).run_at(
                self.catalog.defaults(), rung, timeout_s=None, log_path=log, seed=seed))
        finally:
            self.settle = settle

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        """Replay the rung's first statements; the phase ``replay`` with its latency percentiles.

        Raises:
            RunFailure: TIMEOUT at ``timeout_s``; TOOL when the replayer failed or printed nothing.
        """
        failures, ids = log_path.with_suffix(".failed"), log_path.with_suffix(".ids")
        argv = [find_replayer(), "--capture", str(self.files["statements"]), "--host", str(self._home),
                "--user", DB_USER, "--pace", self.pace, "--limit", str(rung.records), "--failures", str(failures),
                "--ids", str(ids), "--wait-s", str(WAIT_S), "--speed", repr(self.speed)]
        server_before = self._server_cpu_s()
        result = run_logged(argv, log_path=log_path, timeout_s=timeout_s)
        server_cpu = self._server_cpu_s() - server_before
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT, f"the replay was stopped after {timeout_s:.1f} s (the limit at "
                             f"{rung})", log_path)
        text = log_path.read_text(errors="replace")
        report = next((line for line in reversed(text.splitlines()) if line.startswith("{")), None)
        if result.returncode != 0 or report is None:
            raise RunFailure(FailureKind.TOOL, f"the replayer failed (status {result.returncode}): {last_lines(text)}",
                             log_path)
        out = json.loads(report)
        failed = {int(i): state for i, state in (line.split() for line in failures.read_text().splitlines())}
        self._run_counters = dict(zip(COUNTERS, (out["lag_p99_ms"] / 1e3, out["lag_max_ms"] / 1e3, float(out["errors"]),
                                                 out["cpu_s"], round(server_cpu, 3), float(out.get("remapped", 0)),
                                                 float(out.get("wait_timeouts", 0))), strict=True))
        phase_s = out["elapsed_s"]
        phase = Phase("replay", out["statements"], phase_s, out["statements"] / phase_s if phase_s else 0.0,
                      p50_us=out["p50_us"], p99_us=out["p99_us"], p999_us=out["p999_us"], max_us=out["max_us"],
                      mean_us=out["mean_us"])
        return ReplayRun(phases=(phase,), measured=("replay",), elapsed_s=phase_s, verified=True, rung=rung.index,
                         failed=failed, ids=ids if ids.exists() else None)

    def counters_over_run(self, before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
        return {**super().counters_over_run(before, after), **self._run_counters}

    def _server_cpu_s(self) -> float:
        """The CPU seconds the server's processes used so far (those gone included: their parent reaped them)."""
        if self._server is None:
            return 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in process_tree(self._server.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        return total / ticks

    # ------------------------------------------------------------ the data check

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """Every table as the default's replay left it, and no statement failed that did not under the default.

        Raises:
            RunFailure: DATA_LOSS (a changed config) naming the table and its columns, or the statement; TOOL when
                the default's own replay differs from its first (a column is not deterministic: the fix says which).
        """
        if not isinstance(ran, ReplayRun):
            return
        tables = self._digest(log_path.with_suffix(".digest.log"), ran.ids)
        reference = self._reference.get(ran.rung)
        if reference is None:
            if self.is_default(config):
                self._check_named(log_path)
                self._check_faithful(ran, log_path)
                self._reference[ran.rung] = Reference(tables, dict(ran.failed))
            return
        differs = _compare(tables, reference.tables)
        if differs is None:
            new = sorted(set(ran.failed) - set(reference.failed))
            if new:
                first = new[0]
                differs = (f"{len(new):,} statements failed under the config that the default's replay ran (first: "
                           f"#{first}, SQLSTATE {ran.failed[first]}: {self._fingerprints([first])[first]})")
        if differs is None:
            return
        if self.is_default(config):
            failed = len(ran.failed) + len(reference.failed)
            fix = ("name the columns filled by now(), random() or clock_timestamp(), or whose values depend on the "
                   "order of concurrent sessions, in [drivers.replay] nondeterministic (docs/replay.md)"
                   if not failed else "see the statements that failed (docs/replay.md, \"When the default's replay "
                   "fails statements\")")
            raise RunFailure(FailureKind.TOOL, f"the default's own replay differs from its first: {differs}"
                             + (f" ({failed:,} statements failed in the two replays)" if failed else ""), log_path,
                             fix=f"Fix: {fix}")
        raise RunFailure(FailureKind.DATA_LOSS, f"after the replay {differs} (a column that differs between replays "
                         "of the default too belongs in [drivers.replay] nondeterministic)", log_path)

    def _check_named(self, log_path: Path) -> None:
        """Every ``nondeterministic`` name is a table (``table.*``) or a column of the replayed database.

        Raises:
            RunFailure: TOOL naming what the database does not have (a misspelt name would leave a column checked).
        """
        known = {name for table, columns in self._columns.items() for column in columns
                 for name in _names_of(table, column)}
        unknown = [name for name in self.nondeterministic if name not in known]
        if unknown:
            raise RunFailure(FailureKind.TOOL, f"[drivers.replay] nondeterministic names {', '.join(unknown)}, which "
                             f"the captured database does not have (its tables: {', '.join(sorted(self._columns))})",
                             log_path, fix="Fix: name each as table.column, schema.table.column or table.* of the "
                                           "captured database, in capture.toml")

    def _check_faithful(self, ran: ReplayRun, log_path: Path) -> None:
        """The default's replay fails at most UNFAITHFUL_SHARE of its statements that succeeded in the capture.

        Raises:
            RunFailure: TOOL, naming how many failed, the top SQLSTATEs with their fingerprints and the likely cause.
        """
        if not ran.failed:
            return
        captured = {s.index: s.failed for s in read_statements(self.files["statements"]) if s.index in ran.failed}
        new = {i: state for i, state in ran.failed.items() if not captured.get(i)}
        total = ran.phases[0].ops if ran.phases else 0
        if not new or len(new) <= UNFAITHFUL_SHARE * total:
            return
        prints = self._fingerprints(list(new))
        top = Counter((state, prints[i]) for i, state in new.items()).most_common(3)
        said = "; ".join(f"{count:,}x {state} {text[:70]}" for (state, text), count in top)
        states = {state for state in new.values()}
        cause = (" Keys the capture could not map are replayed as captured (`capture` named them)"
                 if states & {"23503", "23505", "25P02"} else "")
        raise RunFailure(FailureKind.TOOL, f"the default's replay failed {len(new):,} of {total:,} statements "
                         f"({len(new) / total:.1%}, above {UNFAITHFUL_SHARE:.0%}) that succeeded in the capture: "
                         f"{said}.{cause}", log_path,
                         fix="Fix: the replay is not faithful to the application, so no config is tuned on it; see "
                             "docs/replay.md (\"When the default's replay fails statements\")")

    def _fingerprints(self, indexes: list[int]) -> dict[int, str]:
        wanted = set(indexes)
        found = {s.index: fingerprint(s.text)[:120] for s in read_statements(self.files["statements"])
                 if s.index in wanted}
        return {i: found.get(i, "?") for i in indexes}

    def _digest(self, log: Path, ids: Path | None = None) -> dict[str, TableDigest]:
        """Each table's rows and checksums, by ``schema.table``; the keys the replay's generators made read through
        ``ids`` (replayed key -> the captured one, or the generating row's label)."""
        listing = self._sql(_TABLES, log.with_suffix(".tables.log"))
        columns: dict[str, list[str]] = {}
        for line in listing:
            schema, table, column = line.split("\t")
            columns.setdefault(f"{schema}.{table}", []).append(column)
        self._columns = columns
        if not columns:
            return {}
        mapped = _id_table(ids, log.with_suffix(".ids.tsv")) if ids is not None and self.keys.keys else None
        queries = [_table_query(name, [c for c in cols if not self._excluded(name, c)],
                                {c: k for c in cols if mapped and (k := self.keys.holds_key_of(name, c))})
                   for name, cols in columns.items()]
        if mapped is not None:
            queries.insert(0, f"CREATE TEMP TABLE {_ID_TABLE} (tbl text, replayed text, label text, PRIMARY KEY "
                              f"(tbl, replayed));\n\\copy {_ID_TABLE} FROM {_literal(str(mapped))}")
        out: dict[str, TableDigest] = {}
        lines = [line for line in self._sql("\n".join(queries), log) if not line.startswith(("CREATE", "COPY"))]
        for name, line in zip(columns, lines, strict=True):
            rows, checksum, *sums = line.split("\t")
            kept = [c for c in columns[name] if not self._excluded(name, c)]
            out[name] = TableDigest(int(rows), checksum, dict(zip(kept, sums, strict=True)))
        return out

    def _excluded(self, table: str, column: str) -> bool:
        """Whether ``column`` of ``table`` (schema.table) is left out: named, or its table named as ``table.*``
        (then only its row count is compared)."""
        return not _names_of(table, column).isdisjoint(self.nondeterministic)

    def _sql(self, sql: str, log: Path) -> list[str]:
        script = log.with_suffix(".sql")
        script.write_text(sql + "\n")
        self._client([str(PG_BIN / "psql"), *self._connection_to(), "-X", "-v", "ON_ERROR_STOP=1", "-tA", "-F", "\t",
                      "-f", str(script)], log, "the data check", timeout_s=None)
        return [line for line in log.read_text().splitlines() if line]

    def _connection_to(self) -> list[str]:
        return ["-h", str(self._home), "-U", DB_USER, "-d", self.database]


_TABLES = """SELECT n.nspname, c.relname, a.attname FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid
WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
  AND n.nspname NOT LIKE 'pg_temp%' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY n.nspname, c.relname, a.attnum;"""


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _hash(expression: str) -> str:
    """A 64-bit hash of a row's text, summed over the rows: an order-independent checksum."""
    return f"coalesce(sum(('x' || substr(md5(({expression})::text), 1, 16))::bit(64)::bigint), 0)"


_ID_TABLE = "knobtune_replayed_ids"


def _names_of(table: str, column: str) -> set[str]:
    """The names ``nondeterministic`` may give ``column`` of ``table`` (schema.table)."""
    name = table.split(".", 1)[1]
    return {f"{t}.{c}" for t in (name, table) for c in (column, "*")}


def _id_table(ids: Path, out: Path) -> Path:
    """The replayer's keys (table, replayed, label) without repeats, a claimed row's label winning over a
    generating row's ("g..."): a key a statement inserted and a later ``currval`` returned is one row."""
    labels: dict[tuple[str, str], str] = {}
    for line in ids.read_text().splitlines():
        table, replayed, label = line.split("\t")
        if (table, replayed) not in labels or labels[(table, replayed)].startswith("g"):
            labels[(table, replayed)] = label
    out.write_text("".join(f"{t}\t{r}\t{label}\n" for (t, r), label in sorted(labels.items())))
    out.chmod(0o600)
    return out


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _table_query(table: str, columns: list[str], keyed: Mapping[str, str] | None = None) -> str:
    """A table's row count, the sum of its rows' hashes and of each column's; a column in ``keyed`` (column -> the
    keyed table whose key it holds) is read through the replay's keys."""
    schema, name = table.split(".", 1)

    def value(column: str) -> str:
        key = (keyed or {}).get(column)
        if key is None:
            return f"t.{_ident(column)}"
        return (f"coalesce((SELECT m.label FROM {_ID_TABLE} m WHERE m.tbl = {_literal(key)} AND m.replayed = "
                f"t.{_ident(column)}::text), t.{_ident(column)}::text)")

    row = f"ROW({', '.join(value(c) for c in columns)})" if columns else "ROW()"
    sums = "".join(f", {_hash(f'ROW({value(c)})')}" for c in columns)
    return f"SELECT count(*), {_hash(row)}{sums} FROM {_ident(schema)}.{_ident(name)} t;"


def _compare(tables: Mapping[str, TableDigest], reference: Mapping[str, TableDigest]) -> str | None:
    """What differs from the default's tables, in words, or None."""
    for name in sorted(set(tables) | set(reference)):
        mine, theirs = tables.get(name), reference.get(name)
        if mine is None or theirs is None:
            return f"table {name} {'is missing' if mine is None else 'exists'}, unlike after the default's replay"
        if mine.rows != theirs.rows:
            return f"table {name} holds {mine.rows:,} rows, the default's replay left {theirs.rows:,}"
        if mine.checksum != theirs.checksum:
            columns = [c for c in mine.columns if mine.columns[c] != theirs.columns.get(c)]
            return f"table {name}'s rows differ from the default's replay (columns {', '.join(columns) or '?'})"
    return None
