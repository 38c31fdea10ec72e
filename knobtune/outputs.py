"""Paths a user gives for knobtune to write (``-o``): checked before anything runs, and never a file knobtune would
destroy.

An output path is refused when it is a folder, when no folder on its way can be written, when it is a SQLite
database (a studies database above all) or a file inside a capture folder, or when it is an existing file that
knobtune did not write in the format it is about to write there. ``--force`` lifts the last refusal only: a studies
database and a capture are never overwritten (docs/experiment.md says so to users).

How knobtune tells a file it wrote: each format carries knobtune's mark where that format keeps notes,
- JSON: an object whose ``written_by`` field is ``knobtune <version>`` (``json_mark``);
- HTML: ``<meta name="generator" content="knobtune <version>">`` in its head (``html_mark``);
- a config file with comments (an OPTIONS file, postgresql.conf, cassandra.yaml, SQL, C++): a first line that is a
  comment naming knobtune (``text_mark``).
A format without comments (db_bench flags) carries no mark: an existing file there needs ``--force``.
"""

from __future__ import annotations

import enum
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from knobtune import __version__
from knobtune.errors import UsageError
from knobtune.names import existing_ancestor

WRITTEN_BY = f"knobtune {__version__}"
SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_SIDE_FILES = ("-journal", "-wal", "-shm")  # what SQLite keeps beside a database while it writes
CAPTURE_FILE = "capture.toml"  # workloads.capture's: the file that makes a folder a capture
_HEAD_BYTES = 8192  # a mark is looked for in a file's first bytes


class Written(enum.Enum):
    """The format knobtune writes to an output path, as far as telling its own files goes."""

    JSON = "JSON"
    HTML = "HTML"
    TEXT = "text"  # a config file whose comments start with ``OutputFile.comment`` (None: it has none)


@dataclass(frozen=True)
class OutputFile:
    """A file about to be written: its path, the format, how the format starts a comment (TEXT)."""

    path: Path
    written: Written
    comment: str | None = None


def json_mark() -> dict[str, str]:
    """The field every JSON file knobtune writes to a user's path starts with."""
    return {"written_by": WRITTEN_BY}


def html_mark() -> str:
    """The tag every HTML page knobtune writes carries in its head."""
    return f'<meta name="generator" content="{WRITTEN_BY}">'


def text_mark(comment: str) -> str:
    """The first line of a config file knobtune writes, in the format's comment syntax."""
    return f"{comment} written by {WRITTEN_BY}"


def check_outputs(files: list[OutputFile], option: str = "-o", force: bool = False) -> None:
    """Refuse, before anything runs, to write any of ``files`` where it would destroy something.

    Raises:
        UsageError: one line naming the path, why, and the fix.
    """
    for file in files:
        check_output(file, option, force)


def check_output(file: OutputFile, option: str = "-o", force: bool = False) -> None:
    """See ``check_outputs``."""
    path = file.path
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder. Fix: give a file's path, e.g. {option} {path / 'out'}")
    check_writable_parent(path, option)
    if (capture := capture_around(path)) is not None:
        raise UsageError(f"{option} {path} is inside the capture {capture}, which holds your data. Fix: write "
                         f"elsewhere, e.g. {option} {capture.parent / path.name}")
    if is_sqlite(path) or _sqlite_side_file(path):
        raise UsageError(f"{option} {path} is a SQLite database (a studies database?); knobtune never writes over "
                         f"one. Fix: choose another {option} path")
    if path.exists() and not force and not written_by_knobtune(file):
        what = f"knobtune's {file.written.value}" if file.written is not Written.TEXT or file.comment else \
            "a file knobtune wrote (this format has no comment to mark it)"
        raise UsageError(f"{option} {path} exists and is not {what}; writing would destroy it. Fix: choose another "
                         f"{option} path, or add --force to overwrite it")


def check_writable_parent(path: Path, option: str) -> None:
    """Refuse ``path`` when its nearest existing parent is not a folder this process can write in.

    Raises:
        UsageError: one line naming the folder and the fix.
    """
    parent = existing_ancestor(path.parent)
    try:
        if not parent.is_dir():
            raise NotADirectoryError
        with tempfile.TemporaryFile(dir=parent):  # what writing would meet (permissions, a read-only disk, /proc)
            pass
    except OSError:
        raise UsageError(f"cannot write {path}: {parent} is not a writable folder. Fix: choose a writable {option} "
                         "path") from None


def capture_around(path: Path) -> Path | None:
    """The capture folder ``path`` is (a folder holding ``capture.toml``) or lies inside, or None."""
    for folder in (path.resolve(), *path.resolve().parents):
        if (folder / CAPTURE_FILE).is_file():
            return folder
    return None


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is an existing SQLite database (by its header)."""
    return path.is_file() and _head(path).startswith(SQLITE_MAGIC)


def _sqlite_side_file(path: Path) -> bool:
    """Whether ``path`` is a journal or write-ahead log SQLite keeps beside a database."""
    return any(path.name.endswith(side) and is_sqlite(path.with_name(path.name.removesuffix(side)))
               for side in SQLITE_SIDE_FILES)


def written_by_knobtune(file: OutputFile) -> bool:
    """Whether the existing ``file.path`` parses as ``file.written`` and carries knobtune's mark."""
    text = _head(file.path).decode(errors="replace")  # the head may end inside a character
    if file.written is Written.JSON:
        try:
            data = json.loads(file.path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            return False
        return isinstance(data, dict) and str(data.get("written_by", "")).startswith("knobtune ")
    if file.written is Written.HTML:
        return text.lstrip().lower().startswith("<!doctype html") and '<meta name="generator" content="knobtune ' \
            in text
    first = text.split("\n", 1)[0]
    return file.comment is not None and first.startswith(f"{file.comment} written by knobtune ")


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as opened:
            return opened.read(_HEAD_BYTES)
    except OSError:
        return b""
