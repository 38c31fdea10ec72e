"""What a target is and what a system offers: the contract every system's package (``knobtune/systems/NAME/``)
fulfils, and every layer above asks.

``_base`` (a target's life, its Measurement or RunFailure), ``_system`` (the one entry a system gives the
registry), ``_formats`` (an export format), ``_heuristics`` (known configs for one machine), ``_counters`` (what a
system's run counters mean), ``_disk`` (a full disk is the machine's failure). Each target runs a workload under a
config and returns a Measurement. Nothing here runs a process or knows an optimizer; the registry of every system
is ``knobtune.systems``.
"""

from knobtune.targets._base import FailureKind, KnownConfig, Measurement, Phase, RunFailure, Target
from knobtune.targets._disk import disk_full_of, is_disk_full
from knobtune.targets._formats import Beside, ExportFormat
from knobtune.targets._heuristics import HeuristicConfig, Machine, disk_detection
from knobtune.targets._system import Capturing, Heuristics, System

__all__ = ["Beside", "Capturing", "ExportFormat", "FailureKind", "HeuristicConfig", "Heuristics", "KnownConfig",
           "Machine", "Measurement", "Phase", "RunFailure", "System", "Target", "disk_detection", "disk_full_of",
           "is_disk_full"]
