"""``knobtune capture``: a user's own work (a trace, a log) and the state it began from, as a capture folder a study
replays (docs/replay.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from knobtune import console
from knobtune.errors import UsageError
from knobtune.systems import capturing
from knobtune.workloads import load_workload
from knobtune.cli.options import JsonOption, SystemArgument
from knobtune.outputs import capture_around, check_writable_parent


def capture(
    system: SystemArgument,
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="The capture folder to create (owner-only; must be new or empty).")],
    source: Annotated[Optional[Path], typer.Option("--from", help="The system's own record of the work: a RocksDB "
                                                                  "trace file, a PostgreSQL log.")] = None,
    state: Annotated[Optional[Path], typer.Option(
        "--state", help="The state the work began from: a RocksDB checkpoint folder, a PostgreSQL dump "
                        "(omit: it began empty).")] = None,
    scans: Annotated[Optional[Path], typer.Option(
        "--scans", help="RocksDB: the scan lengths your application recorded beside the trace "
                        "(native/scanlog/scan_log.h; omit: each scan replays as its seek alone).")] = None,
    workload: Annotated[Optional[str], typer.Option(help="Instead of --from: run this workload under the default "
                                                         "config and capture it, as the system records it.")] = None,
    records: Annotated[Optional[int], typer.Option(help="With --workload: its full size.")] = None,
    name: Annotated[Optional[str],
                    typer.Option(help="The capture's workload name (default: the folder's name).")] = None,
    json_output: JsonOption = False,
) -> None:
    """Make a capture folder from SYSTEM's own record of real work; tune on it with `tune SYSTEM --workload FOLDER`.

    Example: knobtune capture rocksdb --from app.trace --scans app.scans --state app-checkpoint -o myapp.capture
    """
    check_capture_output(output)  # before anything runs: a workload run or a load can take long
    how = capturing(system)
    if (source is None) == (workload is None):
        raise UsageError(f"give one of --from ({how.source}) or --workload. Fix: e.g. knobtune capture {system} "
                         f"--from FILE --state PATH -o {output}")
    if workload is not None and how.from_workload is None:
        raise UsageError(f"knobtune cannot run a workload to capture {system}. Fix: give --from ({how.source})")
    if scans is not None and (how.scans is None or how.from_files_with_scans is None):
        raise UsageError(f"--scans is a RocksDB trace's side file; {system} takes none. Fix: drop --scans")
    if scans is not None and workload is not None:
        raise UsageError("--scans goes with --from (a --workload run records its own). Fix: drop --scans")
    if workload is None and records is not None:
        raise UsageError("--records sizes a --workload run. Fix: drop --records, or use --workload")
    if records is not None and records <= 0:
        raise UsageError(f"--records {records} is not a positive number. Fix: e.g. --records 10000")
    for given, what, means in ((source, "--from", how.source), (state, "--state", how.state),
                               (scans, "--scans", how.scans)):
        if given is not None and not given.exists():
            raise UsageError(f"{what} {given} does not exist. Fix: give the path of {means}")
    label = name or output.name.removesuffix(".capture") or "capture"
    if workload is not None and how.from_workload is not None:
        summary = how.from_workload(load_workload(workload), output, label, records)
    elif scans is not None and how.from_files_with_scans is not None:
        summary = how.from_files_with_scans(source, state, output, label, scans)  # type: ignore[arg-type]
    else:
        summary = how.from_files(source, state, output, label)  # type: ignore[arg-type]
    if json_output:
        console.print_json({"capture": str(output), **summary.record()})
        return
    for line in summary.lines():
        console.out.print(line, markup=False)
    console.err.print(f"wrote the capture {output} (owner-only); tune on it: knobtune tune {system} --workload "
                      f"{output} "
                      "--time 20m", markup=False)


def check_capture_output(output: Path) -> None:
    """Refuse a capture's ``-o`` that would not be a new folder of its own: an existing file or a folder that is not
    empty, a folder inside another capture, a path under no writable folder.

    Raises:
        UsageError: one line naming the path and the fix.
    """
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise UsageError(f"-o {output} exists and is not an empty folder; a capture never writes over one. Fix: name "
                         "a new folder with -o")
    if (capture := capture_around(output.parent)) is not None:
        raise UsageError(f"-o {output} is inside the capture {capture}. Fix: name a folder outside it, e.g. -o "
                         f"{capture.parent / output.name}")
    check_writable_parent(output / "capture.toml", "-o")
