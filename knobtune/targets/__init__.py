"""One package per system (``rocksdb/``, ``leveldb/``, ``postgresql/``, ``cassandra/``), each with one entry
(``System``) the registry collects; shared bases for embedded stores and servers, and shared drivers.

Each target runs a workload under a config and returns a Measurement. Nothing here knows an optimizer.
"""

from knobtune.targets._base import FailureKind, KnownConfig, Measurement, Phase, RunFailure, Target
from knobtune.targets._disk import disk_full_of, is_disk_full
from knobtune.targets._formats import Beside, ExportFormat
from knobtune.targets._heuristics import HeuristicConfig, Machine, disk_detection
from knobtune.targets._registry import (
    SYSTEMS, TARGETS, capturing, described_systems, driver_for, export_format, export_formats, heuristic_config,
    make_target, know_system, reclaim_server_homes, resolve_driver, spelling_of, stale_server_homes, target_class,
    use_system_file, user_system_file, workload_section,
)
from knobtune.targets._system import Capturing, Heuristics, System

__all__ = ["Beside", "Capturing", "ExportFormat", "FailureKind", "HeuristicConfig", "Heuristics", "KnownConfig",
           "Machine", "Measurement",
           "Phase", "RunFailure", "SYSTEMS", "System", "TARGETS", "Target", "capturing", "described_systems",
           "disk_detection", "driver_for",
           "disk_full_of", "is_disk_full",
           "export_format", "export_formats", "heuristic_config", "make_target", "reclaim_server_homes",
           "resolve_driver",
           "spelling_of", "stale_server_homes",
           "target_class", "know_system", "use_system_file", "user_system_file", "workload_section"]
