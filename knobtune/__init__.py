"""knobtune: find the configuration that makes a database fast for one workload on one machine."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.4.0"


@functools.cache
def source_commit() -> str | None:
    """The git commit of the checkout this knobtune runs from ("+changes" when it has uncommitted ones), or None
    when it is not run from a checkout: what a study records beside the version, so figures tie to a code state."""
    here = Path(__file__).resolve().parent.parent
    if not (here / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+changes" if dirty else "")
