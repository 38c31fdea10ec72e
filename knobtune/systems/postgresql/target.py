"""PostgreSQL 15 (Debian's ``postgresql-15``) as a managed scratch server, driven by pgbench.

The server's life is ``ServerTarget``'s (``server/life.py``): the
pristine copy, a restore before every run, the start as knobtune's child, the
settle and the stop. What is PostgreSQL's own is here: ``initdb`` makes the
pristine data, ``pgbench -i`` (or a shipped loader) loads it, a config is
checked with ``postgres -C`` before any run, ``pg_isready`` says it answers,
the settle is a ``CHECKPOINT`` after the crash recovery, and the workload's
invariants and ledger are checked after the run (``checks.py``). The server
runs as the ``postgres`` user on a Unix socket only (``server.py``).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from knobtune.errors import KnobtuneError, ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.server import loaded
from knobtune.targets import FailureKind, KnownConfig, Machine, RunFailure, WorkloadFacts
from knobtune.server.process import last_lines, run_logged, spawn, stop_group
from knobtune.server.life import Benchmarked, ServerTarget, SettleWork
from knobtune.systems.postgresql import counters, waits
from knobtune.systems.postgresql.checks import CHECKS, DataCheck
from knobtune.systems.postgresql.formats import postgresql_settings
from knobtune.systems.postgresql.pgbench import SCRIPT_DIR, Pgbench, PgbenchRun, read_section, transactions
from knobtune.systems.postgresql.pgtune import pgtune_config
from knobtune.systems.postgresql.server import (
    HOME_PREFIX, INSTALL_HINT, PG_BIN, PG_USER, POLL_S, READY_LIMIT_S, accepts_connections, connection, initdb_argv,
    postgres_argv, postgres_user, server_message,
)
from knobtune.workloads import Rung, Workload

CRASH_AFTER_S = 3.0  # the crash check kills the server this long into a run
LOADER_READS = {"pgbench": ("scale",), "tpcc": ("scale",), "ycsb": ("records",)}  # what each shipped loader reads
LOADED_BYTES = {"pgbench": (16 << 20, "scale"), "tpcc": (125 << 20, "scale"), "ycsb": (1300, "records")}

__all__ = ["PG_BIN", "PG_USER", "PostgresTarget"]


class PostgresTarget(ServerTarget):
    system = "postgresql"
    driver = "pgbench"
    label = "PostgreSQL"
    server_user = PG_USER
    home_prefix = HOME_PREFIX
    ready_limit_s = READY_LIMIT_S
    poll_s = POLL_S
    clean_stop = signal.SIGINT  # a fast shutdown: a checkpoint, data kept
    _sampler: waits.WaitSampler | None = None  # sampling the wait events while a run goes (every driver)

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for pgbench")
        section = read_section(workload)
        self.load_with = section.load
        scripts = dict(section.scripts)
        self.pgbench = Pgbench(scripts, section.script if not scripts else workload.name, workload.records,
                               section.scale, section.clients, section.threads)
        self.check: DataCheck | None = CHECKS[section.check] if section.check else None
        self._ledger_rows = 0  # the ledger table's rows in the loaded data

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return section.get("check") in CHECKS

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """The workload's section for this driver; pgbench's is checked whole (``pgbench.read_section``).

        Raises:
            WorkloadError: one line per problem naming the workload, the field and the fix.
        """
        if cls.driver == PostgresTarget.driver:  # the other drivers read their own sections
            read_section(workload)
        return super().section(workload)

    @classmethod
    def installed(cls) -> str | None:
        binary = PG_BIN / "pgbench"
        return str(binary) if binary.exists() else None

    @staticmethod
    def _version_line() -> str:
        """``postgres --version``'s line, e.g. "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"; "" if none."""
        try:
            out = subprocess.run([str(PG_BIN / "postgres"), "--version"], capture_output=True, text=True, check=False)
        except OSError:
            return ""
        return out.stdout.strip()

    @classmethod
    def build(cls) -> str | None:
        """The server's version and package, e.g. "15.18 (Debian 15.18-0+deb12u1)"; None when it cannot say."""
        line = cls._version_line()
        return line.split("(PostgreSQL)", 1)[-1].strip() if line else None

    def version(self) -> str:
        line = self._version_line()
        return line.split()[-1] if line else "unknown"

    def known_configs(self) -> tuple[KnownConfig, ...]:
        """PGTune for this machine, with the workload's profile (``baseline_profile``, oltp unless it says)."""
        profile = str(self.workload.driver(self.driver).get("baseline_profile", "oltp"))
        tuned = pgtune_config(Machine.from_host(), profile)
        return (KnownConfig(f"pgtune ({profile})", dict(self.catalog.changed(self.catalog.config(tuned.config))),
                            f"{tuned.source.get('repository', 'PGTune')} {tuned.source.get('file', '')}".strip()),)

    def impossible_values(self) -> dict[str, tuple[Value, ...]]:
        """huge_pages=on where the kernel has no huge pages: PostgreSQL refuses to start ("could not map
        anonymous shared memory"); a 20-minute TPC-C study spent 9 of 108 trials on it."""
        try:
            pages = int(Path("/proc/sys/vm/nr_hugepages").read_text().strip() or 0)
        except (OSError, ValueError):
            return {}
        return {"huge_pages": ("on",)} if pages == 0 else {}

    def has_crash_check(self) -> bool:
        return self.check is not None and self.check.ledger is not None

    def crash_check(self, config: Mapping[str, Value], log_dir: Path) -> str | None:
        """Kill the server mid-run, restart it, and count: every commit pgbench acknowledged must be there.

        Only a workload with a ledger (a table that gains one row per commit) has something to count.
        """
        if not self.has_crash_check() or self._home is None:
            return None
        self.check_config(config)
        data = self._restore()
        latency_dir = log_dir / "crash-check-latency"
        try:
            self._start(data, config, log_dir / "crash-check.server.log", refusal=True)
            argv = self.pgbench.argv(["-T", str(int(CRASH_AFTER_S * 10))], latency_dir, 1, connection(self._home))
            pgbench = spawn(argv, log_path=log_dir / "crash-check.pgbench.log")
            time.sleep(CRASH_AFTER_S)
            self._stop_server(clean=False)  # mid-run, commits in flight
            stop_group(pgbench, signal.SIGTERM, wait_s=60)  # its clients fail on the lost server and it ends
            acknowledged = self._ledger_commits(transactions(latency_dir)[1])
            self._start(data, config, log_dir / "crash-check.recovery.log", refusal=False)
            rows = self._ledger_growth(log_dir / "crash-check.count.log")
        finally:
            self._stop_server(clean=False)
        if rows < acknowledged:
            return (f"the server was killed mid-run after {acknowledged:,} acknowledged commits; after recovery "
                    f"{rows:,} were there ({acknowledged - rows:,} lost)")
        return None

    # ------------------------------------------------------------ what ServerTarget asks

    def check_tools(self) -> None:
        for tool in ("postgres", "initdb", "pgbench", "psql", "pg_isready"):
            if not (PG_BIN / tool).exists():
                raise ToolMissingError(f"PostgreSQL's {tool} is not installed ({PG_BIN / tool}). {INSTALL_HINT}")
        postgres_user()

    def init_pristine(self, pristine: Path, logs: Path) -> None:
        result = run_logged(initdb_argv(pristine), log_path=logs / "initdb.log", timeout_s=600, user=PG_USER)
        if result.returncode != 0:
            text = (logs / "initdb.log").read_text(errors="replace")
            raise KnobtuneError(f"initdb failed: {last_lines(text)}. Fix: see {logs / 'initdb.log'}")

    def start_argv(self, data: Path, config: Mapping[str, Value]) -> list[str]:
        return postgres_argv(data, self._home, postgresql_settings(self.catalog, config))  # type: ignore[arg-type]

    def answers(self) -> bool:
        return accepts_connections(self._home)  # type: ignore[arg-type]

    def why_exited(self, log: Path, mark: int) -> str:
        return server_message(log)

    def is_default(self, config: Mapping[str, Value]) -> bool:
        return not postgresql_settings(self.catalog, config)

    def load(self, logs: Path) -> None:
        if self.load_with == "pgbench":
            argv = [str(PG_BIN / "pgbench"), "-i", "-q", "-s", str(self.pgbench.scale), *self._connection()]
        else:
            argv = [str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-v",
                    f"records={self.workload.records}", "-v", f"scale={self.pgbench.scale}",
                    "-f", str(SCRIPT_DIR / f"{self.load_with}-load.sql")]
        self._client(argv, logs / "load.log", f"loading the data ({self.load_with})", timeout_s=1800)
        if self.check is not None and self.check.ledger is not None:
            self._ledger_rows = int(self._query(f"SELECT count(*) FROM {self.check.ledger}", logs / "ledger.log"))

    def loaded_inputs(self) -> Mapping[str, object]:
        """The server's version, the loader (its file's contents) and the inputs it reads: a later study of the same
        reuses the loaded copy (pgbench and TPC-C read the scale, the YCSB loader the records)."""
        reads = LOADER_READS.get(self.load_with, ("scale", "records"))
        sizes = {"scale": self.pgbench.scale, "records": self.workload.records}
        return {"system": self.system, "workload": self.load_with, "version": self.version(),
                "loader": loaded.file_digest(SCRIPT_DIR / f"{self.load_with}-load.sql"),
                **{name: sizes[name] for name in reads}}

    def loaded_state(self) -> dict[str, object]:
        return {"ledger_rows": self._ledger_rows}

    def restore_loaded_state(self, state: Mapping[str, object]) -> None:
        self._ledger_rows = int(state.get("ledger_rows", 0))  # type: ignore[call-overload]

    def workload_facts(self) -> WorkloadFacts:
        """The workload file's facts with pgbench's clients and the loaded data's size."""
        return replace(super().workload_facts(), clients=self.pgbench.clients)

    def data_bytes(self) -> int | None:
        """About how large the loaded data is (measured here, 2026-11-25): pgbench ~15 MB per scale unit, TPC-C
        ~125 MB per warehouse, the YCSB usertable ~1.3 kB per record."""
        per_unit, unit = LOADED_BYTES.get(self.load_with, (0, "scale"))
        return per_unit * (self.pgbench.scale if unit == "scale" else self.workload.records) or None

    def check_config(self, config: Mapping[str, Value]) -> None:
        """Check the settings with ``postgres -C`` against the pristine data (no server started).

        Raises:
            RunFailure: (REFUSED) PostgreSQL rejects a value; its own message is the reason.
        """
        settings = postgresql_settings(self.catalog, config)
        if not settings or self._home is None:
            return
        argv = [*postgres_argv(self._home / "pristine", self._home, settings), "-C", "shared_buffers"]
        log = self.scratch_dir / "server" / "check-config.log"
        result = run_logged(argv, log_path=log, timeout_s=60, user=PG_USER)
        if result.returncode != 0:
            raise RunFailure(FailureKind.REFUSED, f"PostgreSQL refused the config: {server_message(log)}", log)

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        return self.pgbench.run(rung, timeout_s, log_path, seed, self._connection(), verified=self.check is not None)

    def read_counters(self, log: Path) -> dict[str, float]:
        """Checkpoints, buffer writes by who wrote them, cache hits, temp files, WAL (``counters.py``).

        Raises:
            RunFailure: (TOOL) psql failed or answered something else.
        """
        try:
            return counters.parse(self._query(counters.QUERY, log, separator="|"))
        except ValueError as exc:
            raise RunFailure(FailureKind.TOOL, f"reading PostgreSQL's statistics failed: {exc}", log) from None

    def counters_over_run(self, before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
        return counters.over_run(before, after)

    def start_sampling(self, log: Path) -> None:
        """One psql sampling the active backends' wait events every ``waits.INTERVAL_S`` (``waits.py``)."""
        self.stop_sampling()
        self._sampler = waits.WaitSampler(self._connection(), log)
        self._sampler.start()

    def stop_sampling(self) -> dict[str, float]:
        """The wait events' counters over the run (``waits.counters``).

        Raises:
            RunFailure: (TOOL) the sampler's psql ended during the run.
        """
        sampler, self._sampler = self._sampler, None
        return sampler.stop() if sampler is not None else {}

    def dirty_bytes(self, data: Path) -> int:
        return sum(f.stat().st_size for f in (data / "pg_wal").glob("0*") if f.is_file())

    def settle_work(self, limit_s: float | None, log_path: Path) -> SettleWork:
        checkpoint = self._client([str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-c",
                                   "CHECKPOINT"], log_path.with_suffix(".checkpoint.log"), "the checkpoint",
                                  timeout_s=limit_s, failure=FailureKind.TIMEOUT)
        return SettleWork(flush_s=checkpoint, compaction_s=0.0)

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """The workload's data check after the run (and the crash and recovery of the settle)."""
        self._check(ran.committed if isinstance(ran, PgbenchRun) else {}, log_path)

    def _check(self, committed: Mapping[int, int], log_path: Path) -> None:
        """The invariant holds, and the ledger gained one row per commit of ``committed`` (by script).

        Raises:
            RunFailure: (DATA_LOSS) the invariant's answer, or the ledger's rows against the commits.
        """
        if self.check is None:
            return
        answer = self._query(self.check.invariant.format(records=self.workload.records),
                             log_path.with_suffix(".check.log"))
        broken = self.check.broken(answer)
        if broken:
            raise RunFailure(FailureKind.DATA_LOSS, broken, log_path)
        if self.check.ledger is None:
            return
        rows, commits = self._ledger_growth(log_path.with_suffix(".ledger.log")), self._ledger_commits(committed)
        if rows != commits:
            raise RunFailure(FailureKind.DATA_LOSS, f"data loss: {self.check.ledger} gained {rows:,} rows for "
                             f"{commits:,} transactions pgbench saw committed", log_path)

    # ------------------------------------------------------------ clients

    def _ledger_commits(self, committed: Mapping[int, int]) -> int:
        """The commits that each added a row to the ledger (pgbench numbers the scripts from 0, as given)."""
        script = self.check.ledger_script if self.check else None
        if script is None:
            return sum(committed.values())
        return committed.get(list(self.pgbench.scripts).index(script), 0)

    def _ledger_growth(self, log: Path) -> int:
        return int(self._query(f"SELECT count(*) FROM {self.check.ledger}", log)) - self._ledger_rows  # type: ignore[union-attr]

    def _connection(self) -> list[str]:
        return connection(self._home)  # type: ignore[arg-type]

    def _client(self, argv: list[str], log: Path, what: str, timeout_s: float | None,
                failure: FailureKind = FailureKind.TOOL) -> float:
        """Run a client program to completion; its elapsed seconds."""
        result = run_logged(argv, log_path=log, timeout_s=timeout_s)
        if result.timed_out:
            raise RunFailure(failure, f"{what} did not finish within {timeout_s:.1f} s", log)
        if result.returncode != 0:
            raise RunFailure(FailureKind.TOOL, f"{what} failed: {last_lines(log.read_text(errors='replace'))}", log)
        return result.elapsed_s

    def _query(self, sql: str, log: Path, separator: str = "|") -> str:
        self._client([str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-tA", "-F", separator,
                      "-c", sql], log, "the data check", timeout_s=600)
        return log.read_text().strip().splitlines()[-1]
