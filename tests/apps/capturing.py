"""An application's work captured as docs/replay.md tells a user to: a server logging every statement, a dump
taken when logging began, the application run against it, then ``knobtune capture postgresql --from LOG
--state DUMP``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from knobtune.systems.postgresql import capture
from knobtune.systems.postgresql.server import DB_NAME, DB_USER, PG_BIN
from knobtune.systems.postgresql.storage_server import StorageServer
from knobtune.workloads.capture import CaptureSummary


def capture_application(create: Callable[[str], None], run: Callable[[str], None], folder: Path, name: str,
                        nondeterministic: tuple[str, ...] = ()) -> CaptureSummary:
    """Create the application's data with ``create(dsn)``, dump it with logging on, run ``run(dsn)``, and capture
    what the server logged into ``folder / f"{name}.capture"``."""
    folder.mkdir(parents=True, exist_ok=True)
    server = StorageServer(capture.LOGGING)
    with server:
        dsn = f"host={server.home} user={DB_USER} dbname={DB_NAME}"
        create(dsn)
        dump = folder / f"{name}.dump"
        subprocess.run([str(PG_BIN / "pg_dump"), "-h", str(server.home), "-U", DB_USER, "-Fc", "-f", str(dump),
                        DB_NAME], check=True, capture_output=True)
        run(dsn)
        server.stop_server()
        log = folder / f"{name}.csv"
        with log.open("wb") as joined:
            for part in sorted((server.home / "data" / "log").glob("*.csv")):
                joined.write(part.read_bytes())
    return capture.from_files(log, dump, folder / f"{name}.capture", name, nondeterministic)
