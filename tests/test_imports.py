"""The shape of the house, held: every module imports; no import cycle; no arrow up a layer; no private module
imported from another package; each room of tuning entered through its face; no class over 300 lines, no module
over 500 (nor a native source file).

Imports are read from the source with ``ast`` (every import, a function's too), so a rule holds for code no test
runs. The layers are DESIGN.md's data path, written down below as data: a module may import its own package, and
any package on a lower layer than its own; two packages on one layer know nothing of each other.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import knobtune

ROOT = Path(knobtune.__file__).parent
TOP = Path(__file__).parents[1]

# Each package's children, from the top layer down. A child not named here is refused by
# test_every_package_child_has_a_layer, so a new module or package has to be placed.
LAYERS: dict[str, list[set[str]]] = {
    "knobtune": [
        {"cli", "file_kinds"},  # thin: flags and files into the experiment; every kind of file the schema reads
        {"console"},  # a study's progress and verdict on the terminal
        {"report"},  # draws what analysis computed
        {"tuning"},  # decides what to run and runs it through a target
        {"systems"},  # one folder per system, and the registry of them
        {"described", "drivers"},  # a system described as data; the drivers embedded stores share
        {"server"},  # one server's life, shared by every server target
        {"targets", "analysis", "storage"},  # the contract of a target; pure statistics; where studies live
        {"knobs", "workloads", "outputs"},  # catalogs, workloads as data, files knobtune writes
        {"schema_views"},  # the schema as a JSON Schema and as a page of fields
        {"schema"},  # every file a user writes is read through it
        {"names", "datafile", "reconnecting", "units"},  # units: sizes and durations, read and shown
        {"errors", "processes", "installing", "interrupts"},
    ],
    "knobtune.tuning": [
        {"loop", "sweep"},  # the study's loop; a sweep of one knob
        {"proof"},  # interleaved repeats, the verdict, the ablation path
        {"document"},  # the experiment, as asked and as resolved on this machine
        {"search"},  # the space, the samplers, the rules' starts, the knobs that matter
        {"records"},  # what a study stores, typed
    ],
}

# analysis is pure (DESIGN.md): it imports none of tuning, targets or report, whatever the layers allow
NEVER = {"knobtune.analysis": ("knobtune.tuning", "knobtune.targets", "knobtune.report", "knobtune.systems",
                               "knobtune.storage")}

# Modules over MAX_MODULE_LINES today, each with why; this list only shrinks.
LONG_ALLOWED: set[str] = set()

# Private modules imported from elsewhere, each with why; this list only shrinks.
PRIVATE_ALLOWED: set[tuple[str, str]] = set()

MAX_CLASS_LINES = 300
MAX_MODULE_LINES = 500


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {"knobtune" + ("." + name if name else ""): path
            for path in ROOT.rglob("*.py") for name in [_module_name(path, ROOT)]}


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(path: Path, name: str) -> Iterator[tuple[str, int]]:
    """The knobtune modules ``path`` (module ``name``) imports, with the line: ``from P import m`` is an import of
    the module ``P.m`` when there is one, else of ``P`` (a package's face)."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    yield f"{base}.{alias.name}", node.lineno
                elif base in MODULES:
                    yield base, node.lineno


ARROWS = {name: sorted(set(_imports(path, name))) for name, path in MODULES.items()}


def _external_imports(folder: str) -> Iterator[tuple[str, str, int]]:
    """(file, knobtune module imported, line) for every .py file of a folder outside the package (tests, bench)."""
    for path in (TOP / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module in MODULES and not node.level:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    yield str(path.relative_to(TOP)), target if target in MODULES else node.module, node.lineno
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES:
                        yield str(path.relative_to(TOP)), alias.name, node.lineno


def test_every_module_imports() -> None:
    """The quick lane (`scripts/test -m "not slow"`) touches every module, including those only the full suite runs."""
    names = [m.name for m in pkgutil.walk_packages(knobtune.__path__, "knobtune.") if m.name != "knobtune.cli.__main__"]
    assert len(names) > 100 and "knobtune.systems.cassandra.target" in names
    for name in names:
        importlib.import_module(name)


def test_no_import_cycle() -> None:
    """No module reaches itself through the modules it imports (a package's face counts as its own module)."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    cycles: list[list[str]] = []

    def walk(name: str, path: list[str]) -> None:
        state[name] = 1
        for target, _ in ARROWS[name]:
            if target == name:
                continue
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                walk(target, path + [target])
        state[name] = 2

    for name in sorted(MODULES):
        if name not in state:
            walk(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _layer(package: str, child: str) -> int:
    return next(i for i, layer in enumerate(LAYERS[package]) if child in layer)


def test_every_package_child_has_a_layer() -> None:
    for package, layers in LAYERS.items():
        children = {name[len(package) + 1:].split(".")[0] for name in MODULES if name.startswith(package + ".")}
        placed = set().union(*layers)
        assert children == placed, f"{package}: unplaced {sorted(children - placed)}, gone {sorted(placed - children)}"


def _upward(source: str, target: str) -> str | None:
    """Why the arrow ``source`` -> ``target`` goes up or across a layer, or None when it goes down or stays home."""
    for package in LAYERS:
        prefix = package + "."
        if not (source.startswith(prefix) and target.startswith(prefix)):
            continue
        mine, theirs = source[len(prefix):].split(".")[0], target[len(prefix):].split(".")[0]
        if mine == theirs:
            continue
        if _layer(package, theirs) < _layer(package, mine):
            return f"{package}: {mine} imports {theirs}, a layer above it"
        if _layer(package, theirs) == _layer(package, mine):
            return f"{package}: {mine} imports {theirs}, beside it on its layer"
    return None


def test_no_arrow_goes_up_a_layer() -> None:
    found = [f"{source}:{line} -> {target} ({why})" for source, arrows in ARROWS.items() for target, line in arrows
             if source not in LAYERS and (why := _upward(source, target))]
    assert not found, "\n".join(found)


def test_analysis_stays_pure() -> None:
    found = [f"{source}:{line} -> {target}" for package, never in NEVER.items()
             for source, arrows in ARROWS.items() if source.startswith(package + ".") or source == package
             for target, line in arrows if target.startswith(never)]
    assert not found, "\n".join(found)


def _private_from_elsewhere(source: str, target: str) -> bool:
    """Whether ``target`` is (inside) a ``_`` module that ``source``, outside its package, imports."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            home = ".".join(parts[:i]) + "."
            return not (source + ".").startswith(home)
    return False


def test_no_private_module_is_imported_from_another_package() -> None:
    """A package's ``_`` modules are its own: others import what its face (``__init__.py``) hands on. The tests and
    bench are other packages too."""
    found = [f"{source}:{line} -> {target}" for source, arrows in ARROWS.items() for target, line in arrows
             if _private_from_elsewhere(source, target)]
    found += [f"{file}:{line} -> {target}" for folder in ("tests", "bench") for file, target, line in
              _external_imports(folder) if _private_from_elsewhere("", target)
              and (file, target) not in PRIVATE_ALLOWED]
    assert not found, "\n".join(found)


def test_bench_imports_the_library_not_the_cli() -> None:
    """What bench needs of knobtune is library (the document's options, a resolved experiment); it runs the command
    as users do, never through the CLI's modules."""
    found = [f"{file}:{line} -> {target}" for file, target, line in _external_imports("bench")
             if target == "knobtune.cli" or target.startswith("knobtune.cli.")]
    assert not found, "\n".join(found)


def test_a_room_of_tuning_is_entered_through_its_face() -> None:
    """Outside a room of tuning, knobtune and bench import what its ``__init__.py`` hands on, never from its modules
    (the tests of the loop's parts may reach in)."""
    faces = [f"knobtune.tuning.{room}" for layer in LAYERS["knobtune.tuning"] for room in layer]
    files = [(path, _module_name(path, ROOT.parent)) for path in [*ROOT.rglob("*.py"), *(TOP / "bench").rglob("*.py")]]
    found = []
    for path, name in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            written = [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(TOP)}:{node.lineno} -> {module}" for module in written for face in faces
                      if module.startswith(face + ".") and not (name + ".").startswith(face + ".")]
    assert not found, "\n".join(found)


def test_no_class_over_300_lines_and_no_module_over_500() -> None:
    """knobtune's modules and the bench's scripts alike (a newcomer reads both)."""
    found = []
    for path in [*MODULES.values(), *(TOP / "bench").rglob("*.py")]:
        text = path.read_text()
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES and str(path.relative_to(TOP)) not in LONG_ALLOWED:
            found.append(f"{path.relative_to(TOP)}: {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and (lines := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                found.append(f"{path.relative_to(TOP)}: class {node.name} {lines} lines (at most {MAX_CLASS_LINES})")
    assert not found, "\n".join(found)


def test_no_native_source_over_500_lines() -> None:
    """The native drivers' C and C++ are read as the Python is: a file over 500 lines is split at a seam."""
    found = [f"{path.relative_to(TOP)}: {lines} lines (at most {MAX_MODULE_LINES})"
             for path in sorted((TOP / "native").rglob("*")) if path.suffix in (".c", ".cc", ".h")
             and "build" not in path.relative_to(TOP / "native").parts
             and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not found, "\n".join(found)
