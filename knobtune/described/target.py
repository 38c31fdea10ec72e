"""The server a system file describes, run by the one server life (``server.life.ServerTarget``).

Everything about the system comes from its file (``described/system_file.py``); the
benchmark's argv, how to read its result and how to check the data come from
the workload's section for the driver (docs/system-file.md). A described
system's class is made per system file and driver (``target_classes``), so the
registry runs it like any system's target.

The workload's section is run by ``described.command.CommandDriver``.
"""

from __future__ import annotations

import contextlib
import pwd
import re
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import KnobtuneError, ToolMissingError, WorkloadError
from knobtune.knobs import Catalog, Value, render_named
from knobtune.server import loaded
from knobtune.targets import FailureKind, KnownConfig, Machine, RunFailure, Target, WorkloadFacts, clamp_into_range
from knobtune.server.process import last_lines, run_logged, spawn, stop_group
from knobtune.described.command import CommandDriver, read_section
from knobtune.server.life import Benchmarked, ServerTarget, SettleWork
from knobtune.described.system_file import PLACES, SystemFile, fill, known_value
from knobtune.workloads import Rung, Workload

CRASH_AFTER_S = 3.0  # the durability check kills the server this long into a run
_SQL_LIMIT_S = 600.0


class DescribedServerTarget(ServerTarget):
    """A server run from its system file (``files``); subclasses made by ``target_classes`` set it and the driver."""

    files: SystemFile

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for {self.driver}")
        self.command = CommandDriver(workload, self.driver, set(PLACES) | set(self.files.paths))

    # ------------------------------------------------------------ the system's facts

    @classmethod
    def installed(cls) -> str | None:
        tools = cls.files.tools
        return tools[0] if tools and Path(tools[0]).exists() else None

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return CommandDriver.checks_reads(section)

    @classmethod
    def section(cls, workload: Workload) -> Mapping[str, Any]:
        """The workload's section for this driver, checked whole (``described.command.read_section``).

        Raises:
            WorkloadError: one line per problem naming the workload, the field and the fix.
        """
        return read_section(workload, cls.driver, set(PLACES) | set(cls.files.paths))

    @classmethod
    def build(cls) -> str | None:
        """The system's version as its system file's version command reports it; None when it cannot say."""
        try:
            out = subprocess.run(list(cls.files.version_argv), capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = re.search(cls.files.version_pattern, out.stdout + out.stderr)
        return found.group(1) if found else None

    def version(self) -> str:
        return self.build() or "unknown"

    def workload_facts(self) -> WorkloadFacts:
        """As the workload's section says (``CommandDriver.workload_facts``)."""
        return self.command.workload_facts()

    def known_configs(self) -> tuple[KnownConfig, ...]:
        """The system file's known starting configs, computed for this machine (memory, cores)."""
        machine = Machine.from_host()
        facts = {"memory_bytes": machine.memory_bytes, "cores": machine.cpus}
        configs = []
        for known in self.files.known:
            values = {knob: known_value(self.catalog, knob, value, facts) for knob, value in known.values.items()}
            notes: list[str] = []  # a machine larger than a range: the catalog's limit holds
            fitted = {k: clamp_into_range(self.catalog.knobs[k], v, notes, known.label) for k, v in values.items()}
            configs.append(KnownConfig(known.label, dict(self.catalog.changed(self.catalog.config(fitted))),
                                       known.source))
        return tuple(configs)

    # ------------------------------------------------------------ what ServerTarget asks

    def check_tools(self) -> None:
        for tool in self.files.tools:
            if not Path(tool).exists():
                raise ToolMissingError(f"{self.label}'s {Path(tool).name} is not installed ({tool}). "
                                       f"Fix: {self.files.install}")
        if self.files.user is not None:
            try:
                pwd.getpwnam(self.files.user)
            except KeyError:
                raise ToolMissingError(f"{self.label} runs as user '{self.files.user}', which does not exist. "
                                       f"Fix: {self.files.install}") from None

    def init_pristine(self, pristine: Path, logs: Path) -> None:
        argv = fill(self.files.init, self._places(pristine))
        log = logs / "init.log"
        result = run_logged(argv, log_path=log, timeout_s=600, user=self.files.user, cwd=self._home)
        if result.returncode != 0:
            raise KnobtuneError(f"{self.label}'s data folder could not be made ({Path(argv[0]).name} status "
                                f"{result.returncode}): {last_lines(log.read_text(errors='replace'))}. Fix: see {log}")

    def start_argv(self, data: Path, config: Mapping[str, Value]) -> list[str]:
        places = self._places(data)
        if self.files.config_format is not None:
            text = self.files.format(self.files.config_format).render(self.catalog, config)
            config_file = Path(places["config_file"])  # type: ignore[arg-type]
            config_file.write_text(text)
            config_file.chmod(0o644)
        else:
            template = self.files.config_flag or ""
            places["config"] = [template.replace("{name}", name).replace("{value}", value)
                                for name, value in sorted(render_named(self.catalog, config,
                                                                       self.catalog.formats[0]).items())]
        return fill(self.files.start, places)

    def answers(self) -> bool:
        try:
            done = subprocess.run(fill(self.files.ready, self._places()), capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def load(self, logs: Path) -> None:
        for statement in self.files.load_sql:
            self._sql(statement, logs / "load-sql.log", "the system's load SQL")
        self.command.load(self._run_places(self.workload.records, 1), logs / "load.log")

    def data_bytes(self) -> int | None:
        return self.command.data_bytes()

    def loaded_inputs(self) -> Mapping[str, object]:
        """The system, its version and the load (its SQL, the workload's load argv and section): a later study of
        the same reuses the loaded copy."""
        return {"system": self.system, "file": loaded.file_digest(self.files.path), "version": self.version(),
                "load_sql": list(self.files.load_sql), **self.command.loaded_inputs()}

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        return self.command.run(rung, timeout_s, log_path,
                                self._run_places(max(1, rung.operations or rung.records), seed))

    def read_counters(self, log: Path) -> dict[str, float]:
        """The system's counters now, as its file's query answers them (name, number rows).

        Raises:
            RunFailure: (TOOL) the query failed.
        """
        spec = self.files.counters
        if spec is None:
            return {}
        rows = dict(line.split("\t", 1) for line in self._sql(spec.sql, log, "reading the counters", all_rows=True)
                    if "\t" in line)
        counters = {}
        for ours, theirs in spec.names.items():
            with contextlib.suppress(KeyError, ValueError):
                counters[ours] = float(rows[theirs].strip())
        return counters

    def counters_over_run(self, before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
        levels = self.files.counters.levels if self.files.counters else frozenset()
        return {name: value if name in levels else value - before.get(name, 0.0) for name, value in after.items()}

    def dirty_bytes(self, data: Path) -> int:
        query = self.files.settle.dirty_sql
        if query is None:
            return 0
        with contextlib.suppress(RunFailure, ValueError):
            return int(float(self._sql(query, data.parent / "dirty.log", "reading the log to replay")))
        return 0

    def settle_work(self, limit_s: float | None, log_path: Path) -> SettleWork:
        """The file's settle statements, then its query polled until it answers what it should (the flush done).

        Raises:
            RunFailure: TIMEOUT at ``limit_s``; TOOL when a statement fails.
        """
        settle, started = self.files.settle, time.monotonic()
        log = log_path.with_suffix(".settle.log")
        for statement in settle.sql:
            self._sql(statement, log, "the settle")
        while settle.wait_sql is not None:
            if self._sql(settle.wait_sql, log, "the settle's wait").strip() == settle.equals:
                break
            if limit_s is not None and time.monotonic() - started > limit_s:
                raise RunFailure(FailureKind.TIMEOUT, f"the settle did not finish within {limit_s:.1f} s", log)
            time.sleep(settle.poll_s)
        return SettleWork(flush_s=time.monotonic() - started, compaction_s=0.0)

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """The workload's check after the run and the settle's crash and recovery (``CommandDriver.check``)."""
        self.command.check(lambda sql, log: self._sql(sql, log, "the data check"), log_path)

    def has_crash_check(self) -> bool:
        return self.files.durability is not None

    def crash_check(self, config: Mapping[str, Value], log_dir: Path) -> str | None:
        """Kill the server while the workload runs and a ledger gains one row per commit; after recovery every
        commit the client saw acknowledged must be there."""
        durability = self.files.durability
        if durability is None or self._home is None:
            return None
        self.check_config(config)
        data = self._restore()
        log = log_dir / "crash-check.sql.log"
        bench = None
        try:
            self._start(data, config, log_dir / "crash-check.server.log", refusal=True)
            for statement in durability.setup:
                self._sql(statement, log, "the durability check's setup")
            full = self.workload.rungs[-1]
            bench = spawn(self.command.run_argv(self._run_places(max(1, full.operations or full.records), 1)),
                          log_path=log_dir / "crash-check.run.log")
            ledger = _Ledger(self, durability.commit)
            ledger.start()
            time.sleep(CRASH_AFTER_S)
            self._stop_server(clean=False)  # mid-run, commits in flight
            acknowledged = ledger.stop()
            self._start(data, config, log_dir / "crash-check.recovery.log", refusal=False)
            rows = int(self._sql(durability.count, log, "counting the ledger"))
        finally:
            if bench is not None:
                stop_group(bench, 15, wait_s=30)
            self._stop_server(clean=False)
        if rows < acknowledged:
            return (f"the server was killed mid-run after {acknowledged:,} acknowledged commits; after recovery "
                    f"{rows:,} were there ({acknowledged - rows:,} lost)")
        return None

    # ------------------------------------------------------------ helpers

    def _places(self, data: Path | None = None) -> dict[str, str | list[str]]:
        home = self._home or self.scratch_dir
        places: dict[str, str | list[str]] = {"home": str(home), "data": str(data or home / "run"),
                                               "config_file": str(home / "knobtune-config")}
        for name, template in self.files.paths.items():
            places[name] = fill([template], places)[0]
        return places

    def _run_places(self, operations: int, seed: int) -> dict[str, str | list[str]]:
        places = self._places()
        return self.command.places(places, fill(self.files.drivers[self.driver], places), operations, seed)

    def _sql(self, statement: str, log: Path, what: str, all_rows: bool = False) -> Any:
        """One statement through the system's client; its last line (or every line)."""
        argv = fill(self.files.sql, {**self._places(), "sql": statement})
        result = run_logged(argv, log_path=log, timeout_s=_SQL_LIMIT_S)
        text = log.read_text(errors="replace")
        if result.returncode != 0 or result.timed_out:
            raise RunFailure(FailureKind.TOOL, f"{what} failed: {last_lines(text)}", log)
        lines = text.strip().splitlines()
        return lines if all_rows else (lines[-1] if lines else "")


class _Ledger(threading.Thread):
    """Commits one ledger row at a time through the system's client until stopped; counts those acknowledged."""

    def __init__(self, target: DescribedServerTarget, commit: str) -> None:
        super().__init__(daemon=True)
        self.target, self.commit, self.acknowledged = target, commit, 0
        self._stop_now = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop_now.is_set():
            n += 1
            argv = fill(self.target.files.sql, {**self.target._places(), "sql": self.commit.replace("{n}", str(n))})
            try:
                done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
            except (OSError, subprocess.TimeoutExpired):
                return
            if done.returncode != 0:
                return
            self.acknowledged = n

    def stop(self) -> int:
        self._stop_now.set()
        self.join(timeout=60)
        return self.acknowledged


def target_classes(files: SystemFile) -> dict[str, type[Target]]:
    """One target class per driver of the system file."""
    return {driver: type(f"{files.name.title()}{driver.title()}Target", (DescribedServerTarget,),
                         {"files": files, "system": files.name, "driver": driver, "label": files.label,
                          "noun": files.noun, "server_user": files.user, "home_prefix": f"knobtune-{files.name}-",
                          "ready_limit_s": files.ready_limit_s, "stop_limit_s": files.stop_limit_s,
                          "clean_stop": files.clean_stop})
            for driver in files.drivers}


