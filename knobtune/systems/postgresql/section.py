"""A PostgreSQL capture's ``[drivers.replay]`` section, read through the one schema (``knobtune.schema``):
unknown fields refused with the nearest name, types, choices and ranges checked, each file it names confined to
the capture folder, a regular file, and the file ``capture`` wrote (its SHA-256 as ``[capture] files`` recorded)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from knobtune import schema
from knobtune.errors import WorkloadError
from knobtune.schema import setting
from knobtune.workloads import Workload
from knobtune.workloads.capture import PACES, verify_files

PG_PACES = (*PACES, "think")  # think: as fast, each session keeping its captured think times


@dataclass(frozen=True)
class ReplaySection:
    """How a PostgreSQL capture replays (docs/replay.md): its files, its database, its pace."""

    dump: str = setting("", example="dump.custom")
    statements: str = setting("", example="replay.dat")
    log: str = setting("", example="postgresql.csv")
    keys: str = setting("", example="keys.json")  # "": a capture of 0.4.0, whose replay remaps nothing
    dump_format: str = setting("custom", choices=("custom", "plain"), what="a dump format knobtune restores")
    database: str = setting("postgres", example="appdb")
    pace: str = setting("captured", choices=PG_PACES, what="a replay pace")
    speed: float = setting(1.0, positive=True, most=100.0, example=2, note="the captured schedule in half its time")
    nondeterministic: tuple[str, ...] = setting((), example=["orders.created_at"])


def read_section(workload: Workload) -> tuple[ReplaySection, dict[str, Path]]:
    """The capture's section, and the paths of the files it names (checked whole: see the module doc).

    Raises:
        WorkloadError: one line per problem, naming the field or the file and the fix.
    """
    section = schema.read(ReplaySection, dict(workload.driver("replay")),
                          schema.Where(f"{workload.source}: [drivers.replay]"), WorkloadError)
    if section.pace != "captured" and section.speed != 1:
        raise WorkloadError(f"{workload.source}: [drivers.replay] speed = {section.speed:g} with pace = "
                            f"\"{section.pace}\", which follows no schedule. Fix: drop speed, or set pace = "
                            "\"captured\"")
    if section.pace == "think" and workload.capture and any("no durations" in n for n in workload.capture.notes):
        raise WorkloadError(f"{workload.source}: [drivers.replay] pace = \"think\" needs each statement's duration, "
                            "which the log has not. Fix: capture with log_min_duration_statement = 0, or use "
                            "another pace")
    folder = workload.source.parent if workload.source else Path(".")
    named = {"dump": section.dump, "statements": section.statements, **({"keys": section.keys} if section.keys else {})}
    for key, name in named.items():
        if not name:
            raise WorkloadError(f"{workload.source}: [drivers.replay] has no {key}. Fix: make the capture again with "
                                "`knobtune capture postgresql`")
    files = verify_files(folder, named, workload.capture.files if workload.capture else {})
    return section, files
