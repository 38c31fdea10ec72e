"""PostgreSQL 15 (Debian's ``postgresql-15``) as the server under test: what every PostgreSQL target shares,
whichever driver runs the workload (pgbench ``target.py``, replay ``replay.py``, sysbench ``sysbench.py``, analytic
queries ``analytic.py``).

The server's life is ``ServerTarget``'s (``server/life.py``): the pristine copy, a restore before every run, the
start as knobtune's child, the settle and the stop. What is PostgreSQL's own is here: ``initdb`` makes the pristine
data, a config is checked with ``postgres -C`` before any run, ``pg_isready`` says it answers, the settle is a
``CHECKPOINT`` after the crash recovery, the statistics views are its counters and its wait events are sampled
while a run goes; PGTune is its known config. The server runs as the ``postgres`` user on a Unix socket only
(``server.py``). A driver's target subclasses ``PostgresServer`` and says how its workload loads, runs and is
checked.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import KnobtuneError, ToolMissingError
from knobtune.knobs import Value
from knobtune.server.life import ServerTarget, SettleWork
from knobtune.server.process import last_lines, run_logged
from knobtune.systems.postgresql import counters, waits
from knobtune.systems.postgresql.formats import postgresql_settings
from knobtune.systems.postgresql.pgtune import pgtune_config
from knobtune.systems.postgresql.server import (
    HOME_PREFIX, INSTALL_HINT, PG_BIN, PG_USER, POLL_S, READY_LIMIT_S, accepts_connections, connection, initdb_argv,
    postgres_argv, postgres_user, server_message,
)
from knobtune.targets import FailureKind, KnownConfig, Machine, RunFailure

__all__ = ["PostgresServer"]


class PostgresServer(ServerTarget):
    """PostgreSQL 15 as a server knobtune runs: its start, readiness, config check, counters, wait events, settle and
    known config; a subclass sets ``driver`` and implements the workload's hooks (``load``, ``benchmark``)."""

    system = "postgresql"
    label = "PostgreSQL"
    server_user = PG_USER
    home_prefix = HOME_PREFIX
    ready_limit_s = READY_LIMIT_S
    poll_s = POLL_S
    clean_stop = signal.SIGINT  # a fast shutdown: a checkpoint, data kept
    _sampler: waits.WaitSampler | None = None  # sampling the wait events while a run goes (every driver)

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

    # ------------------------------------------------------------ clients

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
