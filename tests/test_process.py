"""A benchmark process's peak memory is its own program's, never the forked copy of knobtune's."""

from __future__ import annotations

import sys
from pathlib import Path

from knobtune.server.process import run_logged

HOLD = "b = bytearray({mib} * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\nimport time; time.sleep(0.3)"


def test_the_peak_is_the_programs_own_not_knobtunes_at_the_fork(tmp_path: Path) -> None:
    ballast = bytearray(300 * 2**20)  # knobtune itself holding 300 MiB when it starts the benchmark
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    small = run_logged(["sleep", "0.3"], log_path=tmp_path / "sleep.log", timeout_s=10)
    assert small.returncode == 0 and 0 < small.peak_rss_bytes < 50 * 2**20
    large = run_logged([sys.executable, "-c", HOLD.format(mib=120)], log_path=tmp_path / "hold.log", timeout_s=30)
    assert large.returncode == 0 and 120 * 2**20 < large.peak_rss_bytes < 250 * 2**20
    assert len(ballast) == 300 * 2**20
