"""Pure analysis over trial records and measurements: statistics, noise, importance.

Imports neither a target, a storage nor the tuning layer, so it is tested without running anything.
"""

from knobtune.analysis.stats import Speedup, noise, speedup, spread

__all__ = ["Speedup", "noise", "speedup", "spread"]
