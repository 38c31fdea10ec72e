"""Where a bench's figures come from: the commit, the machine, whether it was quiet, every system's build.

``_cli.emit`` adds ``stamp()`` to every result as its ``provenance``, so every result file says which code state
made it (the commit its runs started from, and whether the checkout had changes), on which machine (CPU model,
cores, memory, kernel, OS, storage), whether the machine was quiet while it ran, and which build of each system
it measured (``knobtune systems --json``: for RocksDB, Debian's assertion-enabled package or the release build
of scripts/rocksdb-release).

Quiet is judged from the CPU the rest of the machine used while the bench ran, as a share of the machine's
capacity, and the time the hypervisor took (steal). The rest of the machine's CPU is read two ways:
- ``others_cpu_share``: the machine's busy time (/proc/stat) less the CPU this bench and the processes it waited
  for used (getrusage). A bound from above: a process of the bench's that nobody waits for is counted as the
  rest's (a PostgreSQL server killed by the settle's crash check leaves its backends to init, and their CPU with
  them);
- ``outside_cpu_share``: the CPU of every process outside the bench's own tree (kernel threads included), read
  from /proc every second by ``Outside``; a process once seen in the tree stays the bench's. A process born and
  gone between two readings is not seen.
The second judges quiet in a bench script's own process (the one whose result is stamped). The load averages
before and after are kept beside it; the one after counts the bench's own work.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from knobtune.tuning.loop import machine_facts

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
QUESTION_ENV = "KNOBTUNE_BENCH_QUESTION"  # set by bench/run.py: the question a script's run answers
COMMAND_ENV = "KNOBTUNE_BENCH_COMMAND"  # set by bench/run.py: the command that ran it, as a user types it
QUIET_OTHERS_SHARE = 0.10  # quiet: the rest of the machine used under a tenth of its CPU while the bench ran ...
QUIET_STEAL_SHARE = 0.05  # ... and the hypervisor took under 5% of it


def _cpu_ticks() -> dict[str, int]:
    """The machine's CPU time so far, in clock ticks: busy (user, nice, system, irq, softirq), steal and all."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return {}
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return {"busy": user + nice + system + irq + softirq, "steal": steal, "all": sum(fields)}


def _own_cpu_s() -> float:
    """CPU seconds of this process and of every process it (or they) waited for."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


class Outside:
    """The CPU seconds used since it started by the processes outside the tree of process ``root`` (this one), read
    every ``every_s`` (the module's docstring)."""

    def __init__(self, every_s: float = 1.0, root: int | None = None) -> None:
        self.root = os.getpid() if root is None else root
        self.seconds = 0.0
        self.started = time.time()
        self._seen: dict[tuple[int, float], float] = {}  # (pid, created) -> CPU seconds at the last reading
        self._ours: set[tuple[int, float]] = set()
        self._every_s = every_s
        self._read()
        threading.Thread(target=self._loop, name="outside-cpu", daemon=True).start()

    def is_ours(self, pid: int) -> bool:
        """Whether the process ``pid`` was seen in the tree (and so stays the bench's)."""
        return any(key[0] == pid for key in self._ours)

    def _loop(self) -> None:
        while True:
            time.sleep(self._every_s)
            self._read()

    def _read(self) -> None:
        me, parents, cpu = self.root, {}, {}
        for process in psutil.process_iter(["ppid", "create_time", "cpu_times"]):
            info = process.info
            if info["cpu_times"] is None or info["create_time"] is None:
                continue
            key = (process.pid, info["create_time"])
            parents[process.pid] = info["ppid"]
            cpu[key] = info["cpu_times"].user + info["cpu_times"].system
        for key in cpu:
            pid = key[0]
            while pid not in (0, 1, me) and pid in parents and pid != parents[pid]:
                pid = parents[pid]
            if pid == me:
                self._ours.add(key)
        for key, seconds in cpu.items():
            if key not in self._ours:
                before = self._seen.get(key, 0.0 if key[1] >= self.started else seconds)
                self.seconds += max(0.0, seconds - before)
        self._seen = cpu


def _git(*args: str) -> str:
    ran = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    return ran.stdout.strip()


def _is_bench_script() -> bool:
    """Whether this process is a bench script, whose result the stamp judges: not bench/run.py, which starts one
    (its own readings would count against its child as outside work), nor a test importing the module."""
    main = Path(sys.argv[0]).resolve()
    return main.parent == REPO / "bench" and main.suffix == ".py" and main.name != "run.py"


OUTSIDE = Outside() if _is_bench_script() else None  # read from the start, as STARTED is
STARTED = {"at": datetime.datetime.now(datetime.timezone.utc), "monotonic": time.monotonic(),
           "load": os.getloadavg(), "cpu": _cpu_ticks(), "own_cpu_s": _own_cpu_s(),
           # the code state the runs start from (each knobtune command a bench runs imports it afresh)
           "commit": _git("rev-parse", "--short=7", "HEAD") or "unknown",
           # results are not code: an earlier question's result (and RESULTS.md) left uncommitted does not count
           "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results",
                              ":(exclude)bench/RESULTS.md"))}


