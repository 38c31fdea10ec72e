"""What every PostgreSQL knobtune starts shares: Debian's PostgreSQL 15, the ``postgres`` user, a Unix socket only.

Both the server under test (``postgres.py``) and the scratch storage server
(``storage_server.py``) start ``postgres`` in the foreground as the
unprivileged ``postgres`` user (it refuses to run as root), with its data and
its socket in a home of its own under /tmp (``listen_addresses=''``: no TCP).
"""

from __future__ import annotations

import pwd
import re
import subprocess
from pathlib import Path

from knobtune.errors import ToolMissingError
from knobtune.installing import setup_fix
from knobtune.server.process import last_lines

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "postgres"
DB_USER, DB_NAME = "bench", "postgres"
INSTALL_HINT = setup_fix("postgresql", "it installs Debian's postgresql-15 without a cluster of its own, and sysbench")
HOME_PREFIX = "knobtune-pg-"  # a home in /tmp: the postgres user reaches it wherever the studies folder is
READY_LIMIT_S = 120.0  # start-up (or crash recovery) may take this long before the run fails
POLL_S = 0.02
_FATAL = re.compile(r"(FATAL|PANIC|ERROR):\s+(.*)")


def postgres_user() -> pwd.struct_passwd:
    """Debian's ``postgres`` system user, which runs the server.

    Raises:
        ToolMissingError: there is no such user (PostgreSQL is not installed).
    """
    try:
        return pwd.getpwnam(PG_USER)
    except KeyError:
        raise ToolMissingError(f"the '{PG_USER}' system user does not exist. {INSTALL_HINT}") from None


def initdb_argv(data: Path) -> list[str]:
    return [str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", DB_USER, "--no-sync"]


def postgres_argv(data: Path, home: Path, settings: dict[str, str]) -> list[str]:
    """``postgres`` in the foreground over ``data``, its socket in ``home`` only, each setting one ``-c``."""
    return [str(PG_BIN / "postgres"), "-D", str(data), "-k", str(home), "-c", "listen_addresses=",
            *[arg for name, text in settings.items() for arg in ("-c", f"{name}={text}")]]


def accepts_connections(home: Path) -> bool:
    """Whether the server whose socket is in ``home`` accepts connections (``pg_isready``)."""
    ready = [str(PG_BIN / "pg_isready"), "-q", "-h", str(home), "-U", DB_USER]
    return subprocess.run(ready, capture_output=True, check=False).returncode == 0


def connection(home: Path) -> list[str]:
    """A client's arguments to reach the server whose socket is in ``home``."""
    return ["-h", str(home), "-U", DB_USER, "-d", DB_NAME]


def server_message(log: Path) -> str:
    """PostgreSQL's last FATAL, PANIC or ERROR line in ``log``, or its last lines."""
    text = log.read_text(errors="replace") if log.exists() else ""
    found = [m.group(0) for m in map(_FATAL.search, text.splitlines()) if m]
    return (found[-1] if found else last_lines(text))[-400:]
