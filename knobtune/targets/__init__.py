"""What a target is and what a system offers: the contract every system's package (``knobtune/systems/NAME/``)
fulfils, and every layer above asks.

``_base`` (a target's life, its Measurement or RunFailure), ``_facts`` (what a target knows of its workload),
``_system`` (the one entry a system gives the registry), ``_formats`` (an export format), ``_heuristics`` (known
configs for one machine), ``_counters`` (what a system's run counters mean), ``_disk`` (a full disk is the machine's
failure). Each target runs a workload under a config and returns a Measurement. Nothing here runs a process or
knows an optimizer; the registry of every system is ``knobtune.systems``. Other packages import the names below
from here, never from a ``_`` module.
"""

from knobtune.targets._base import (
    FailureKind, KnownConfig, Measurement, Phase, RunFailure, Settle, Target, await_server)
from knobtune.targets._counters import UNITS, CounterDoc, CountersFile, described_counters, numbers, with_ratios
from knobtune.targets._disk import NO_SPACE, disk_full, disk_full_of, is_disk_full, nearly_full, no_space_line
from knobtune.targets._facts import WorkloadFacts
from knobtune.targets._formats import Beside, ExportFormat, settings_with_units
from knobtune.targets._heuristics import (
    DISKS, KIB, HeuristicConfig, KnownConfigFile, Machine, clamp_into_range, disk_detection, fixed_config,
    rotational_disks)
from knobtune.targets._system import Capturing, Heuristics, System

__all__ = ["DISKS", "KIB", "NO_SPACE", "UNITS", "Beside", "Capturing", "CounterDoc", "CountersFile", "ExportFormat",
           "FailureKind", "HeuristicConfig", "Heuristics", "KnownConfig", "KnownConfigFile", "Machine", "Measurement",
           "Phase", "RunFailure", "Settle", "System", "Target", "WorkloadFacts", "await_server", "clamp_into_range",
           "described_counters", "disk_detection", "disk_full", "disk_full_of", "fixed_config", "is_disk_full",
           "nearly_full", "no_space_line", "numbers", "rotational_disks", "settings_with_units", "with_ratios"]
