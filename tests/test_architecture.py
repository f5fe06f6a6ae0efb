"""The layering of DESIGN.md, checked on the source: imports point one way only.

`states <- engine <- effects <- testing <- tools`, with `specs` beside `effects`; the pure
core (`engine/`, `states/`) imports nothing that does I/O, runs a loop or reads
a clock. The package's own `toolloop/__init__.py` (the public API) sits on top
and leaves `specs` out: transitions belongs to the `cli` extra.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "states": {"states"},
    "engine": {"states", "engine"},
    "effects": {"states", "engine", "effects"},
    "specs": {"states", "engine", "specs"},
    "testing": {"states", "engine", "effects", "specs", "testing"},
    "tools": {"states", "engine", "effects", "specs", "testing", "tools"},
    "toolloop": {"states", "engine", "effects", "tools"},
}
FOLDERS = sorted(set(ALLOWED) - {"toolloop"})
"""The subpackages, each a top-level folder of the repository."""
IMPURE = {
    "anyio",
    "asyncio",
    "trio",
    "httpx",
    "socket",
    "ssl",
    "time",
    "datetime",
    "random",
    "subprocess",
    "threading",
    "logging",
    "urllib",
    "http",
    "selectors",
    "signal",
}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, with its line (relative imports resolved to toolloop)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = ".".join(["toolloop", *path.relative_to(ROOT).parent.parts])
                found.append((node.lineno, f"{package}.{node.module or ''}"))
            elif node.module:
                found.append((node.lineno, node.module))
    return found


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_folders_import_each_other_one_way_only(folder: str) -> None:
    """A folder imports only the folders beneath it in the layering."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sources(folder)
        for line, name in imports_of(path)
        if name.startswith("toolloop.") and name.split(".")[1] not in ALLOWED[folder]
    ]
    assert wrong == []


@pytest.mark.parametrize("folder", ["engine", "states"])
def test_pure_core_imports_nothing_that_does_io_or_reads_a_clock(folder: str) -> None:
    """engine/ and states/ stay sans-IO: no trio, anyio, httpx, clocks, sockets or logging."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sources(folder)
        for line, name in imports_of(path)
        if name.split(".")[0] in IMPURE
    ]
    assert wrong == []


def test_no_bare_top_level_packages_are_importable() -> None:
    """The folders are installed only as `toolloop.*`, never as `engine` and the like."""
    import importlib.util
    import sys

    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
        for folder in FOLDERS:
            assert importlib.util.find_spec(folder) is None, folder
            assert importlib.util.find_spec(f"toolloop.{folder}") is not None
    finally:
        sys.path[:] = saved


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The import scan reports what a file imports, so the rules above can fail."""
    sample = tmp_path / "sample.py"
    sample.write_text("import trio\nfrom toolloop.effects import ports\n")
    assert imports_of(sample) == [(1, "trio"), (2, "toolloop.effects")]
