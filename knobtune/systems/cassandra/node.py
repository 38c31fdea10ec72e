"""A Cassandra 5.0 node as knobtune runs it: its jars and Java 17, its command line and cassandra.yaml, whether it
answers, and why it stopped.

No Cassandra package is reachable here: ``scripts/cassandra-fetch`` puts the
server's jars (``cassandra-all`` from Maven Central) and our YCSB client
(native/cassandra/) in a cache folder once. The node runs ``java ...
CassandraDaemon`` on Java 17 in the foreground, listening on 127.0.0.1 only
(free ports), every file of it in its folder (native/cassandra/README.md has
the command line and what was measured).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import struct
from collections.abc import Mapping
from pathlib import Path

from knobtune.errors import ToolMissingError
from knobtune.installing import setup_fix
from knobtune.server.process import last_lines

CONF_DIR = Path(__file__).resolve().parents[3] / "native" / "cassandra" / "conf"  # yaml template, logback.xml
FETCH_HINT = setup_fix("cassandra", "it installs OpenJDK 17 and Maven, then runs scripts/cassandra-fetch")
# Cassandra 5.0's own JVM options (conf/jvm-server.options, jvm17-server.options) that are not knobs; the
# heap and the garbage collector come from the catalog's JVM knobs. Read from native/cassandra/README.md.
JVM_BASE = [
    "-Xss256k", "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1", "-ea", "-XX:+UseThreadPriorities",
    "-XX:+AlwaysPreTouch", "-XX:+UseTLAB", "-XX:+ResizeTLAB", "-XX:+UseNUMA", "-XX:+PerfDisableSharedMem",
    "-XX:+ExitOnOutOfMemoryError", "-Djava.net.preferIPv4Stack=true", "-Djdk.attach.allowAttachSelf=true",
    *[arg for module in ("java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
                         "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server", "java.sql/java.sql",
                         "java.base/java.lang.ref", "jdk.unsupported/sun.misc",
                         "jdk.compiler/com.sun.tools.javac.file", "jdk.attach/sun.tools.attach")
      for arg in ("--add-exports", f"{module}=ALL-UNNAMED")],
    *[arg for module in ("java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
                         "java.base/jdk.internal.reflect", "java.base/jdk.internal.math",
                         "java.base/jdk.internal.module", "java.base/jdk.internal.util.jar",
                         "jdk.management/com.sun.management.internal", "java.base/sun.nio.ch", "java.base/java.io",
                         "java.base/java.lang.reflect", "jdk.compiler/com.sun.tools.javac", "java.base/java.lang",
                         "java.base/java.util")
      for arg in ("--add-opens", f"{module}=ALL-UNNAMED")],
    "-Dio.netty.tryReflectionSetAccessible=true", "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11", "-Dcassandra-foreground=yes",
]
G1_ONLY = ["-XX:G1HeapRegionSize=16m", "-XX:G1RSetUpdatingPauseTimePercent=5"]
_STARTUP_ERROR = re.compile(r"encountered during startup: ?(.*)")
_CAUSE = re.compile(r"(?:Caused by: |ConfigurationException: )(.*)")
_JVM_ERROR = re.compile(r"java\.lang\.\w*Error: .*")
_PROPERTY = re.compile(r"Cannot create property=(\w+)")


def cache_dir() -> Path:
    return Path(os.environ.get("KNOBTUNE_CACHE", Path.home() / ".cache" / "knobtune")) / "cassandra"


def java17() -> Path | None:
    """Debian's OpenJDK 17 ``java``: Cassandra 5.0 runs on Java 11 and 17 only, so never another JDK."""
    found = sorted(Path("/usr/lib/jvm").glob("java-17-openjdk-*/bin/java"))
    return found[0] if found else None

