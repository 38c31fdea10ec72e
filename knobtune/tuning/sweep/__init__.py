"""One knob (or two) swept over a grid, every point measured with interleaved repeats."""

from knobtune.tuning.sweep.around import study_base
from knobtune.tuning.sweep.plan import MAX_POINTS, grid_values, make_axis, plan_sweep
from knobtune.tuning.sweep.run import run_sweep

__all__ = ["MAX_POINTS", "grid_values", "make_axis", "plan_sweep", "run_sweep", "study_base"]
