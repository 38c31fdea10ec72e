"""``knobtune clean``: remove what killed knobtune processes left on this host, after saying what it is."""

from __future__ import annotations

import shutil
from typing import Annotated

import typer

from knobtune import console
from knobtune.units import human_bytes
from knobtune.processes import LeftBehind
from knobtune.storage import open_store
from knobtune.systems import stale_server_homes
from knobtune.cli.options import DirOption, JsonOption


def clean(
    directory: DirOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Remove the scratch data and server data folders that knobtune processes on this host left when they were
    killed (SIGKILL, out of memory, a machine that stopped): first the list, each with its size, then the removal.

    Every knobtune command that runs something does the same before it starts; this does it without running anything.
    Studies, their trials and their raw output are never removed. See docs/tuning.md, "Scratch and clean".
    Example: knobtune clean --dry-run
    """
    store = open_store(directory)
    found = sorted(store.stale_scratch() + stale_server_homes(), key=lambda left: str(left.folder))
    if not dry_run:
        for left in found:
            shutil.rmtree(left.folder, ignore_errors=True)
    if json_output:
        console.print_json({"removed": not dry_run, "folders": [_row(left) for left in found],
                            "bytes": sum(left.size_bytes for left in found)})
        return
    verb = "would remove" if dry_run else "removed"
    for left in found:
        console.out.print(f"{verb} {left.folder} ({human_bytes(left.size_bytes)}, left by process {left.pid}, "
                          "which is gone)", markup=False)
    if not found:
        console.out.print(f"nothing to clean: no scratch in {store.scratch_root} and no server data in the temporary "
                          "folder was left by a knobtune process that is gone", markup=False)
    else:
        console.out.print(f"{verb} {len(found)} folder(s), {human_bytes(sum(left.size_bytes for left in found))}"
                          + ("; run `knobtune clean` to remove them" if dry_run else ""), markup=False)


def _row(left: LeftBehind) -> dict[str, object]:
    return {"folder": str(left.folder), "pid": left.pid, "bytes": left.size_bytes}
