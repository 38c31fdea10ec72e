"""RocksDB: through its own db_bench (the default) or knobtune's kvbench, or replaying a capture of an application's
own work (a trace); its formats and known configs."""

from pathlib import Path

from knobtune.targets._system import Heuristics, System
from knobtune.targets.rocksdb import known
from knobtune.targets.rocksdb.capture import CAPTURING
from knobtune.targets.rocksdb.db_bench import DbBenchTarget
from knobtune.targets.rocksdb.formats import FORMATS
from knobtune.targets.rocksdb.kvbench import RocksdbKvbenchTarget
from knobtune.targets.rocksdb.replay import RocksdbReplayTarget

HERE = Path(__file__).parent
SYSTEM = System("rocksdb", "db_bench",
                {"db_bench": DbBenchTarget, "kvbench": RocksdbKvbenchTarget, "replay": RocksdbReplayTarget}, FORMATS,
                Heuristics((known.GUIDE, *known.PUBLISHED), known.compute),
                rules=HERE / "rules.toml", counters=HERE / "counters.toml", capturing=CAPTURING)
