"""The study's loop: the default first, then sampled configs up the fidelity ladder, within the budget, on workers.

``study`` is the loop itself, in the order a study runs; what it asks of each part is in a module of its own:
``workers``, ``resume``, ``budget`` (with ``reserve`` and ``costs``), ``trial`` (with ``runs``). Others import the
loop through this face.
"""

from knobtune.tuning.loop.machine import machine_facts
from knobtune.tuning.loop.owner import lock_path, refuse_if_running
from knobtune.tuning.loop.progress import Progress
from knobtune.tuning.loop.study import Tuner

__all__ = ["Progress", "Tuner", "lock_path", "machine_facts", "refuse_if_running"]
