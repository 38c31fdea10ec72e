"""Every command, catalog, knob and workload is documented."""

from __future__ import annotations

import re
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


def test_docs_stand_on_their_own() -> None:
    """Whoever clones the repository has only the repository: no doc, data file or bench points outside it, and every
    relative link in README.md, docs/ and bench/ names a file that is there."""
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "knobtune").rglob("*.toml"),
             *(ROOT / "knobtune").rglob("*.py"), *(ROOT / "bench").glob("*.py"), *(ROOT / "bench").glob("*.md"),
             *(ROOT / "bench" / "questions").glob("*.toml")]
    texts = {p: p.read_text() for p in files}
    outside = [str(p.relative_to(ROOT)) for p, text in texts.items() if "../shared" in text]
    assert outside == []
    broken = [f"{p.relative_to(ROOT)}: {target}" for p, text in texts.items() if p.suffix == ".md"
              for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text)
              if not (p.parent / target).exists()]
    assert broken == []


def test_readme_counts_are_the_catalogs() -> None:
    readme = (ROOT / "README.md").read_text()
    for system in available_systems():
        said = re.search(rf"knobtune knobs {system}\s+# (\d+) knobs", readme)
        if said:
            assert int(said.group(1)) == len(load_catalog(system).knobs), f"README's knob count for {system}"


def test_every_field_of_the_experiment_is_documented() -> None:
    import dataclasses
    import typing

    from knobtune.tuning.document import ExperimentDoc

    def paths(kind: type, prefix: str = "") -> list[str]:
        found = []
        for f in dataclasses.fields(kind):
            hint = typing.get_type_hints(kind)[f.name]
            path = f"{prefix}{f.name}"
            found += paths(hint, f"{path}.") if dataclasses.is_dataclass(hint) else [path]
        return found

    text = (ROOT / "docs" / "experiment.md").read_text()
    assert [path for path in paths(ExperimentDoc) if f"| `{path}` |" not in text] == []
