"""LevelDB: through knobtune's kvbench, or kvbench-tunable (LevelDB patched by knobtune: dbformat.h's constants
as knobs). It has no export format of its own (kvbench's option map serves) and no known configs."""

from pathlib import Path

from knobtune.drivers.kvbench import KvbenchTarget, KvbenchTunableTarget
from knobtune.targets import System

HERE = Path(__file__).parent
SYSTEM = System("leveldb", "kvbench", {"kvbench": KvbenchTarget, "kvbench-tunable": KvbenchTunableTarget},
                rules=HERE / "rules.toml", counters=HERE / "counters.toml")
