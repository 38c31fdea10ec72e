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


def verified_speedup(summary: dict) -> dict | None:
    """The verified speedup of a study's result from ``tune --json`` or ``show --json``: its ratio to the default,
    95% CI and p-value, and ``won`` (beyond the noise: the study's result); when nothing won, the best candidate's
    figures with ``won`` False. None when nothing was verified."""
    candidates = [c for c in (summary.get("verification") or {}).get("candidates", [])
                  if c.get("speedup") and not c.get("reference")]
    if not candidates:
        return None
    result = f"trial {summary['result_trial']}" if summary.get("result_trial") is not None else None
    chosen = next((c for c in candidates if c["label"] == result), None) or max(candidates,
                                                                              key=lambda c: c["speedup"]["ratio"])
    figures = {key: chosen["speedup"].get(key) for key in ("ratio", "ci_low", "ci_high", "p_value")}
    return {"label": chosen["label"], **figures, "won": chosen["label"] == result}