def result_name() -> str:
    """A result's file name in its question's folder: the day the bench started and the commit it ran."""
    return f"{STARTED['at']:%Y%m%d}-{STARTED['commit']}.json"


def command() -> str:
    """The command that made this result, repository-relative: bench/run.py's when it ran the script, else the
    script's own argv (its path made relative to the repository)."""
    given = os.environ.get(COMMAND_ENV)
    if given:
        return given
    script = Path(sys.argv[0]).resolve()
    shown = str(script.relative_to(REPO)) if script.is_relative_to(REPO) else script.name
    return shlex.join([".venv/bin/python", shown, *sys.argv[1:]])


def question(out: Path | None) -> str | None:
    """Which question the result answers: bench/run.py says so, or the result goes into bench/results/QUESTION/."""
    given = os.environ.get(QUESTION_ENV)
    if given:
        return given
    if out is not None and out.resolve().parent.parent == RESULTS:
        return out.resolve().parent.name
    return None


def machine() -> dict[str, Any]:
    """The machine's facts: knobtune's own (CPU model, cores, memory, storage, kernel), its OS and the kernel."""
    facts = machine_facts(Path(tempfile.gettempdir()))
    try:
        distribution = platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        distribution = None
    return {**facts, "kernel": platform.release(), "distribution": distribution}


def systems() -> list[dict[str, Any]]:
    """Every installed system and driver with its build, as ``knobtune systems --json`` reports them."""
    knobtune = str(Path(sys.executable).with_name("knobtune"))
    ran = subprocess.run([knobtune, "systems", "--json"], capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        return [{"error": f"knobtune systems --json failed (status {ran.returncode}): {ran.stderr[-300:]}"}]
    return [{key: row[key] for key in ("system", "driver", "build")}
            for row in json.loads(ran.stdout)["systems"] if row["installed"]]


def quiet() -> dict[str, Any]:
    """Whether the machine was quiet from the bench's start until now, with the figures that judge it."""
    now, elapsed_s = _cpu_ticks(), time.monotonic() - STARTED["monotonic"]
    figures: dict[str, Any] = {"load_before": list(STARTED["load"]), "load_after": list(os.getloadavg()),
                               "elapsed_s": round(elapsed_s, 1)}
    before = STARTED["cpu"]
    if not now or not before or now["all"] <= before["all"]:
        return figures | {"quiet": None, "why": "the machine's CPU time could not be read (/proc/stat)"}
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    capacity_s = (now["all"] - before["all"]) * tick_s
    own_s = _own_cpu_s() - STARTED["own_cpu_s"]
    others = max(0.0, (now["busy"] - before["busy"]) * tick_s - own_s) / capacity_s
    steal = (now["steal"] - before["steal"]) * tick_s / capacity_s
    if OUTSIDE is None:  # not a bench script's process: the bound from above is all there is
        return figures | {"others_cpu_share": round(others, 3), "steal_share": round(steal, 3),
                          "quiet": others < QUIET_OTHERS_SHARE and steal < QUIET_STEAL_SHARE}
    outside = OUTSIDE.seconds / capacity_s
    return figures | {"others_cpu_share": round(others, 3), "outside_cpu_share": round(outside, 3),
                      "steal_share": round(steal, 3),
                      "quiet": outside < QUIET_OTHERS_SHARE and steal < QUIET_STEAL_SHARE}


def stamp(out: Path | None, earlier: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The provenance of a result written now to ``out`` (None: printed only); ``earlier``: the sittings before
    this one whose steps it reused (bench/_steps.py), each with its commit and quietness. Its start is the first
    sitting's; the machine was quiet only if it was in every sitting."""
    measured = quiet()
    stamped = {"recorded": True, "question": question(out), "command": command(),
               "commit": STARTED["commit"], "dirty": STARTED["dirty"] or any(s.get("dirty") for s in earlier or []),
               "started": min([STARTED["at"].isoformat(timespec="seconds"), *(s["started"] for s in earlier or [])]),
               "ended": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": machine(), "quiet": measured, "systems": systems()}
    if earlier:
        each = [measured.get("quiet"), *((s.get("quiet") or {}).get("quiet") for s in earlier)]
        stamped["quiet"] = measured | {"quiet": False if False in each else None if None in each else True,
                                       "this_sitting": measured.get("quiet")}
        stamped["sittings"] = earlier
    return stamped
