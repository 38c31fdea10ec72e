"""A capture: what a user's system really did, kept as a workload a study replays (docs/replay.md).

A capture is a folder, private to its owner (0700; every file in it 0600),
holding the system's own record of the work (a RocksDB trace, a PostgreSQL
log), the state the work started from (a checkpoint, a dump) and
``capture.toml``: a workload file like any other (name, ladder, objective,
``records`` = the operations or statements captured, one ``[drivers.replay]``
section naming the files), plus a ``[capture]`` table that summarizes it
without its data (time span, sessions, the operation mix, statement
fingerprints with constants stripped, the files' SHA-256, and ``format``: the
version of the layout, ``CAPTURE_FORMAT``; absent in captures made before it was
numbered, which read as 1). ``--workload DIR``
loads it; its rungs are a fraction of the capture (its first statements; a
RocksDB capture's records in slices spread over it, ``spread_windows``).

The files hold the user's rows and keys: knobtune never prints them, and it
refuses a capture folder that others can read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knobtune.errors import WorkloadError
from knobtune.schema import required, setting, table

CAPTURE_FILE = "capture.toml"
CAPTURE_FORMAT = 2  # the layout of capture.toml this knobtune writes ([capture] format; absent: 1, as 0.4.0 wrote)
DRIVER = "replay"  # the driver section every capture has, whichever system it is of
PACES = ("captured", "fast")  # at the capture's own pace (objective: latency), or as fast as it can (time)
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


@dataclass(frozen=True)
class Fingerprint:
    """One kind of statement or operation: its text with constants stripped, how often it ran, its captured time."""

    text: str = required(example="SELECT * FROM t WHERE id = $1")
    count: int = required(least=0, example=120)
    total_s: float = setting(0.0, least=0, example=1.5)


@dataclass(frozen=True)
class CaptureSummary:
    """What a capture holds, said without its data: a capture's ``[capture]`` table, written by ``knobtune
    capture`` (``format``: the version of the capture's layout; captures written before it was recorded, 0.4.0's
    among them, have none and read as format 1)."""

    system: str = required(example="postgresql")
    operations: int = setting(0, least=0, example=5000, note="records of the trace, statements of the log")
    span_s: float = setting(0.0, least=0, example=60.0, note="from the first captured operation to the last")
    sessions: int = setting(1, least=0, example=1, note="connections (a trace: 1, the application's one store)")
    mix: Mapping[str, int] = table(least=0, example=5000)  # operations by kind ("get": 5000, "SELECT": 120)
    fingerprints: tuple[Fingerprint, ...] = ()  # the kinds that took the most captured time, first
    files: Mapping[str, str] = table(pattern="[0-9a-f]{64}", what="a SHA-256 (64 hex digits)",
                                     example="0" * 64)  # file name -> SHA-256 (the capture's identity)
    # What the capture cannot carry
    notes: tuple[str, ...] = setting((), items="lines", example=["a trace holds no iterator Next calls"])
    # A RocksDB capture's scan lengths, counts only: scans recorded, matched to a traced seek, their Next and Prev
    # calls, those that ran to the end of their range (empty: none recorded)
    scans: Mapping[str, int] = table(least=0, example=10)
    # The layout of the capture.toml it was read from (absent: 1); what knobtune writes is CAPTURE_FORMAT
    format: int = setting(1, least=1, example=CAPTURE_FORMAT, note="the layout of capture.toml (absent: 1)")

    def record(self) -> dict[str, Any]:
        """As stored in ``capture.toml`` and on a study (``format``: the one this knobtune writes)."""
        return {"format": CAPTURE_FORMAT, "system": self.system, "operations": self.operations,
                "span_s": self.span_s, "sessions": self.sessions, "mix": dict(self.mix),
                "fingerprints": [{"text": f.text, "count": f.count, "total_s": f.total_s} for f in self.fingerprints],
                "files": dict(self.files), "notes": list(self.notes),
                **({"scans": dict(self.scans)} if self.scans else {})}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> CaptureSummary:
        return cls(system=str(data.get("system", "?")), operations=int(data.get("operations", 0)),
                   span_s=float(data.get("span_s", 0.0)), sessions=int(data.get("sessions", 1)),
                   mix={str(k): int(v) for k, v in (data.get("mix") or {}).items()},
                   fingerprints=tuple(Fingerprint(str(f["text"]), int(f["count"]), float(f.get("total_s", 0.0)))
                                      for f in data.get("fingerprints") or ()),
                   files={str(k): str(v) for k, v in (data.get("files") or {}).items()},
                   notes=tuple(str(n) for n in data.get("notes") or ()),
                   scans={str(k): int(v) for k, v in (data.get("scans") or {}).items()},
                   format=int(data.get("format", 1)))

    def lines(self) -> list[str]:
        """A few lines for a person: span, sessions, the mix, the costliest fingerprints; never a statement's
        constants or a key."""
        mix = ", ".join(f"{kind} {count:,}" for kind, count in sorted(self.mix.items(), key=lambda kv: -kv[1]))
        out = [f"{self.system} capture: {self.operations:,} operations over {self.span_s:,.1f} s, "
               f"{self.sessions:,} session{'s' * (self.sessions != 1)}", f"  mix: {mix or 'none'}"]
        out += [f"  {f.count:,}x {f.total_s:,.2f} s  {f.text[:100]}" for f in self.fingerprints[:5]]
        if self.scans:
            s = self.scans
            out.append(f"  scans: {s.get('scans', 0):,} recorded, {s.get('matched', 0):,} matched to a traced seek; "
                       f"{s.get('next', 0):,} Next and {s.get('prev', 0):,} Prev steps, {s.get('at_end', 0):,} "
                       "ran to the end of their range")
        out += [f"  note: {note}" for note in self.notes]
        return out


def spread_windows(total: int, wanted: int, slices: int) -> list[tuple[int, int]]:
    """The ranges ``[begin, end)`` of a capture's ``total`` records that a rung of ``wanted`` records replays when
    it is ``slices`` slices spread over the capture: slice i begins where the capture's i-th of ``slices`` equal
    parts begins, and the slices together hold ``wanted`` (one slice, or a rung as large as the capture: the
    first ``wanted``).

    >>> spread_windows(1000, 100, 4)
    [(0, 25), (250, 275), (500, 525), (750, 775)]
    """
    wanted = min(wanted, total)
    slices = max(1, min(slices, wanted))
    if slices == 1 or wanted >= total:
        return [(0, wanted)]
    windows = []
    for i in range(slices):
        begin = i * total // slices
        windows.append((begin, begin + wanted // slices + (1 if i < wanted % slices else 0)))
    return windows


def check_pace(workload: Any, pace: str, paces: tuple[str, ...] = PACES) -> None:
    """Refuse a replay ``pace`` (one of ``paces``, the system's) the objective of ``workload`` (a capture) cannot
    measure.

    Raises:
        WorkloadError: an unknown pace, or one whose objective does not fit it (one line naming the fix).
    """
    if pace not in paces:
        raise WorkloadError(f"{workload.source}: [drivers.replay] pace = '{pace}' is unknown. Fix: use captured "
                            f"(objective p99_us) or {' or '.join(p for p in paces if p != 'captured')} (objective "
                            "elapsed_s)")
    fits = ("p99_us",) if pace == "captured" else ("elapsed_s", "ops_per_s")
    if workload.objective.value not in fits:
        raise WorkloadError(f"{workload.source}: objective = '{workload.objective.value}' does not measure a replay at "
                            f"pace = '{pace}' (at the captured pace the time is the capture's). Fix: set objective = "
                            f"'{fits[0]}', or the other pace")


def capture_dir(path: Path) -> Path | None:
    """The capture folder ``path`` names (the folder, or its ``capture.toml``), or None when it is no capture."""
    if path.is_dir() and (path / CAPTURE_FILE).is_file():
        return path
    if path.name == CAPTURE_FILE and path.is_file():
        return path.parent
    return None


def check_private(folder: Path) -> None:
    """Refuse a capture folder that anyone but its owner can read (it holds the user's data).

    Raises:
        WorkloadError: the folder or a file in it is open to others, naming it and the fix.
    """
    for path in (folder, *sorted(folder.rglob("*"))):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise WorkloadError(f"{path} is a link: a capture holds its own copies of your data. Fix: make the "
                                "capture again with `knobtune capture`")
        if stat.S_IMODE(mode) & 0o077:
            raise WorkloadError(f"{path}: the capture is readable by others (mode {stat.S_IMODE(mode):o}); it holds "
                                f"your data. Fix: chmod -R go-rwx {folder}")


def make_private_dir(out: Path) -> None:
    """Create the capture folder ``out``, owner-only.

    Raises:
        WorkloadError: it exists and is not empty, or cannot be made.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WorkloadError(f"{out} exists and is not an empty folder. Fix: name a new folder with -o")
    old = os.umask(0o077)
    try:
        out.mkdir(parents=True, exist_ok=True)
        out.chmod(PRIVATE_DIR)
    except OSError as exc:
        raise WorkloadError(f"cannot make the capture folder {out} ({exc.strerror}). Fix: name a folder you can "
                            "write with -o") from None
    finally:
        os.umask(old)


def private_copy(source: Path, target: Path) -> None:
    """Copy a file or a folder into the capture, every copy owner-only."""
    if source.is_dir():
        target.mkdir(mode=PRIVATE_DIR)
        for child in sorted(source.iterdir()):
            private_copy(child, target / child.name)
        target.chmod(PRIVATE_DIR)
        return
    shutil.copyfile(source, target)
    target.chmod(PRIVATE_FILE)


def verify_files(folder: Path, named: Mapping[str, str], digests: Mapping[str, str]) -> dict[str, Path]:
    """The files a capture's section names (field -> file name), each checked: a plain name inside ``folder``, a
    regular file (not a link, a FIFO or a device), and, where ``digests`` (the ``[capture] files`` table) records
    it, the same SHA-256 (its size and time can be reset; its content cannot).

    Raises:
        WorkloadError: the first file that fails, naming it and the fix.
    """
    paths: dict[str, Path] = {}
    for key, name in named.items():
        path = folder / name
        if Path(name).name != name or name in (".", ".."):
            raise WorkloadError(f"{folder / CAPTURE_FILE}: [drivers.replay] {key} = '{name}' is not a file of the "
                                "capture folder. Fix: name a file beside capture.toml (no folders, no '..')")
        try:
            mode = path.lstat().st_mode
        except OSError:
            raise WorkloadError(f"{folder / CAPTURE_FILE}: [drivers.replay] {key} = '{name}' is not a file in "
                                f"{folder}. Fix: make the capture again with `knobtune capture`") from None
        if not stat.S_ISREG(mode):
            raise WorkloadError(f"{path} is not a regular file (a link, a FIFO or a device): a capture holds its own "
                                "copies. Fix: make the capture again with `knobtune capture`")
        if name in digests and sha256_of(path) != digests[name]:
            raise WorkloadError(f"{path} is not the file the capture wrote (its SHA-256 differs from capture.toml's): "
                                "it changed since. Fix: restore it, or make the capture again with `knobtune capture`")
        paths[key] = path
    return paths


def verify_folder(folder: Path, key: str, name: str) -> Path:
    """A folder a capture's section names (a RocksDB checkpoint): a plain name inside ``folder``, a real folder.

    Raises:
        WorkloadError: it is not, naming it and the fix.
    """
    path = folder / name
    if Path(name).name != name or name in (".", "..") or not path.is_dir() or path.is_symlink():
        raise WorkloadError(f"{folder / CAPTURE_FILE}: [drivers.replay] {key} = '{name}' is not a folder of the "
                            "capture. Fix: make the capture again with `knobtune capture`")
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_capture(out: Path, *, name: str, description: str, system: str, objective: str,
                  ladder: Sequence[float], counts: str, section: Mapping[str, Any], summary: CaptureSummary,
                  fields: Mapping[str, Any] | None = None) -> Path:
    """Write ``capture.toml`` (owner-only) into the capture folder ``out``; its path. ``fields``: more workload
    fields (the mean ``key_size`` and ``value_size``, which the diagnosis rules read as the workload's shape)."""
    document: dict[str, Any] = {
        "name": name, "description": description, "systems": [system], "objective": objective,
        "ladder": list(ladder), "records": max(1, summary.operations), "counts": counts, **(fields or {}),
        "drivers": {DRIVER: dict(section)}, "capture": summary.record()}
    path = out / CAPTURE_FILE
    path.write_text("# A capture made by `knobtune capture` (docs/replay.md). The files beside it hold your data.\n"
                    + _toml(document))
    path.chmod(PRIVATE_FILE)
    return path


# ---------------------------------------------------------------- a TOML writer for plain data


def _toml(document: Mapping[str, Any]) -> str:
    tables = {k: v for k, v in document.items() if isinstance(v, Mapping)}
    lines = [f"{key} = {_value(value)}" for key, value in document.items() if key not in tables]
    for key, sub in tables.items():
        _table(lines, key, sub)
    return "\n".join(lines) + "\n"


def _table(lines: list[str], name: str, table: Mapping[str, Any]) -> None:
    subtables = {k: v for k, v in table.items() if isinstance(v, Mapping) and k not in ("mix", "files", "scans")}
    lines.append(f"\n[{name}]")
    lines += [f"{_key(key)} = {_value(value)}" for key, value in table.items() if key not in subtables]
    for key, sub in subtables.items():
        _table(lines, f"{name}.{_key(key)}", sub)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _value(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_char(c) for c in value) + '"'
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _char(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
