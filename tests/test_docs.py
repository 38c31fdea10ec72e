"""Every command, catalog, knob and workload is documented."""

from __future__ import annotations

from pathlib import Path

import typer.main

from knobtune.cli import app
from knobtune.knobs import available_systems, load_catalog
from knobtune.workloads import available_workloads

ROOT = Path(__file__).parent.parent


def test_every_command_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = typer.main.get_command(app).commands
    missing = [name for name in commands if f"knobtune {name}" not in readme]
    assert missing == []


def test_every_catalog_has_a_page_naming_every_knob() -> None:
    for system in available_systems():
        page = ROOT / "docs" / f"{system}.md"
        assert page.exists(), f"docs/{system}.md is missing"
        text = page.read_text()
        missing = [name for name in load_catalog(system).knobs if f"`{name}`" not in text]
        assert missing == [], f"docs/{system}.md does not name {missing}"


def test_every_workload_is_documented() -> None:
    text = (ROOT / "docs" / "workloads.md").read_text()
    assert [w for w in available_workloads() if f"`{w}`" not in text] == []


def test_readme_starts_with_the_two_commands() -> None:
    first = (ROOT / "README.md").read_text().splitlines()[:4]
    assert first[1].startswith("scripts/demo") and first[2].startswith("scripts/test")
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec bash scripts/test")
