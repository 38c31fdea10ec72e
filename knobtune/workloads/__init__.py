"""Named workloads as data files, each with a fidelity ladder of sizes."""

from knobtune.workloads.spec import Objective, Rung, Workload, available_workloads, load_workload

__all__ = ["Objective", "Rung", "Workload", "available_workloads", "load_workload"]
