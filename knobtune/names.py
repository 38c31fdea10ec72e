"""Names are names, not paths: the check every study name passes, and the guard on every folder made from one.

A study name (``--study``, and the names knobtune makes from a system and a workload) becomes a folder of the
studies folder (``artifacts/<study>/``), so it is held to a small character set: letters, digits, ``.``, ``_`` and
``-``, starting with a letter or a digit, at most ``MAX_NAME_CHARS`` characters, never ``..``. docs/tuning.md
says so to users.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

from knobtune.errors import UsageError

MAX_NAME_CHARS = 64
NAME_CHARS = "letters, digits, '.', '_' and '-', starting with a letter or a digit"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid name (None: it is)."""
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"has {len(name)} characters, more than {MAX_NAME_CHARS}"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    if ".." in name:
        return "holds '..'"
    if not _NAME.fullmatch(name):
        return f"holds a character outside {NAME_CHARS}"
    return None


def study_name(name: str, option: str = "--study") -> str:
    """``name`` when it is a valid study name.

    Raises:
        UsageError: one line saying why it is not, and how to write one.
    """
    if (problem := name_problem(name)) is not None:
        raise UsageError(f"{option} {name!r} {problem}: a study name is a name, not a path. Fix: use "
                         f"{NAME_CHARS}, at most {MAX_NAME_CHARS} characters, e.g. {option} pgd-1")
    return name


def inside(folder: Path, part: str) -> Path:
    """``folder / part``, proven to stay inside ``folder`` (no separator, no ``..``, not empty).

    Raises:
        UsageError: ``part`` would leave ``folder``.
    """
    path = (folder / part).resolve()
    if not part or "/" in part or "\\" in part or ".." in part or path.parent != folder.resolve():
        raise UsageError(f"{part!r} would write outside {folder}: a name is not a path. Fix: use {NAME_CHARS}")
    return path


def existing_ancestor(folder: Path) -> Path:
    """``folder`` or its nearest ancestor that exists (the disk a folder not yet made will be on)."""
    folder = folder.resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def nearest(name: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the valid name nearest to a misspelt ``name``, or nothing."""
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
