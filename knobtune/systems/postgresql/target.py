"""PostgreSQL 15 driven by pgbench: a kit's scripts (pgbench's own TPC-B, TPC-C, YCSB) over data it loads once.

The server is ``PostgresServer``'s (``postgres.py``: start, readiness, the config check, counters, the settle).
What is pgbench's own is here: ``pgbench -i`` (or a shipped loader) loads the data, pgbench runs the rung's
transactions (``pgbench.py``), and the workload's invariants and ledger are checked after the run and, where there
is a ledger, after a kill in the middle of one (``checks.py``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from knobtune.errors import WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.server import loaded
from knobtune.server.life import Benchmarked
from knobtune.server.process import spawn, stop_group
from knobtune.systems.postgresql.checks import CHECKS, DataCheck
from knobtune.systems.postgresql.pgbench import SCRIPT_DIR, Pgbench, PgbenchRun, read_section, transactions
from knobtune.systems.postgresql.postgres import PostgresServer
from knobtune.systems.postgresql.server import PG_BIN, PG_USER, connection
from knobtune.targets import FailureKind, RunFailure, WorkloadFacts
from knobtune.workloads import Rung, Workload

CRASH_AFTER_S = 3.0  # the crash check kills the server this long into a run
LOADER_READS = {"pgbench": ("scale",), "tpcc": ("scale",), "ycsb": ("records",)}  # what each shipped loader reads
LOADED_BYTES = {"pgbench": (16 << 20, "scale"), "tpcc": (125 << 20, "scale"), "ycsb": (1300, "records")}

__all__ = ["PG_BIN", "PG_USER", "PostgresTarget"]


class PostgresTarget(PostgresServer):
    """PostgreSQL 15 driven by pgbench (``[drivers.pgbench]``: the kit's scripts, scale, clients, data check)."""

    driver = "pgbench"

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
        read_section(workload)
        return super().section(workload)

    @classmethod
    def installed(cls) -> str | None:
        binary = PG_BIN / "pgbench"
        return str(binary) if binary.exists() else None

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

    # ------------------------------------------------------------ the workload's hooks

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

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        return self.pgbench.run(rung, timeout_s, log_path, seed, self._connection(), verified=self.check is not None)

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

    # ------------------------------------------------------------ the ledger

    def _ledger_commits(self, committed: Mapping[int, int]) -> int:
        """The commits that each added a row to the ledger (pgbench numbers the scripts from 0, as given)."""
        script = self.check.ledger_script if self.check else None
        if script is None:
            return sum(committed.values())
        return committed.get(list(self.pgbench.scripts).index(script), 0)

    def _ledger_growth(self, log: Path) -> int:
        return int(self._query(f"SELECT count(*) FROM {self.check.ledger}", log)) - self._ledger_rows  # type: ignore[union-attr]

