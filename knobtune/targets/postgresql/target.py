"""PostgreSQL 15 (Debian's ``postgresql-15``) as a managed scratch server, driven by pgbench.

The server is knobtune's own child: ``postgres`` run in the foreground as the
unprivileged ``postgres`` user (it refuses to run as root), its data in a
folder of its own under /tmp, listening on a Unix socket there only
(``listen_addresses=''``), in its own process group, killed with knobtune.
It never touches a user's cluster.

Life: ``open`` runs initdb, starts the server under the default config, loads
the workload's data once (``pgbench -i``), stops it cleanly and keeps that
stopped data directory as the pristine copy. Every run restores a copy of it
(outside the measured time), starts the server under the applied config (a
value PostgreSQL refuses is a ``refused`` run with its own message), runs
pgbench for the rung's transactions, then settles: the server is killed with
its work still dirty, restarted (the time until it accepts connections is the
recovery time), and checkpointed; recovery and checkpoint count in the run's
time. Then the workload's invariants are checked. ``close`` kills the server
and removes every folder.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import KnobtuneError, ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.knobs.units import human_bytes
from knobtune.processes import pid_alive
from knobtune.targets._base import FailureKind, KnownConfig, Measurement, Phase, RunFailure, Settle, Target, await_server
from knobtune.targets._process import kill_tree, last_lines, run_logged, spawn, stop_group, tree_pss_bytes
from knobtune.targets._heuristics import Machine
from knobtune.targets.postgresql.checks import CHECKS, DataCheck
from knobtune.targets.postgresql.formats import postgresql_settings
from knobtune.targets.postgresql.pgtune import pgtune_config
from knobtune.workloads import Rung, Workload

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "postgres"
DB_USER, DB_NAME = "bench", "postgres"
INSTALL_HINT = "Fix: install it with `apt-get install postgresql-15` (the README's set-up does this)"
HOME_PREFIX = "knobtune-pg-"
SCRIPT_DIR = Path(__file__).resolve().parents[2] / "workloads" / "pgbench"  # loaders and scripts we ship
READY_LIMIT_S = 120.0  # start-up (or crash recovery) may take this long before the run fails
CRASH_AFTER_S = 3.0  # the crash check kills the server this long into a run
_POLL_S = 0.02
_TPS = re.compile(r"number of transactions actually processed: (\d+)")
_FATAL = re.compile(r"(FATAL|PANIC|ERROR):\s+(.*)")


def postgres_user() -> pwd.struct_passwd:
    """Debian's ``postgres`` system user, which runs the server.

    Raises:
        ToolMissingError: there is no such user (PostgreSQL is not installed).
    """
    try:
        return pwd.getpwnam(PG_USER)
    except KeyError:
        raise ToolMissingError(f"the '{PG_USER}' system user does not exist. {INSTALL_HINT}") from None


class PostgresTarget(Target):
    system = "postgresql"
    driver = "pgbench"

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None) -> None:
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes)
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for pgbench")
        section = workload.driver(self.driver)
        self.scripts: dict[str, float] = {str(k): float(v) for k, v in section.get("scripts", {}).items()}
        self.load = str(section.get("load", "pgbench"))
        if self.load not in ("pgbench", *(p.stem.removesuffix("-load") for p in SCRIPT_DIR.glob("*-load.sql"))):
            raise WorkloadError(f"workload '{workload.name}': [drivers.pgbench] load = '{self.load}' is unknown. "
                                "Fix: use pgbench, or a loader in knobtune/workloads/pgbench/ (NAME-load.sql)")
        for name in self.scripts:
            if not (SCRIPT_DIR / f"{name}.sql").exists():
                raise WorkloadError(f"workload '{workload.name}': pgbench script '{name}' is not in {SCRIPT_DIR}. "
                                    "Fix: name a shipped script (e.g. ycsb-read) or drop it")
        self.script = str(section.get("script", "tpcb-like")) if not self.scripts else workload.name
        self.scale, self.clients = int(section.get("scale", 1)), int(section.get("clients", 1))
        self.threads = int(section.get("threads", 1))
        check = section.get("check")
        if check is not None and check not in CHECKS:
            raise WorkloadError(f"workload '{workload.name}': [drivers.pgbench] check = '{check}' is unknown. "
                                f"Fix: use one of {', '.join(CHECKS)}, or drop it")
        self.check: DataCheck | None = CHECKS[check] if check else None
        if self.check is not None and self.check.ledger_script not in (None, *self.scripts):
            raise WorkloadError(f"workload '{workload.name}': check = '{check}' counts the commits of script "
                                f"'{self.check.ledger_script}', which the workload does not run. Fix: add it to scripts")
        self._ledger_rows = 0  # the ledger table's rows in the loaded data
        self._settings: dict[str, str] = {}
        self._home: Path | None = None
        self._server: subprocess.Popen[bytes] | None = None

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return section.get("check") in CHECKS

    @classmethod
    def installed(cls) -> str | None:
        binary = PG_BIN / "pgbench"
        return str(binary) if binary.exists() else None

    def version(self) -> str:
        out = subprocess.run([str(PG_BIN / "postgres"), "--version"], capture_output=True, text=True, check=False)
        return out.stdout.strip().split()[-1] if out.stdout.strip() else "unknown"

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
        self.apply(config)
        data = self._restore()
        latency_dir = log_dir / "crash-check-latency"
        try:
            self._start(data, self._settings, log_dir / "crash-check.server.log")
            argv = self._pgbench_argv(["-T", str(int(CRASH_AFTER_S * 10))], latency_dir, seed=1)
            pgbench = spawn(argv, log_path=log_dir / "crash-check.pgbench.log")
            time.sleep(CRASH_AFTER_S)
            self._stop_server(clean=False)  # mid-run, commits in flight
            stop_group(pgbench, signal.SIGTERM, wait_s=60)  # its clients fail on the lost server and it ends
            acknowledged = self._ledger_commits(_transactions(latency_dir)[1])
            self._start(data, self._settings, log_dir / "crash-check.recovery.log", refusal=False)
            rows = self._ledger_growth(log_dir / "crash-check.count.log")
        finally:
            self._stop_server(clean=False)
        if rows < acknowledged:
            return (f"the server was killed mid-run after {acknowledged:,} acknowledged commits; after recovery "
                    f"{rows:,} were there ({acknowledged - rows:,} lost)")
        return None

    # ------------------------------------------------------------ life

    def open(self) -> None:
        if self._home is not None:
            return
        for tool in ("postgres", "initdb", "pgbench", "psql", "pg_isready"):
            if not (PG_BIN / tool).exists():
                raise ToolMissingError(f"PostgreSQL's {tool} is not installed ({PG_BIN / tool}). {INSTALL_HINT}")
        user = postgres_user()
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        _remove_stale_homes()
        # /tmp: the postgres user can reach it wherever the studies folder is; named by our pid
        self._home = Path(tempfile.mkdtemp(prefix=f"{HOME_PREFIX}{os.getpid()}-"))
        shutil.chown(self._home, user.pw_uid, user.pw_gid)
        logs = self.scratch_dir / "server"
        pristine = self._home / "pristine"
        self._as_postgres([str(PG_BIN / "initdb"), "-D", str(pristine), "-A", "trust", "-U", DB_USER, "--no-sync"],
                          logs / "initdb.log", "initdb")
        self._start(pristine, {}, logs / "load-server.log")
        if self.load == "pgbench":
            load = [str(PG_BIN / "pgbench"), "-i", "-q", "-s", str(self.scale), *self._connection()]
        else:
            load = [str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-v",
                    f"records={self.workload.records}", "-v", f"scale={self.scale}",
                    "-f", str(SCRIPT_DIR / f"{self.load}-load.sql")]
        self._client(load, logs / "load.log", f"loading the data ({self.load})", timeout_s=1800)
        if self.check is not None and self.check.ledger is not None:
            self._ledger_rows = int(self._query(f"SELECT count(*) FROM {self.check.ledger}", logs / "ledger.log"))
        self._stop_server(clean=True)

    def close(self) -> None:
        self._stop_server(clean=False)
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
        shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def apply(self, config: Mapping[str, Value]) -> None:
        """Check the settings with ``postgres -C`` against the pristine data (no server started).

        Raises:
            RunFailure: (REFUSED) PostgreSQL rejects a value; its own message is the reason.
        """
        self._settings = postgresql_settings(self.catalog, config)
        if not self._settings or self._home is None:
            return
        argv = [str(PG_BIN / "postgres"), "-D", str(self._home / "pristine"), "-C", "shared_buffers",
                *self._flags(self._settings)]
        log = self.scratch_dir / "server" / "check-config.log"
        result = run_logged(argv, log_path=log, timeout_s=60, user=PG_USER)
        if result.returncode != 0:
            raise RunFailure(FailureKind.REFUSED, f"PostgreSQL refused the config: {_server_message(log)}", log)

    # ------------------------------------------------------------ a run

    def run(self, rung: Rung, *, timeout_s: float | None, log_path: Path, seed: int) -> Measurement:
        if self._home is None:
            raise RunFailure(FailureKind.TOOL, "the target was not opened")
        data = self._restore()
        server_log = log_path.with_suffix(".server.log")
        try:
            started = time.monotonic()
            self._start(data, self._settings, server_log, refusal=True)
            start_s = time.monotonic() - started
            memory = _MemoryWatch(self._server, self.memory_limit_bytes)  # type: ignore[arg-type]
            try:
                with memory:
                    workload = self._pgbench(rung, timeout_s, log_path, seed)
            except RunFailure:
                if not memory.over:
                    raise
            if memory.over:
                raise RunFailure(FailureKind.MEMORY, f"the server held {human_bytes(memory.peak_bytes)}, over the "
                                 f"memory limit of {human_bytes(self.memory_limit_bytes or 0)}", server_log)
            settle = self._settle(data, server_log, log_path, timeout_s, workload.elapsed_s) if self.settle else None
            self._check(workload.committed, log_path)
        finally:
            self._stop_server(clean=False)
        phase = Phase(self.script, workload.transactions, workload.elapsed_s,
                      workload.transactions / workload.elapsed_s if workload.elapsed_s else 0.0,
                      p50_us=workload.p50_us, p99_us=workload.p99_us, p999_us=workload.p999_us, max_us=workload.max_us)
        elapsed = workload.elapsed_s + (settle.settle_s if settle else 0.0)
        return Measurement(elapsed_s=elapsed, phases=(phase,), measured=(self.script,), log_path=log_path,
                           verified=self.check is not None, settle=settle, peak_rss_bytes=memory.peak_bytes,
                           start_s=start_s)

    def _restore(self) -> Path:
        """A fresh copy of the pristine data directory (owner and modes kept), outside the measured time."""
        data = self._home / "data"  # type: ignore[operator]
        shutil.rmtree(data, ignore_errors=True)
        result = subprocess.run(["cp", "-a", str(self._home / "pristine"), str(data)],  # type: ignore[operator]
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RunFailure(FailureKind.TOOL, f"restoring the data failed: {result.stderr.strip()[-300:]}")
        return data

    def _pgbench_argv(self, length: list[str], latency_dir: Path, seed: int) -> list[str]:
        """pgbench running the workload's scripts for ``length`` (-t N or -T S), each commit logged in ``latency_dir``."""
        shutil.rmtree(latency_dir, ignore_errors=True)
        latency_dir.mkdir(parents=True)
        what = [arg for name, weight in self.scripts.items()
                for arg in ("-f", f"{SCRIPT_DIR / name}.sql@{max(1, round(weight * 100))}")] or ["-b", self.script]
        return [str(PG_BIN / "pgbench"), "-n", "-M", "prepared", *what, "-D", f"records={self.workload.records}",
                "-D", f"scale={self.scale}", "-c", str(self.clients), "-j", str(self.threads), *length,
                f"--random-seed={seed}", "-P", "1", "-l", f"--log-prefix={latency_dir / 'tx'}", *self._connection()]

    def _pgbench(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int) -> _Pgbench:
        per_client = max(1, (rung.operations or rung.records) // self.clients)
        latency_dir = log_path.parent / f"{log_path.stem}-latency"
        argv = self._pgbench_argv(["-t", str(per_client)], latency_dir, seed)
        result = run_logged(argv, log_path=log_path, timeout_s=timeout_s)
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT, f"pgbench was stopped after {timeout_s:.1f} s (the limit at {rung})",
                             log_path)
        text = log_path.read_text(errors="replace")
        if result.returncode != 0:
            raise RunFailure(FailureKind.CRASH, f"pgbench failed (status {result.returncode}): "
                             f"{last_lines(text)}", log_path)
        done = _TPS.search(text)
        if done is None:
            raise RunFailure(FailureKind.TOOL, "pgbench printed no transaction count", log_path)
        latencies, committed = _transactions(latency_dir)
        shutil.rmtree(latency_dir, ignore_errors=True)
        return _Pgbench(int(done.group(1)), result.elapsed_s, committed, *_percentiles(latencies))

    def _settle(self, data: Path, server_log: Path, log_path: Path, timeout_s: float | None,
                workload_s: float) -> Settle:
        """Kill the server with its work dirty, time its recovery, then checkpoint: the bill the run left."""
        wal_bytes = sum(f.stat().st_size for f in (data / "pg_wal").glob("0*") if f.is_file())
        self._stop_server(clean=False)
        started = time.monotonic()
        self._start(data, self._settings, server_log, refusal=False)
        recovery_s = time.monotonic() - started
        limit = None if timeout_s is None else max(timeout_s - workload_s - recovery_s, 1.0)
        checkpoint = self._client([str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-c",
                                   "CHECKPOINT"], log_path.with_suffix(".checkpoint.log"), "the checkpoint",
                                  timeout_s=limit, failure=FailureKind.TIMEOUT)
        return Settle(recovery_s=recovery_s, settle_s=recovery_s + checkpoint, flush_s=checkpoint, compaction_s=0.0,
                      files_by_level=(), sst_bytes=0, wal_bytes_at_open=wal_bytes, reshaped=False, log_path=server_log)

    def _check(self, committed: Counter[int], log_path: Path) -> None:
        """The workload's data check after the run (and the crash and recovery of the settle)."""
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

    def _ledger_commits(self, committed: Counter[int]) -> int:
        """The commits that each added a row to the ledger (pgbench numbers the scripts from 0, as given)."""
        script = self.check.ledger_script if self.check else None
        if script is None:
            return sum(committed.values())
        return committed[list(self.scripts).index(script)]

    def _ledger_growth(self, log: Path) -> int:
        return int(self._query(f"SELECT count(*) FROM {self.check.ledger}", log)) - self._ledger_rows  # type: ignore[union-attr]

    # ------------------------------------------------------------ the server

    def _flags(self, settings: Mapping[str, str]) -> list[str]:
        return [arg for name, text in settings.items() for arg in ("-c", f"{name}={text}")]

    def _start(self, data: Path, settings: Mapping[str, str], log: Path, refusal: bool = True) -> None:
        """Start the server in the foreground and wait until it accepts connections.

        Raises:
            RunFailure: REFUSED when it exits at start-up under ``settings`` (``refusal``), else CRASH.
            KnobtuneError: under the default settings (the machine or the set-up is at fault).
        """
        argv = [str(PG_BIN / "postgres"), "-D", str(data), "-k", str(self._home), "-c", "listen_addresses=",
                *self._flags(settings)]
        self._server = spawn(argv, log_path=log, user=PG_USER)
        ready = [str(PG_BIN / "pg_isready"), "-q", "-h", str(self._home), "-U", DB_USER]
        await_server(self._server, lambda: subprocess.run(ready, capture_output=True, check=False).returncode == 0,
                     system="PostgreSQL", why_exited=lambda: _server_message(log), log=log,
                     default_config=not settings, refusal=refusal, limit_s=READY_LIMIT_S, poll_s=_POLL_S)

    def _stop_server(self, clean: bool) -> None:
        """Stop the server: cleanly (a fast shutdown, SIGINT: a checkpoint, data kept) or as a crash would.

        A crash kills the server and every process of its tree at once (its children leave its process
        group), so none of them gets to write out what is still in shared memory.
        """
        if self._server is None:
            return
        if not clean:
            kill_tree(self._server.pid)
        stop_group(self._server, signal.SIGINT if clean else signal.SIGKILL)
        self._server = None

    def _connection(self) -> list[str]:
        return ["-h", str(self._home), "-U", DB_USER, "-d", DB_NAME]

    def _client(self, argv: list[str], log: Path, what: str, timeout_s: float | None,
                failure: FailureKind = FailureKind.TOOL) -> float:
        """Run a client program to completion; its elapsed seconds."""
        result = run_logged(argv, log_path=log, timeout_s=timeout_s)
        if result.timed_out:
            raise RunFailure(failure, f"{what} did not finish within {timeout_s:.1f} s", log)
        if result.returncode != 0:
            raise RunFailure(FailureKind.TOOL, f"{what} failed: {last_lines(log.read_text(errors='replace'))}", log)
        return result.elapsed_s

    def _as_postgres(self, argv: list[str], log: Path, what: str) -> None:
        result = run_logged(argv, log_path=log, timeout_s=600, user=PG_USER)
        if result.returncode != 0:
            raise KnobtuneError(f"{what} failed: {last_lines(log.read_text(errors='replace'))}. Fix: see {log}")

    def _query(self, sql: str, log: Path) -> str:
        self._client([str(PG_BIN / "psql"), *self._connection(), "-v", "ON_ERROR_STOP=1", "-tA", "-c", sql], log,
                     "the data check", timeout_s=600)
        return log.read_text().strip().splitlines()[-1]