def node_argv(node: Path, jvm: list[str], *, record_classes: Path | None = None) -> list[str]:
    """``java`` running the node over folder ``node`` (its cassandra.yaml written there) with the JVM options ``jvm``.

    The node's classes come from the class archive when there is one (``class_archive``); ``record_classes``: the
    node writes the classes it loaded there when it stops cleanly, to become the archive.

    Raises:
        ToolMissingError: the jamm agent jar is not in the cache.
    """
    gc_flags = G1_ONLY if "-XX:+UseG1GC" in jvm else []
    archive = class_archive()
    sharing = ([f"-XX:ArchiveClassesAtExit={record_classes}"] if record_classes is not None
               else [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else [])
    if sharing:  # the jamm agent is loaded: Java archives with it, or maps such an archive, only when told
        sharing = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+AllowArchivingWithJavaAgent", *sharing]
    return [str(java17()), *jvm, *gc_flags, *JVM_BASE, *sharing,
            f"-Xlog:gc*:file=\"{gc_log(node)}\":uptime,tags:filecount=0",
            f"-javaagent:{jamm_jar()}", f"-Dcassandra.config=file://{node / 'cassandra.yaml'}",
            f"-Dcassandra.storagedir={node}", f"-Dcassandra.logdir={node / 'logs'}",
            f"-Dcassandra.triggers_dir={node / 'triggers'}",
            # lz4-java and snappy-java unpack their native libraries into Java's temporary folder and remove them
            # only at a clean exit: a node killed by the settle left two files in /tmp per run (774 of each here)
            f"-Djava.io.tmpdir={node / 'tmp'}",
            f"-Dlogback.configurationFile=file://{CONF_DIR / 'logback.xml'}",
            "-cp", str(cache_dir() / "lib" / "*"), "org.apache.cassandra.service.CassandraDaemon"]


def class_archive() -> Path:
    """Where the node's class archive is (Java's class data sharing: the classes a node loads, mapped from one file
    instead of read and verified from 100 jars): named by the Java and the jars it was made with, so another Java
    or another Cassandra never reads it. A node answered in 2.55 s instead of 3.46 s here (medians of 5
    interleaved runs each, bench/cassandra_start.py, 2026-11-26); a missing archive only makes starts slower.

    The archive is recorded with the jamm agent loaded (Java asks ``AllowArchivingWithJavaAgent`` for that, and
    warns that it is meant for testing): jamm measures objects and changes no class, so the classes archived are
    the jars' own.
    """
    jars = sorted((cache_dir() / "lib").glob("*.jar"))
    java = java17()
    made_of = "\n".join([str(java.resolve() if java else None), *(f"{jar.name} {jar.stat().st_size}" for jar in jars)])
    return cache_dir() / "classes" / f"node-{hashlib.sha256(made_of.encode()).hexdigest()[:16]}.jsa"


def gc_log(node: Path) -> Path:
    """The JVM's own GC log of the node over folder ``node`` (unified logging, every gc tag at info, one file that
    each start of the node writes anew): its pause lines are the node's GC pauses."""
    return node / "logs" / "gc.log"


def system_log(node: Path) -> Path:
    """Cassandra's own log of the node over folder ``node`` (native/cassandra/conf/logback.xml: INFO and above)."""
    return node / "logs" / "system.log"


def yaml_text(node: Path, ports: tuple[int, int, int], settings: Mapping[str, str]) -> str:
    """The template with this node's folder and ports, its keys that the config sets left out, then the config."""
    native, storage, ssl = ports
    text = ((CONF_DIR / "cassandra.yaml.in").read_text().replace("@SCRATCH@", str(node))
            .replace("@NATIVE_PORT@", str(native)).replace("@STORAGE_PORT@", str(storage))
            .replace("@SSL_STORAGE_PORT@", str(ssl)))
    kept = [line for line in text.splitlines() if line.split(":", 1)[0].strip() not in settings]
    if settings.get("commitlog_sync", "periodic") != "periodic":  # Cassandra refuses the period under batch/group
        kept = [line for line in kept if not line.startswith("commitlog_sync_period")]
    return "\n".join(kept + [f"{name}: {value}" for name, value in settings.items()]) + "\n"


def answers(port: int) -> bool:
    """Whether the node's native port answers a protocol request (OPTIONS, protocol v4) with SUPPORTED."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(struct.pack(">BBhBi", 0x04, 0, 0, 0x05, 0))
            header = sock.recv(9)
    except OSError:
        return False
    return len(header) == 9 and header[0] == 0x84 and header[4] == 0x06


def free_ports(count: int) -> tuple[int, ...]:
    """Ports free on 127.0.0.1 now (the kernel's choice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return tuple(sock.getsockname()[1] for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def jamm_jar() -> Path:
    found = sorted((cache_dir() / "lib").glob("jamm-*.jar"))
    if not found:
        raise ToolMissingError(f"the jamm agent jar is not in {cache_dir() / 'lib'}. {FETCH_HINT}")
    return found[-1]


def startup_message(log: Path, mark: int) -> str:
    """Why the node stopped at start-up, from its output since ``mark``: Cassandra's reason, or its last lines.

    "Invalid yaml" says only which file: the setting (``Cannot create property=NAME``) and the deepest cause
    that says something (``Invalid data storage: 0B Accepted units: ...``) are added from the stack trace.
    """
    with open(log, "rb") as handle:
        handle.seek(mark)
        text = handle.read().decode(errors="replace")
    lines = text.splitlines()
    reasons = [m.group(1).strip() for m in map(_STARTUP_ERROR.search, lines) if m and m.group(1).strip()]
    causes = [m.group(1).strip() for m in map(_CAUSE.search, lines) if m and m.group(1).strip()]
    telling = [c for c in causes if not re.search(r"InvocationTargetException|Invalid yaml|: null$|exception=null", c)]
    setting = next((m.group(1) for m in map(_PROPERTY.search, lines) if m), None)
    if reasons and "Invalid yaml" in reasons[0]:
        return "; ".join(part for part in (f"invalid value of {setting}" if setting else reasons[0],
                                           telling[-1] if telling else "") if part)[:400]
    if reasons:
        return reasons[0][:400]
    if telling:
        return telling[-1][:400]
    return last_lines(text)


def death(log: Path) -> str:
    """Why a running node died, from its log: the first JVM error (an OutOfMemoryError, say), or its last lines."""
    text = log.read_text(errors="replace")
    errors = [m.group(0) for m in map(_JVM_ERROR.search, text.splitlines()) if m]
    return errors[0][:400] if errors else last_lines(text)
