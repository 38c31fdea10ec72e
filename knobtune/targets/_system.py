"""What a system offers the rest of knobtune: one entry per system, in its own package (``systems/SYSTEM/``).

The registry (``systems/_registry.py``) collects the entries; the CLI, tuning
and the report ask it, never a system's modules, and never switch on a name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from knobtune.targets._base import Target
from knobtune.targets._formats import ExportFormat
from knobtune.targets._heuristics import HeuristicConfig, Machine
from knobtune.workloads import Workload
from knobtune.workloads.capture import CaptureSummary


@dataclass(frozen=True)
class Heuristics:
    """The configs ``knobtune baseline SYSTEM [--profile P] [--name N]`` computes for one machine.

    ``compute(name, machine, profile)`` raises UsageError for a profile the config does not take (or lacks).
    """

    names: tuple[str, ...]  # the first is the heuristic the system's users start from (the command's default)
    compute: Callable[[str, Machine, str | None], HeuristicConfig]


@dataclass(frozen=True)
class Capturing:
    """How ``knobtune capture SYSTEM`` makes a capture folder (workloads/capture.py) of this system's work.

    ``from_files(source, state, out, name)`` imports the user's own record (a trace, a log) and the state it
    started from (a checkpoint, a dump; None: it started empty); ``from_workload(workload, out, name, records)``
    runs a workload knobtune knows under the default config and records it as the system would (for tests, the
    bench, and to try the replay). A system whose own record drops part of the work can take a side file the user
    recorded beside it (``--scans``: RocksDB's scan lengths), through ``from_files_with_scans(source, state, out,
    name, scans)``. All raise WorkloadError (bad or missing input, one line with the fix) before
    anything is written, and write only into ``out``.
    """

    source: str  # what --from takes: "a trace file (DB::StartTrace)"
    state: str  # what --state takes: "the checkpoint folder taken when tracing began"
    from_files: Callable[[Path, Path | None, Path, str], CaptureSummary]
    from_workload: Callable[[Workload, Path, str, int | None], CaptureSummary] | None = None
    scans: str | None = None  # what --scans takes (None: the system takes no side file)
    from_files_with_scans: Callable[[Path, Path | None, Path, str, Path], CaptureSummary] | None = None


@dataclass(frozen=True)
class System:
    """One system: the drivers that run it, its own export formats, and its heuristics (None: it has none).

    A target's known configs (``Target.known_configs``) come from the same package: what a study tries first.
    """

    name: str  # as the catalog and the command line spell it: "rocksdb"
    default_driver: str  # one of ``targets``
    targets: Mapping[str, type[Target]]  # driver -> the target class that runs the system through it
    formats: tuple[ExportFormat, ...] = ()  # the system's own, whatever driver ran the study (drivers add theirs)
    heuristics: Heuristics | None = None
    rules: Path | None = None  # the diagnosis rules (systems/SYSTEM/rules.toml; docs/diagnosis.md)
    counters: Path | None = None  # what each of the system's run counters means (systems/SYSTEM/counters.toml)
    capturing: Capturing | None = None  # how its users' own work becomes a capture (None: it cannot yet)

    def formats_through(self, driver: str) -> tuple[ExportFormat, ...]:
        """The formats a study run through ``driver`` exports to: the system's own first, then the driver's. A
        driver's format of the same name as a system's takes its place (the file written as that driver ran)."""
        own = {f.name: f for f in self.targets[driver].driver_formats}
        return tuple(own.pop(f.name, f) for f in self.formats) + tuple(own.values())
