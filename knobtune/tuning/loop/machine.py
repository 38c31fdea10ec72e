"""The machine a trial runs on: its facts, and whether two machines are of one kind.

A study on several machines compares each trial with the default measured on
its own machine; that only means something when the machines are alike
(same CPU model and count, memory, storage device kind, operating system and
database version). ``differences`` names what differs so a worker can be
refused with the reason.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import optuna

# what makes two machines "of one kind"; the rest (host name, Python, Optuna) is recorded, not compared
KIND = ("cpu_model", "cpus", "memory_gib", "storage", "os", "system_version")


def machine_facts(scratch: Path, name: str | None = None, system_version: str | None = None) -> dict[str, object]:
    """What a reader needs to know about this machine; ``name`` identifies it in a study (default: the host name)."""
    memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"name": name or socket.gethostname(), "host": socket.gethostname(), "cpu_model": _cpu_model(),
            "cpus": os.cpu_count(), "memory_gib": round(memory_bytes / 1024**3), "storage": _storage(scratch),
            "os": f"{platform.system()} {platform.release()}", "system_version": system_version,
            "python": platform.python_version(), "optuna": optuna.__version__}


def differences(mine: dict, theirs: dict) -> list[str]:
    """The facts of kind in which two machines differ, as "what: mine vs theirs" (facts either lacks are skipped)."""
    return [f"{key}: {mine[key]} vs {theirs[key]}" for key in KIND
            if key in mine and key in theirs and mine[key] != theirs[key]]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _storage(folder: Path) -> str:
    """The block device under ``folder``: its model and whether it spins, e.g. "vda (ssd)"; "unknown" if unseen."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        device = os.stat(folder).st_dev
        block = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}").resolve()
    except OSError:
        return "unknown"
    disk = block if (block / "queue").exists() else block.parent  # a partition's disk is its parent
    if not (disk / "queue").exists():
        return "unknown"  # tmpfs, overlay, ...: no block device
    rotational = (disk / "queue" / "rotational").read_text().strip() == "1"
    model_file = disk / "device" / "model"
    model = model_file.read_text().strip() if model_file.exists() else ""
    return f"{disk.name}{' ' + model if model else ''} ({'hdd' if rotational else 'ssd'})"
