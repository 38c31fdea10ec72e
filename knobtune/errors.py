"""The one exception hierarchy of knobtune.

Every error a user can cause is a ``KnobtuneError`` whose message names the
cause (file, knob, field, value) and says what to do. The CLI prints the
message on one line and exits with status 2; nothing else is caught there.
"""

from __future__ import annotations


class KnobtuneError(Exception):
    """Base of every error knobtune raises on purpose."""


class CatalogError(KnobtuneError):
    """A knob catalog file is unreadable or invalid."""


class WorkloadError(KnobtuneError):
    """A workload file is unreadable or invalid."""


class ConfigError(KnobtuneError):
    """A configuration names an unknown knob or holds a value out of range."""


class UsageError(KnobtuneError):
    """Conflicting or invalid command-line options."""


class ToolMissingError(KnobtuneError):
    """A program knobtune needs (db_bench, ...) is not installed."""


class StorageError(KnobtuneError):
    """The study storage or artifacts folder cannot be used."""


class StudyNotFoundError(KnobtuneError):
    """No study of that name exists in the storage."""
