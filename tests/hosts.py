"""Hosts made on this machine for the multi-host tests: network namespaces on a private subnet.

Each host is a network namespace with one veth link to a "switch" namespace
(a bridge), on 10.213.0.0/24, a subnet that exists only inside these
namespaces: the machine's own namespace gets no address and no route. Every
process started on a host also gets a UTS namespace with the host's name, so
knobtune sees a machine of that name (another host: its pids mean nothing
here). One host runs a PostgreSQL storage server over TCP with TLS and a
password, as docs/workers.md sets one up; the test reads the study through
the server's Unix socket, which needs no network.

Faults: ``cut`` takes a host's link down at the switch (both ends lose
carrier), ``partition`` adds an nftables rule inside a host's namespace that
drops every packet to and from another host (connections hang, nothing is
reset). ``tc netem`` (latency, loss) is not available on this kernel
("Specified qdisc kind is unknown"), so neither is simulated.

Everything is removed on exit, even when a test fails: the processes started
(by their process group), the namespaces (and with them every link and rule),
the server's folder. Namespaces a killed earlier run left behind (their
owner's pid gone) are removed on entry.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from knobtune.processes import pid_alive
from knobtune.systems.postgresql.server import PG_BIN, PG_USER, accepts_connections, initdb_argv, postgres_argv

SUBNET = "10.213.0"
PREFIX = "ktnet"  # namespaces are named PREFIX<pid>-<n>-<host>
STORAGE_PORT = 5432
PASSWORD = "hosts-test-password"
_made = itertools.count()


def missing() -> str | None:
    """Why the multi-host tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "the multi-host tests make network namespaces: they need root"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables"), ("unshare", "util-linux"),
                          ("runuser", "util-linux"), ("openssl", "openssl")):
        if shutil.which(tool) is None:
            return f"the multi-host tests need `{tool}` (apt-get install {package}; scripts/setup installs it)"
    if not (PG_BIN / "postgres").exists():
        return "the multi-host tests need PostgreSQL 15 (apt-get install postgresql-15; scripts/setup installs it)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` does not work here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _in(namespace: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", namespace, *argv], check=check, capture_output=True, text=True)


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str
    port: str  # its link's end in the switch namespace
    home: Path  # its own folder (a studies folder per machine)


