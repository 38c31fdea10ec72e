"""PostgreSQL 15: a scratch server driven by pgbench, by analytic queries or by sysbench; its formats, PGTune and its data checks."""

from pathlib import Path

from knobtune.targets._system import Heuristics, System
from knobtune.targets.postgresql import pgtune
from knobtune.targets.postgresql.analytic import PostgresQueriesTarget
from knobtune.targets.postgresql.formats import FORMATS
from knobtune.targets.postgresql.sysbench import PostgresSysbenchTarget
from knobtune.targets.postgresql.target import PostgresTarget

HERE = Path(__file__).parent
SYSTEM = System("postgresql", "pgbench", {"pgbench": PostgresTarget, "queries": PostgresQueriesTarget,
                                          "sysbench": PostgresSysbenchTarget}, FORMATS, Heuristics(("pgtune",), pgtune.compute),
                rules=HERE / "rules.toml", counters=HERE / "counters.toml")
