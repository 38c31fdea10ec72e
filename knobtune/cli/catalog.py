"""Commands that read what is installed and known: ``systems``, ``knobs``, ``baseline``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from knobtune import console
from knobtune.installing import setup_command
from knobtune.knobs import load_catalog
from knobtune.targets import Machine, disk_detection
from knobtune.systems import TARGETS, export_formats, heuristic_config, target_class
from knobtune.workloads import available_workloads, load_workload
from knobtune.outputs import OutputFile, Written, check_output
from knobtune.cli.options import ForceOption, JsonOption, SystemArgument, output_path, write_output


def systems(json_output: JsonOption = False) -> None:
    """Systems, drivers and workloads available here.

    Example: knobtune systems --json
    """
    rows, workloads = _system_rows(), _workload_rows()
    if json_output:
        console.print_json({"systems": rows, "workloads": workloads})
        return
    for row in rows:
        state = "installed" if row["installed"] else "[red]not installed[/red]"
        if not row["installed"]:
            state += f" (`{row['setup']}` installs it)"
        built = f" ({escape(row['build'])})" if row["build"] else ""
        console.out.print(f"{row['system']} --driver {row['driver']}: {state}{built}")
    for w in workloads:
        checks = ", ".join(
            f"{d}: " + ("reads checked" if v
                        else "NOT verifiable" + (" (twin checks the winner)" if d in w["verifiable_twin"] else ""))
            for d, v in w["verifiable"].items())
        console.out.print(f"  workload {w['name']}: {w['description']} ({w['objective']}; {checks})", markup=False)


def _system_rows() -> list[dict[str, Any]]:
    """One row per system and driver: installed or not, where, and the formats it exports."""
    rows = []
    for (system, driver), target in TARGETS.items():
        binary = target.installed()
        rows.append({"system": system, "driver": driver, "installed": binary is not None, "path": binary,
                     "build": target.build() if binary is not None else None,
                     "setup": setup_command(system),  # the set-up part that installs it (each system has one)
                     "formats": [f.name for f in export_formats(system, driver)] + ["json"]})
    return rows


def _workload_rows() -> list[dict[str, Any]]:
    """One row per shipped workload: its systems, objective, ladder and which drivers check its reads."""
    workloads = []
    for name in available_workloads():
        workload = load_workload(name)
        sections = workload.drivers
        verifiable = {}
        for driver, section in sections.items():
            runs = [target_class(system, driver) for system in workload.systems]
            verifiable[driver] = any(cls is not None and cls.checks_reads(section) for cls in runs)
        twins = {d: list(s["twin"]) for d, s in sections.items() if "twin" in s}
        workloads.append({"name": name, "systems": list(workload.systems), "objective": workload.objective.value,
                          "records": workload.records, "ladder": list(workload.ladder),
                          "verifiable": verifiable, "verifiable_twin": twins, "description": workload.description})
    return workloads


def knobs(system: SystemArgument, json_output: JsonOption = False) -> None:
    """The knob catalog of SYSTEM, with each knob's safety class.

    Example: knobtune knobs rocksdb --json
    """
    catalog = load_catalog(system)
    if json_output:
        console.print_json(catalog.to_dict())
        return
    console.out.print(console.catalog_table(catalog))
    console.out.print("relations: " + "; ".join(map(str, catalog.relations)))
    console.out.print("implications: " + "; ".join(map(str, catalog.implications)))


def baseline(
    system: SystemArgument,
    profile: Annotated[Optional[str], typer.Option(help="PostgreSQL (PGTune): the database type, web, oltp, dw, "
                                                        "desktop or mixed.")] = None,
    disk: Annotated[Optional[str], typer.Option(help="ssd, hdd or san (default: hdd when a disk here says it spins, "
                                                     "else ssd).")] = None,
    connections: Annotated[Optional[int], typer.Option(help="Client connections expected (default: the profile's "
                                                            "max_connections).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Another known config of the system, e.g. "
                                                               "db-bench-universal (RocksDB: the configs published for "
                                                               "db_bench).")] = None,
    json_output: JsonOption = False,
    output: Annotated[Optional[Path],
                      typer.Option("-o", "--output", help="Write it as JSON, for `compare --config FILE`.")] = None,
    force: ForceOption = False,
) -> None:
    """The heuristic config users start from, to compare against.

    PGTune for PostgreSQL, the tuning guide's for RocksDB.

    Example: knobtune baseline postgresql --profile oltp -o pgtune.json
    """
    output = output_path(output)
    if output:
        check_output(OutputFile(output, Written.JSON), force=force)
    result = heuristic_config(system, Machine.from_host(disk, connections), profile, name)
    told = [disk_detection()] if disk is None and result.name == "pgtune" else []  # a fixed config ignores the disk
    if output:
        write_output(output, result.to_json())
        told.append(f"wrote {output}; measure it: knobtune compare {system} --workload WORKLOAD "
                    f"--config default --config {output}")
    for line in told:
        console.err.print(line, markup=False)
    if json_output:
        console.print_json(result.to_dict())
        return
    for line in result.describe():
        console.out.print(line, markup=False)

