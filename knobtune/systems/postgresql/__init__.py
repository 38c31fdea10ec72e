"""PostgreSQL 15: a scratch server driven by pgbench, by analytic queries, by sysbench or by the replay of a capture of
a user's own server (its log and a dump); its formats, PGTune and its data checks."""

from pathlib import Path

from knobtune.targets import Capturing, Heuristics, System
from knobtune.systems.postgresql import capture, pgtune
from knobtune.systems.postgresql.analytic import PostgresQueriesTarget
from knobtune.systems.postgresql.formats import FORMATS
from knobtune.systems.postgresql.replay import PostgresReplayTarget
from knobtune.systems.postgresql.sysbench import PostgresSysbenchTarget
from knobtune.systems.postgresql.target import PostgresTarget

HERE = Path(__file__).parent
SYSTEM = System("postgresql", "pgbench", {"pgbench": PostgresTarget, "queries": PostgresQueriesTarget,
                                          "sysbench": PostgresSysbenchTarget, "replay": PostgresReplayTarget},
                FORMATS, Heuristics(("pgtune",), pgtune.compute), rules=HERE / "rules.toml",
                counters=HERE / "counters.toml",
                capturing=Capturing("the server's CSV log (log_destination = 'csvlog'; docs/replay.md lists the "
                                    "settings)",
                                    "the dump taken when logging began (pg_dump -Fc)", capture.from_files,
                                    capture.from_workload))
