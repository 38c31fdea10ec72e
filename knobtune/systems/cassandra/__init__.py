"""Apache Cassandra 5.0: a scratch node driven by YCSB; its formats (cassandra.yaml, JVM options)."""

from pathlib import Path

from knobtune.targets import System
from knobtune.systems.cassandra.formats import FORMATS
from knobtune.systems.cassandra.target import CassandraTarget

HERE = Path(__file__).parent
SYSTEM = System("cassandra", "ycsb", {"ycsb": CassandraTarget}, FORMATS,
                rules=HERE / "rules.toml", counters=HERE / "counters.toml")
