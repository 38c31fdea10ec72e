"""PostgreSQL under an analytic workload: our TPC-H kit's 22 queries through psql, every answer checked.

The server's life is ``PostgresServer``'s (and ``ServerTarget``'s): the
pristine copy loaded once, a restore before every run, the start under the
config, the settle (crash, timed recovery, ``CHECKPOINT``) counted in the run.
What is this driver's own: the loader is ``knobtune/workloads/tpch/NAME-load.sql``
at scale factor ``scale``; a run is one psql session over the rung's queries
(``tpch.py``), each query a phase; and the data check compares every query's
answer with the default's on the same data and parameters.

The default's answers are computed once per seed (the study's: the same
parameters for every config of a study), the first time a run asks for a
query whose answer is not known yet: a run under the default keeps its own
answers; a run under another config first runs the missing queries under the
default on a restored copy, outside the measured time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knobtune.errors import WorkloadError
from knobtune.knobs import Catalog, Value
from knobtune.server import loaded
from knobtune.targets import FailureKind, Measurement, Phase, RunFailure, WorkloadFacts
from knobtune.server.process import last_lines, run_logged
from knobtune.server.life import Benchmarked
from knobtune.systems.postgresql import tpch
from knobtune.systems.postgresql.postgres import PostgresServer
from knobtune.systems.postgresql.server import PG_BIN
from knobtune.workloads import Rung, Workload


@dataclass(frozen=True)
class QueriesRun(Benchmarked):
    """A run of queries: each one's answer, and the seed its parameters were drawn from."""

    answers: tuple[tpch.Answer, ...]
    seed: int


