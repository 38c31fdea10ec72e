"""One module per system and driver; each runs a workload under a config and returns a Measurement.

Nothing here knows an optimizer.
"""

from __future__ import annotations

from pathlib import Path

from knobtune.errors import UsageError
from knobtune.knobs import Catalog
from knobtune.targets._base import FailureKind, Measurement, Phase, RunFailure, Target
from knobtune.targets.db_bench import DbBenchTarget
from knobtune.workloads import Workload

TARGETS: dict[tuple[str, str], type[Target]] = {
    ("rocksdb", "db_bench"): DbBenchTarget,
}
DEFAULT_DRIVER = {"rocksdb": "db_bench"}


def drivers_for(system: str) -> list[str]:
    return [driver for (sys_name, driver) in TARGETS if sys_name == system]


def make_target(catalog: Catalog, workload: Workload, scratch_dir: Path, driver: str | None = None,
                **options: object) -> Target:
    """The target that runs ``catalog.system`` through ``driver`` (its default driver if None).

    Raises:
        UsageError: no such system or driver here.
    """
    driver = driver or DEFAULT_DRIVER.get(catalog.system, "")
    if (catalog.system, driver) not in TARGETS:
        known = ", ".join(f"{s} --driver {d}" for s, d in TARGETS)
        raise UsageError(f"no target runs {catalog.system} through driver '{driver}'. Fix: use one of {known}")
    return TARGETS[(catalog.system, driver)](catalog, workload, scratch_dir, **options)


__all__ = ["DbBenchTarget", "FailureKind", "Measurement", "Phase", "RunFailure", "Target",
           "TARGETS", "drivers_for", "make_target"]
