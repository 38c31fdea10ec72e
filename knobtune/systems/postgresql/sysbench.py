"""PostgreSQL 15 under sysbench: the OLTP workloads a system file's server runs too, through sysbench's pgsql driver.

The workload files are shared (``oltp_read_write``, ``oltp_point_select``,
``oltp_write_only``: ``[drivers.sysbench]``), run by the command driver
(``described/command.py``) as a system file's server runs them; what is
PostgreSQL's own is the connection (the server's socket folder, libpq reads a
host that starts with ``/`` as one) and where the tables go: a schema
``sbtest`` first on the benchmark role's search path, so that the workloads'
data check (``sbtest.sbtestN``) reads the same tables on both systems.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.described.command import CommandDriver, read_section
from knobtune.server.life import Benchmarked
from knobtune.targets import WorkloadFacts
from knobtune.systems.postgresql.postgres import PostgresServer
from knobtune.systems.postgresql.server import DB_NAME, DB_USER, INSTALL_HINT, PG_BIN
from knobtune.workloads import Rung, Workload

SYSBENCH = Path("/usr/bin/sysbench")
PLACES = ("home",)  # what the section's argv may name of the server's own
SCHEMA = ["CREATE SCHEMA sbtest", f"ALTER ROLE {DB_USER} SET search_path = sbtest, public"]


class PostgresSysbenchTarget(PostgresServer):
    """PostgreSQL 15 driven by sysbench (``[drivers.sysbench]``: load, run, result patterns, data check). No crash
    check: sysbench reports no per-commit log to count acknowledged commits against (pgbench does)."""

    driver = "sysbench"

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        """The workload's ``[drivers.sysbench]`` section read and checked; nothing runs yet.

        Raises:
            WorkloadError: the section is not one the command driver runs (one line, with the fix).
        """
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for sysbench")
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        self.command = CommandDriver(workload, self.driver, PLACES)  # the section's check is the data check

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return CommandDriver.checks_reads(section)

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """The workload's ``[drivers.sysbench]`` section, checked whole (``described.command.read_section``).

        Raises:
            WorkloadError: one line per problem naming the workload, the field and the fix.
        """
        return read_section(workload, cls.driver, PLACES)

    @classmethod
    def installed(cls) -> str | None:
        return str(SYSBENCH) if SYSBENCH.exists() and (PG_BIN / "postgres").exists() else None

    def check_tools(self) -> None:
        super().check_tools()
        if not SYSBENCH.exists():
            raise ToolMissingError(f"sysbench is not installed ({SYSBENCH}). {INSTALL_HINT}")

    def workload_facts(self) -> WorkloadFacts:
        """As the workload's section says (``CommandDriver.workload_facts``)."""
        return self.command.workload_facts()

    def data_bytes(self) -> int | None:
        return self.command.data_bytes()

    def loaded_inputs(self) -> Mapping[str, object]:
        return {"system": self.system, "driver": self.driver, "version": self.version(), "schema": SCHEMA,
                **self.command.loaded_inputs()}

    def load(self, logs: Path) -> None:
        for statement in SCHEMA:
            self._client([str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-c", statement],
                         logs / "schema.log", "making the sbtest schema", timeout_s=60)
        self.command.load(self._places(self.workload.records, 1), logs / "load.log")

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        return self.command.run(rung, timeout_s, log_path, self._places(max(1, rung.operations or rung.records), seed))

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """The workload's check after the run and the settle's crash and recovery (``CommandDriver.check``)."""
        self.command.check(lambda sql, log: self._query(sql, log, separator="\t"), log_path)

    def _places(self, operations: int, seed: int) -> dict[str, str | list[str]]:
        home = str(self._home)
        connection = ["--db-driver=pgsql", f"--pgsql-host={home}", f"--pgsql-user={DB_USER}", f"--pgsql-db={DB_NAME}"]
        return self.command.places({"home": home}, connection, operations, seed)