class Hosts:
    """Hosts named ``names`` on one switch; ``with Hosts(root, ["storage", "h1"]) as hosts: hosts["h1"] ...``."""

    def __init__(self, root: Path, names: list[str]) -> None:
        self.root, self.names = root, names
        self.tag = f"{PREFIX}{os.getpid()}-{next(_made)}"
        self.switch = f"{self.tag}-sw"
        self.hosts: dict[str, Host] = {}
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen[bytes]] = []

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> Hosts:
        remove_left_behind()
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        self._namespace(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for index, name in enumerate(self.names, start=1):
            namespace, port = self._namespace(f"{self.tag}-{name}"), f"p{index}"
            _ip("link", "add", "eth0", "netns", namespace, "type", "veth", "peer", "name", port, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            address = f"{SUBNET}.{index}"
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            home = self.root / name
            home.mkdir(parents=True, exist_ok=True)
            self.hosts[name] = Host(name, namespace, address, port, home)

    def _namespace(self, namespace: str) -> str:
        _ip("netns", "add", namespace)
        self.namespaces.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")
        return namespace

    def start(self, host: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
              user: str | None = None) -> subprocess.Popen[bytes]:
        """``argv`` on ``host`` (its network, its host name), output into ``log``; killed on exit if still running."""
        named = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', host]
        as_user = ["runuser", "-u", user, "--"] if user else []
        process = subprocess.Popen(["ip", "netns", "exec", self.hosts[host].namespace, *named, *as_user, *argv],
                                   stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **(env or {})})
        self.processes.append(process)
        return process

    # ------------------------------------------------------------ faults

    def cut(self, host: str) -> None:
        """Take ``host``'s link down at the switch: its packets go nowhere until ``mend``."""
        _ip("-n", self.switch, "link", "set", self.hosts[host].port, "down")

    def mend(self, host: str) -> None:
        _ip("-n", self.switch, "link", "set", self.hosts[host].port, "up")

    def partition(self, host: str, other: str) -> None:
        """Drop every packet between ``host`` and ``other``, silently, by an nftables rule inside ``host``."""
        peer = self.hosts[other].address
        ruleset = ("table inet ktpartition {\n"
                   f" chain out {{ type filter hook output priority 0; ip daddr {peer} drop; }}\n"
                   f" chain in {{ type filter hook input priority 0; ip saddr {peer} drop; }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", self.hosts[host].namespace, "nft", "-f", "-"], input=ruleset, text=True,
                       check=True, capture_output=True)

    def heal(self, host: str) -> None:
        _in(self.hosts[host].namespace, "nft", "delete", "table", "inet", "ktpartition")

    # ------------------------------------------------------------ teardown

    def close(self) -> None:
        for process in self.processes:
            _kill_group(process.pid)
            process.wait()
        self.processes = []
        for namespace in reversed(self.namespaces):
            _remove_namespace(namespace)
        self.namespaces = []


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _remove_namespace(namespace: str) -> None:
    """Kill what still runs in ``namespace`` (a process of ours: nothing else is started there), then remove it."""
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    for pid in listed:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def remove_left_behind() -> None:
    """Remove the namespaces of earlier runs whose process is gone (a run killed before it could tidy up)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    for line in listed:
        found = re.match(rf"({PREFIX}(\d+)-\S+)", line)
        if found and not pid_alive(int(found.group(2))):
            _remove_namespace(found.group(1))


class NetworkStorage:
    """A PostgreSQL 15 storage server on ``host``, as docs/workers.md sets one up: TCP on the host's address,
    TLS (a self-signed certificate), a role with a password allowed from the subnet only (pg_hba), TCP keepalives
    and an idle-in-transaction limit so the server drops a worker whose link died. ``url`` is what workers use
    (``sslmode=require``); ``local_url`` is the Unix socket the test reads through."""

    def __init__(self, hosts: Hosts, host: str = "storage") -> None:
        self.hosts, self.host = hosts, hosts[host]
        self.home = Path(tempfile.mkdtemp(prefix=f"knobtune-hosts-{os.getpid()}-"))
        self.url = (f"postgresql+psycopg://knobtune:{PASSWORD}@{self.host.address}:{STORAGE_PORT}/studies"
                    "?sslmode=require")
        self.local_url = f"postgresql+psycopg://knobtune@/studies?host={self.home}"  # the role that owns the tables
        self.server: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> NetworkStorage:
        try:
            self._init()
            self.start_server()
            self._make_role()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _init(self) -> None:
        data = self.home / "data"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "2", "-subj", "/CN=storage", "-keyout", str(self.home / "server.key"),
                        "-out", str(self.home / "server.crt")], check=True, capture_output=True)
        os.chmod(self.home / "server.key", 0o600)
        subprocess.run(["chown", "-R", f"{PG_USER}:{PG_USER}", str(self.home)], check=True)
        subprocess.run(["runuser", "-u", PG_USER, "--", *initdb_argv(data)], check=True, capture_output=True)
        (data / "pg_hba.conf").write_text(
            "local all all trust\n"  # the test's own reads, over the Unix socket
            f"hostssl studies knobtune {SUBNET}.0/24 scram-sha-256\n")

    def _settings(self) -> dict[str, str]:
        return {"listen_addresses": self.host.address, "port": str(STORAGE_PORT), "max_connections": "100",
                "ssl": "on", "ssl_cert_file": str(self.home / "server.crt"),
                "ssl_key_file": str(self.home / "server.key"), "password_encryption": "scram-sha-256",
                # a worker whose link died must not hold its transaction's row locks for the kernel's 2 hours
                "tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3",
                "tcp_user_timeout": "10000", "idle_in_transaction_session_timeout": "30s"}

    def start_server(self) -> None:
        log = self.home / "server.log"
        self.server = self.hosts.start(self.host.name, postgres_argv(self.home / "data", self.home, self._settings()),
                                       log, user=PG_USER)
        _await(lambda: accepts_connections(self.home), "the storage server to accept connections", log)

    def stop_server(self) -> None:
        """The owner's fast shutdown (every connection is cut), keeping the data."""
        if self.server is not None:
            os.killpg(self.server.pid, signal.SIGINT)
            self.server.wait(timeout=30)
            self.server = None

    def _make_role(self) -> None:
        psql = [str(PG_BIN / "psql"), "-h", str(self.home), "-U", "bench", "-d", "postgres", "-v", "ON_ERROR_STOP=1"]
        for statement in (f"CREATE ROLE knobtune LOGIN PASSWORD '{PASSWORD}'",
                          "CREATE DATABASE studies OWNER knobtune"):
            subprocess.run([*psql, "-c", statement], check=True, capture_output=True)

    def close(self) -> None:
        if self.server is not None:
            _kill_group(self.server.pid)
            self.server.wait()
            self.server = None
        shutil.rmtree(self.home, ignore_errors=True)


def _await(condition, what: str, log: Path, limit_s: float = 60) -> None:  # noqa: ANN001
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}: {log.read_text()[-2000:] if log.exists() else ''}")
        time.sleep(0.1)


def knobtune_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "knobtune.cli", *args]
