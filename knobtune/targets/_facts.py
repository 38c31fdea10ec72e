"""What a target knows of its workload, apart from how it runs it: one frozen record a target hands on.

Diagnosis rules read these facts as the workload's shape (``WorkloadFacts.shape``: ``analysis.diagnosis.SHAPE``
says what each name means), a study stores them to find earlier studies of a workload alike, and a production
ratio scales the memory a config may plan by the data set's size. A target says what its driver knows (the phases
a kvbench workload runs, a capture's mix of statements, a pgbench kit's clients, a server's loaded data); what it
does not know is the workload file's own (``WorkloadFacts.of``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from knobtune.workloads import Workload


@dataclass(frozen=True, kw_only=True)
class WorkloadFacts:
    """The workload as a target runs it: its data set, its clients and what its operations do."""

    data_bytes: int  # the data set's size: records x (key + value), or a server's loaded data where it can say
    key_size: int  # a key's size in bytes (0: not a key-value workload)
    value_size: int  # a value's size in bytes (0: not a key-value workload)
    clients: int = 1  # the clients (threads, connections) the benchmark runs at once
    reads: bool = True  # the workload reads at all (both, unless the target knows better)
    writes: bool = True  # the workload writes at all
    scans: bool = False  # it reads ranges of keys (a scan, a sequential read, a seek and next)
    point_reads_only: bool = False  # it reads single keys and never scans a range (a hash memtable can serve it)

    @classmethod
    def of(cls, workload: Workload, *, data_bytes: int | None = None, clients: int = 1, reads: bool = True,
           writes: bool = True, scans: bool = False, point_reads_only: bool = False) -> WorkloadFacts:
        """The facts of ``workload`` with what the target knows; ``data_bytes=None``: records x (key + value)."""
        if data_bytes is None:
            data_bytes = workload.records * (workload.key_size + workload.value_size)
        return cls(data_bytes=data_bytes, key_size=workload.key_size, value_size=workload.value_size,
                   clients=clients, reads=reads, writes=writes, scans=scans, point_reads_only=point_reads_only)

    def shape(self) -> dict[str, float | bool]:
        """What diagnosis rules may ask about the workload and the machine: these facts, with this machine's
        memory and cores."""
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return {"point_reads_only": self.point_reads_only, "scans": self.scans, "reads": self.reads,
                "writes": self.writes, "data_bytes": self.data_bytes, "memory_bytes": memory,
                "cores": os.cpu_count() or 1, "clients": self.clients, "key_size": self.key_size,
                "value_size": self.value_size}