class PostgresQueriesTarget(PostgresServer):
    """PostgreSQL 15 running a kit of analytic queries (``[drivers.queries]``: load, scale, queries). No crash
    check: the queries only read, nothing acknowledged is there to lose."""

    driver = "queries"

    def __init__(self, catalog: Catalog, workload: Workload, scratch_dir: Path, *, twin: bool = False,
                 settle: bool = True, memory_limit_bytes: int | None = None, scale_rungs: bool = False) -> None:
        """The workload's ``[drivers.queries]`` section read and checked; nothing runs yet.

        Raises:
            WorkloadError: the section names a kit or loader that is not shipped, or a scale that is no scale factor.
        """
        if twin:
            raise WorkloadError(f"workload '{workload.name}' has no verifiable twin for queries")
        super().__init__(catalog, workload, scratch_dir, settle=settle, memory_limit_bytes=memory_limit_bytes,
                         scale_rungs=scale_rungs)
        section = workload.driver(self.driver)
        self.load_with = str(section.get("load", "tpch"))
        kit = str(section.get("queries", "tpch"))
        if kit != "tpch" or not (tpch.QUERY_DIR / f"{self.load_with}-load.sql").exists():
            raise WorkloadError(f"workload '{workload.name}': [drivers.queries] load = '{self.load_with}', "
                                f"queries = '{kit}' is not a shipped kit. Fix: use load = \"tpch\", queries = \"tpch\"")
        scale = section.get("scale", 1)
        if not isinstance(scale, int | float) or isinstance(scale, bool) or not 0 < scale <= 100:
            raise WorkloadError(f"workload '{workload.name}': [drivers.queries] scale = {scale!r} is not a scale "
                                "factor. Fix: give a number in (0, 100], e.g. 0.5")
        self.scale = float(scale)
        self._expected: dict[int, dict[int, tpch.Rows]] = {}  # seed -> query -> the default's answer

    @staticmethod
    def checks_reads(section: Mapping[str, object]) -> bool:
        return True

    @classmethod
    def installed(cls) -> str | None:
        binary = PG_BIN / "psql"
        return str(binary) if binary.exists() else None

    def workload_facts(self) -> WorkloadFacts:
        """One client (one psql session runs the queries one after another) that only reads."""
        return WorkloadFacts.of(self.workload, data_bytes=self.data_bytes() or None, clients=1, writes=False)

    def queries(self, rung: Rung, seed: int) -> tuple[int, ...]:
        """The queries a rung runs: the first ceil(fraction x records) of the seeded order, round after round."""
        count = max(1, math.ceil(rung.fraction * self.workload.records - 1e-9))
        ordered = tpch.order(seed)
        return tuple(ordered[i % len(ordered)] for i in range(count))

    # ------------------------------------------------------------ what ServerTarget asks

    def loaded_inputs(self) -> Mapping[str, object]:
        """A later study of the kit at the same scale factor on the same server version reuses the loaded copy."""
        return {"system": self.system, "workload": self.load_with, "version": self.version(),
                "loader": loaded.file_digest(tpch.QUERY_DIR / f"{self.load_with}-load.sql"), "scale": self.scale}

    def data_bytes(self) -> int | None:
        """About 1.65 GB per unit of scale factor (820 MB at 0.5, measured here, 2026-11-25)."""
        return int(1.65e9 * self.scale)

    def load(self, logs: Path) -> None:
        argv = [str(PG_BIN / "psql"), "-X", "-q", *self._connection(), "-v", "ON_ERROR_STOP=1", "-v",
                f"scale={self.scale:g}", "-f", str(tpch.QUERY_DIR / f"{self.load_with}-load.sql")]
        self._client(argv, logs / "load.log", f"loading the data ({self.load_with}, scale factor {self.scale:g})",
                     timeout_s=3600)

    def run_at(self, config: Mapping[str, Value], rung: Rung, *, timeout_s: float | None, log_path: Path,
               seed: int) -> Measurement:
        """The queries of ``rung`` under ``config``, once the default's answers to them are known."""
        known = self._expected.get(seed, {})
        missing = [q for q in dict.fromkeys(self.queries(rung, seed)) if q not in known]
        if missing and not self.is_default(config) and self._home is not None:
            self._reference(missing, seed, log_path.with_name(f"{log_path.stem}-default.log"))
        return super().run_at(config, rung, timeout_s=timeout_s, log_path=log_path, seed=seed)

    def benchmark(self, rung: Rung, timeout_s: float | None, log_path: Path, seed: int,
                  server_log: Path) -> Benchmarked:
        queries = self.queries(rung, seed)
        answers, elapsed_s = self._session(queries, seed, timeout_s, log_path, f"the queries at {rung}")
        repeated = len(queries) > len(tpch.QUERIES)
        names, phases = [], []
        for index, answer in enumerate(answers):
            name = f"q{answer.query:02d}" + (f".{index // len(tpch.QUERIES) + 1}" if repeated else "")
            names.append(name)
            phases.append(Phase(name, 1, answer.seconds, 1 / answer.seconds if answer.seconds else 0.0))
        return QueriesRun(phases=tuple(phases), measured=tuple(names), elapsed_s=elapsed_s, verified=True,
                          answers=answers, seed=seed)

    def check_data(self, config: Mapping[str, Value], ran: Benchmarked, log_path: Path) -> None:
        """Every query's answer equals the default's (numbers within a relative 1e-6).

        Raises:
            RunFailure: (DATA_LOSS) a query answered otherwise than under the default.
        """
        if not isinstance(ran, QueriesRun):
            return
        expected = self._expected.setdefault(ran.seed, {})
        for answer in ran.answers:
            if answer.query not in expected:
                if not self.is_default(config):
                    raise RunFailure(FailureKind.TOOL, f"query {answer.query} has no answer of the default's")
                expected[answer.query] = answer.rows  # the default's own answer is the reference
                continue
            differs = tpch.difference(answer.rows, expected[answer.query])
            if differs:
                raise RunFailure(FailureKind.DATA_LOSS, f"query {answer.query}'s answer differs from the "
                                 f"default's: {differs}", log_path)

    # ------------------------------------------------------------ the default's answers, psql

    def _reference(self, queries: list[int], seed: int, log_path: Path) -> None:
        """Run ``queries`` under the default on a restored copy and keep their answers (not measured)."""
        data = self._restore()
        try:
            self._start(data, self.catalog.defaults(), log_path.with_suffix(".server.log"), refusal=False)
            answers, _ = self._session(tuple(queries), seed, None, log_path,
                                       "the queries under the default")
        finally:
            self._stop_server(clean=False)
        self._expected.setdefault(seed, {}).update({a.query: a.rows for a in answers})

    def _session(self, queries: tuple[int, ...], seed: int, timeout_s: float | None, log_path: Path,
                 what: str) -> tuple[tuple[tpch.Answer, ...], float]:
        """One psql session over ``queries`` with the seed's parameters: the answers and the session's seconds.

        Raises:
            RunFailure: TIMEOUT at ``timeout_s``; CRASH when a query failed (the server's error is the reason);
                TOOL when psql printed fewer answers than queries.
        """
        params = tpch.parameters(seed, self.scale)
        script = tpch.script(queries, params, log_path.with_suffix(".sql"))
        argv = [str(PG_BIN / "psql"), "-X", "-q", "-A", "-t", "-F", tpch.SEPARATOR, "-v", "ON_ERROR_STOP=1",
                *tpch.variables(params, queries), *self._connection(), "-f", str(script)]
        result = run_logged(argv, log_path=log_path, timeout_s=timeout_s)
        text = log_path.read_text(errors="replace")
        if result.timed_out:
            raise RunFailure(FailureKind.TIMEOUT, f"{what} were stopped after {timeout_s:.1f} s", log_path)
        if result.returncode != 0:
            raise RunFailure(FailureKind.CRASH, f"{what} failed: {last_lines(text)}", log_path)
        answers = tpch.answers(text)
        if [a.query for a in answers] != list(queries):
            raise RunFailure(FailureKind.TOOL, f"psql printed {len(answers)} answers for {len(queries)} queries",
                             log_path)
        return answers, result.elapsed_s

