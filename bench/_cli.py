"""The benchmarks run knobtune as users do: its installed command, one process per step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

KNOBTUNE = str(Path(sys.executable).with_name("knobtune"))  # the entry point installed beside this Python


def knobtune(*args: str, home: Path | None = None) -> str:
    """Run one knobtune command (in the studies folder ``home``); its standard output (progress goes to the terminal).

    Raises:
        SystemExit: the command failed; its status and the end of its output say why.
    """
    argv = [KNOBTUNE, *args, *(["--dir", str(home)] if home else [])]
    print("$ knobtune", " ".join(args), flush=True)
    result = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"knobtune {args[0]} failed (status {result.returncode}): {result.stdout[-2000:]}")
    return result.stdout


def emit(result: dict, out: Path | None) -> None:
    """Print a benchmark's result as JSON, and write it to ``out`` when given."""
    import json

    text = json.dumps(result, indent=1, default=str)
    if out:
        out.write_text(text + "\n")
    print(text)
