"""What installs each system's tools: the part of the set-up a missing tool's message names.

``scripts/setup PART`` installs one part (and the ``rocksdb`` part, knobtune's core, with it); ``scripts/setup``
with no part installs them all, as ``scripts/test`` does. ``scripts/demo`` installs the ``rocksdb`` part only, so
the first use of another system is where a user learns, in the error's one line, the command that installs it.
Every shipped system has a part of its name, and ``tests`` holds what only the tests use
(tests/test_setup_parts.py checks both against the script).
"""

from __future__ import annotations

# The native/build programs and the part that builds each.
NATIVE_PARTS = {"kvbench": "rocksdb", "kvbench-leveldb-tunable": "leveldb", "pgreplay-kt": "postgresql",
                "rocksdb-options-readback": "tests"}


def setup_command(part: str) -> str:
    """The command that installs ``part`` (a shipped system's name, or ``tests``), run in knobtune's checkout."""
    return f"scripts/setup {part}"


def setup_fix(part: str, what: str = "") -> str:
    """The "Fix: ..." end of a message about a missing tool: the set-up command that installs it, and what it does
    (``what``) in parentheses."""
    return f"Fix: run `{setup_command(part)}` in knobtune's checkout" + (f" ({what})" if what else "")
