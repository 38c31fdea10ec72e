"""Reading knobtune's TOML data files (catalogs, workloads) with one kind of error for each."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from knobtune.errors import KnobtuneError


def read_toml(path: Path, error: type[KnobtuneError], what: str) -> dict[str, Any]:
    """The parsed file.

    Raises:
        error: the file cannot be read, or is not valid TOML; the message names the file and the fix.
    """
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8-sig"))  # a BOM some editors write is no error
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror}). Fix: check the path") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read the {what}: not UTF-8 text (byte {exc.start}). Fix: give a TOML file "
                    "saved as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc}). Fix: correct the syntax at that line") from None