class _Pgbench:
    """What one pgbench run reported: transactions, wall time, commits by script, latency percentiles (µs)."""

    def __init__(self, transactions: int, elapsed_s: float, committed: Counter[int], p50_us: float | None,
                 p99_us: float | None, p999_us: float | None, max_us: float | None) -> None:
        self.transactions, self.elapsed_s, self.committed = transactions, elapsed_s, committed
        self.p50_us, self.p99_us, self.p999_us, self.max_us = p50_us, p99_us, p999_us, max_us


class _MemoryWatch:
    """Samples the memory of the server's processes (PSS, shared buffers counted once) every 50 ms of a run."""

    def __init__(self, server: subprocess.Popen[bytes], limit_bytes: int | None) -> None:
        self.server, self.limit_bytes = server, limit_bytes
        self.peak_bytes, self.over = 0, False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _MemoryWatch:
        self.peak_bytes = tree_pss_bytes(self.server.pid)  # the server before the run: a short run may end first
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            self.peak_bytes = max(self.peak_bytes, tree_pss_bytes(self.server.pid))
            if self.limit_bytes is not None and self.peak_bytes > self.limit_bytes:
                self.over = True
                stop_group(self.server)  # pgbench then fails on its lost connections
                return


class StorageServer:
    """A scratch PostgreSQL server to keep studies in (``--storage``), for trying workers on one machine and for
    tests: knobtune's child like the servers under test, on a Unix socket only, removed on exit. Studies on
    several machines need a server they all reach, set up by its owner (docs/workers.md).

    Usage: ``with StorageServer() as url: ...``; ``url`` is an Optuna (SQLAlchemy) storage URL.
    """

    def __init__(self) -> None:
        self._home: Path | None = None
        self._server: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start the server and return its storage URL.

        Raises:
            ToolMissingError: PostgreSQL is not installed.
            KnobtuneError: initdb or the server failed (the message names the log).
        """
        user = postgres_user()
        _remove_stale_homes()
        self._home = Path(tempfile.mkdtemp(prefix=f"{HOME_PREFIX}{os.getpid()}-storage-"))
        shutil.chown(self._home, user.pw_uid, user.pw_gid)
        data, log = self._home / "data", self._home / "server.log"
        init = run_logged([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", DB_USER, "--no-sync"],
                          log_path=self._home / "initdb.log", timeout_s=300, user=PG_USER)
        if init.returncode != 0:
            raise KnobtuneError(f"initdb of the storage server failed. Fix: see {self._home / 'initdb.log'}")
        self._server = spawn([str(PG_BIN / "postgres"), "-D", str(data), "-k", str(self._home),
                              "-c", "listen_addresses=", "-c", "max_connections=200"], log_path=log, user=PG_USER)
        ready = [str(PG_BIN / "pg_isready"), "-q", "-h", str(self._home), "-U", DB_USER]
        await_server(self._server, lambda: subprocess.run(ready, capture_output=True, check=False).returncode == 0,
                     system="PostgreSQL (storage)", why_exited=lambda: _server_message(log), log=log,
                     default_config=True, refusal=False, limit_s=READY_LIMIT_S, poll_s=_POLL_S)
        return f"postgresql+psycopg://{DB_USER}@/{DB_NAME}?host={self._home}"

    def stop(self) -> None:
        if self._server is not None:
            stop_group(self._server, signal.SIGINT)
            self._server = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None


def _remove_stale_homes() -> None:
    """Server folders left in /tmp by a knobtune that was killed (its pid is gone); their servers died with it."""
    for folder in Path(tempfile.gettempdir()).glob(f"{HOME_PREFIX}*"):
        pid = folder.name.removeprefix(HOME_PREFIX).split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _transactions(folder: Path) -> tuple[list[float], Counter[int]]:
    """The latencies (µs) of the transactions pgbench logged as committed, and their count by script.

    A line of pgbench's log: client, transaction, latency (or ``failed``/``skipped``), script, epoch, µs.
    """
    latencies: list[float] = []
    committed: Counter[int] = Counter()
    for path in folder.glob("tx*"):
        for line in path.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[2].isdigit():
                latencies.append(float(fields[2]))
                committed[int(fields[3])] += 1
    return latencies, committed


def _percentiles(values: list[float]) -> tuple[float | None, float | None, float | None, float | None]:
    """p50, p99, p99.9 and max."""
    if not values:
        return None, None, None, None
    values = sorted(values)

    def at(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return statistics.median(values), at(0.99), at(0.999), values[-1]


def _server_message(log: Path) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    found = [m.group(0) for m in map(_FATAL.search, text.splitlines()) if m]
    return (found[-1] if found else last_lines(text))[-400:]
