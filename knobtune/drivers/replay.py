"""What the replay drivers of every system share (docs/replay.md): the default's replay as the data check's
reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from knobtune.targets import FailureKind, RunFailure
from knobtune.workloads import Rung


def run_reference(rung: Rung, log_path: Path, run: Callable[[Path], object]) -> None:
    """Run the default config's replay at ``rung`` (unmeasured; ``run`` takes its log's path, beside
    ``log_path``): the state every other config's replay at that rung must leave too.

    Raises:
        RunFailure: TOOL when the default's own replay failed (no config is to blame).
    """
    try:
        run(log_path.with_name(f"{log_path.stem}.default-reference{log_path.suffix}"))
    except RunFailure as failure:
        raise RunFailure(FailureKind.TOOL, f"the default config's replay at {rung} (the reference for the data "
                         f"check) failed: {failure.reason}", failure.log_path) from None
