"""Loaded copies kept between studies: a server's data, loaded once, reused by later studies and resumes.

A server's pristine folder (its data after the workload's load, stopped
cleanly) is kept under ``$KNOBTUNE_CACHE/loaded/KEY`` (default
``~/.cache/knobtune``), where KEY names everything the load depends on (the
system and its version, the loader and its inputs, the loader file's
contents). A later study of the same workload at the same scale copies it in
place of loading again. A copy is written to a temporary folder and renamed
into place, so a copy that is there is whole; a concurrent writer of the same
key keeps the first one. Removing the folder is always safe: the next study
loads again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knobtune.errors import KnobtuneError
from knobtune.units import human_bytes

STATE_FILE = "knobtune-loaded.json"  # beside the copy: what the load left besides the data (e.g. a ledger's rows)


def cache_root() -> Path:
    return Path(os.environ.get("KNOBTUNE_CACHE", Path.home() / ".cache" / "knobtune")) / "loaded"


def loaded_key(parts: Mapping[str, Any]) -> str:
    """A folder name for a load that depends on ``parts`` (readable head, hash of the whole)."""
    text = json.dumps(dict(parts), sort_keys=True, default=str)
    head = "-".join(str(parts[k]) for k in ("system", "workload") if k in parts)
    return f"{head}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "none"


def find(key: str) -> Path | None:
    """The kept copy for ``key``, or None."""
    folder = cache_root() / key
    return folder if (folder / STATE_FILE).is_file() else None


def state_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / STATE_FILE).read_text())


def copy_tree(source: Path, destination: Path) -> None:
    """``cp -a`` (owners and modes kept: the server's user owns its data).

    Raises:
        KnobtuneError: the copy failed (a full disk, say).
    """
    result = subprocess.run(["cp", "-a", str(source), str(destination)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise KnobtuneError(f"copying {source} to {destination} failed: {result.stderr.strip()[-300:]}. "
                            "Fix: free disk space there")


def keep(key: str, pristine: Path, state: Mapping[str, Any]) -> Path | None:
    """Keep a copy of ``pristine`` for later studies; None (and nothing kept) when its disk has no room for it."""
    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        if shutil.disk_usage(root).free < 2 * folder_bytes(pristine):
            return None
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        copy_tree(pristine, staging / "data")
        (staging / "data" / STATE_FILE).write_text(json.dumps(dict(state)))
        os.rename(staging / "data", root / key)
        shutil.rmtree(staging, ignore_errors=True)
    except (OSError, KnobtuneError):
        return None  # another process kept it first, or the disk is full: this study has its own copy anyway
    return root / key


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def check_room(folder: Path, needed_bytes: int, what: str, fix: str) -> None:
    """Refuse in one line when ``folder``'s disk has less than ``needed_bytes`` free.

    Raises:
        KnobtuneError: not enough room; the message names the sizes and the fix.
    """
    free = shutil.disk_usage(folder).free
    if free < needed_bytes:
        raise KnobtuneError(f"not enough free space in {folder} for {what}: it needs ~{human_bytes(needed_bytes)}, "
                            f"{human_bytes(free)} is free. Fix: {fix}")
