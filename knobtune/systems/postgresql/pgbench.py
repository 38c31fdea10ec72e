"""pgbench, as a PostgreSQL run drives it: its command line, and what it reported (transactions, latencies).

Each commit is logged (``-l``) to a folder of its own, which gives the exact
commits by script (for the ledger check) and the latency percentiles.
"""

from __future__ import annotations

import re
import shutil
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knobtune import schema
from knobtune.errors import WorkloadError
from knobtune.names import nearest
from knobtune.schema import setting, table
from knobtune.targets import FailureKind, Phase, RunFailure
from knobtune.server.process import last_lines, run_logged
from knobtune.server.life import Benchmarked
from knobtune.systems.postgresql.checks import CHECKS
from knobtune.systems.postgresql.server import PG_BIN
from knobtune.workloads import Rung, Workload

SCRIPT_DIR = Path(__file__).resolve().parents[2] / "workloads" / "pgbench"  # loaders and scripts we ship
BUILT_IN = ("tpcb-like", "simple-update", "select-only")  # pgbench's built-in scripts (pgbench --list)
PROFILES = ("web", "oltp", "dw", "desktop", "mixed")  # PGTune's (pgtune.toml)
_TPS = re.compile(r"number of transactions actually processed: (\d+)")


@dataclass(frozen=True)
class PgbenchSection:
    """A workload's ``[drivers.pgbench]`` section (docs/workloads.md), read through the schema."""

    script: str = setting("tpcb-like", choices=BUILT_IN, what="a pgbench built-in script")
    scripts: Mapping[str, float] = table(positive=True, example=0.5, note="the script's weight")
    load: str = setting("pgbench", example="pgbench", note="or a shipped NAME-load.sql: ycsb, tpcc")
    scale: int = setting(1, least=1, example=50)
    clients: int = setting(1, least=1, example=8)
    threads: int = setting(1, least=1, example=2)
    check: str | None = setting(None, choices=tuple(CHECKS), what="a data check knobtune has")
    baseline_profile: str = setting("oltp", choices=PROFILES, what="a PGTune profile")


def read_section(workload: Workload) -> PgbenchSection:
    """``workload``'s ``[drivers.pgbench]`` section: its fields through the schema, then its loader, its scripts and
    its check's ledger script found.

    Raises:
        WorkloadError: one line per problem naming the workload, the field and the fix.
    """
    source = f"{workload.source or f'workload {workload.name!r}'}: [drivers.pgbench]"
    section = schema.read(PgbenchSection, dict(workload.driver("pgbench")), schema.Where(source,
                          docs="docs/workloads.md"), WorkloadError)
    loaders = ("pgbench", *sorted(p.stem.removesuffix("-load") for p in SCRIPT_DIR.glob("*-load.sql")))
    if section.load not in loaders:
        raise WorkloadError(f"{source}: load '{section.load}' is not a loader{nearest(section.load, loaders)}. "
                            f"Fix: use one of {', '.join(loaders)} (pgbench -i, or knobtune/workloads/pgbench/"
                            "NAME-load.sql)")
    for name in section.scripts:
        if not (SCRIPT_DIR / f"{name}.sql").exists():
            raise WorkloadError(f"{source}: scripts.{name}: pgbench script '{name}' is not in {SCRIPT_DIR}. "
                                "Fix: name a shipped script (e.g. ycsb-read) or drop it")
    ledger = CHECKS[section.check].ledger_script if section.check else None
    if ledger not in (None, *section.scripts):
        raise WorkloadError(f"{source}: check = '{section.check}' counts the commits of script '{ledger}', which the "
                            "workload does not run. Fix: add it to scripts")
    return section


@dataclass(frozen=True)
class PgbenchRun(Benchmarked):
    """A pgbench run, with its commits counted by script (pgbench numbers the scripts from 0, as given)."""

    committed: Mapping[int, int]


@dataclass(frozen=True)
class Pgbench:
    """How a workload runs pgbench: its weighted scripts (or one built-in script), the data's size, the clients."""

    scripts: Mapping[str, float]  # script file stem -> weight; empty: the built-in ``script``
    script: str
    records: int
    scale: int
    clients: int
    threads: int

    def argv(self, length: list[str], latency_dir: Path, seed: int, connection: list[str]) -> list[str]:
        """pgbench running the scripts for ``length`` (-t N or -T S), each commit logged in ``latency_dir``."""
        shutil.rmtree(latency_dir, ignore_errors=True)
        latency_dir.mkdir(parents=True)
        what = [arg for name, weight in self.scripts.items()
                for arg in ("-f", f"{SCRIPT_DIR / name}.sql@{max(1, round(weight * 100))}")] or ["-b", self.script]
        return [str(PG_BIN / "pgbench"), "-n", "-M", "prepared", *what, "-D", f"records={self.records}",
                "-D", f"scale={self.scale}", "-c", str(self.clients), "-j", str(self.threads), *length,
                f"--random-seed={seed}", "-P", "1", "-l", f"--log-prefix={latency_dir / 'tx'}", *connection]

    def run(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int, connection: list[str],
            verified: bool) -> PgbenchRun:
        """Run the rung's transactions (shared among the clients).

        Raises:
            RunFailure: TIMEOUT at ``timeout_s``; CRASH when pgbench failed; TOOL when it printed no count.
        """
        per_client = max(1, (rung.operations or rung.records) // self.clients)
        latency_dir = log_path.parent / f"{log_path.stem}-latency"
        result = run_logged(self.argv(["-t", str(per_client)], latency_dir, seed, connection), log_path=log_path,
                            timeout_s=timeout_s)
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
        latencies, committed = transactions(latency_dir)
        shutil.rmtree(latency_dir, ignore_errors=True)
        count, elapsed_s = int(done.group(1)), result.elapsed_s
        p50, p99, p999, most = _percentiles(latencies)
        phase = Phase(self.script, count, elapsed_s, count / elapsed_s if elapsed_s else 0.0,
                      p50_us=p50, p99_us=p99, p999_us=p999, max_us=most,
                      mean_us=statistics.fmean(latencies) if latencies else None)
        return PgbenchRun(phases=(phase,), measured=(self.script,), elapsed_s=elapsed_s, verified=verified,
                          committed=committed)


def transactions(folder: Path) -> tuple[list[float], Counter[int]]:
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
